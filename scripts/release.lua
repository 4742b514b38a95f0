-- model: release
-- release: give up the caller's own lock and, when asked, tell waiters it
-- is free or hand it over to the head of its wait queue. Never touches a
-- lock held by another token. Helpers: lock.lua, counter.lua, trust.lua,
-- queue.lua.
-- KEYS[1] the lock key P{R}, KEYS[2] the fence counter P{R}:fence,
--   KEYS[3] and KEYS[4] (optional: without KEYS[3] the lock has no queue)
--   the lock's wait queue, tickets P{R}:queue and expiries P{R}:queue:exp
--   (queue.lua), KEYS[5] (optional) the node's marker key (trust.lua); a
--   reader of a read-write lock declares its readers index last (after
--   KEYS[4], or KEYS[5] when a marker is given)
-- ARGV[1] token, ARGV[2] release channel, ARGV[3] the announcement (the
--   release id waiters count it by; mode "announce"), ARGV[4] announce
--   mode: "announce" (tell waiters on the channel) or "quiet" (absent:
--   "quiet"), ARGV[5] hand-over mode: "handover" (in mode "announce",
--   hand the lock over to the head of its queue when the head asked for
--   it; a node that may not grant, or a replica, hands nothing over) or
--   "none" (absent: "none"), ARGV[6] the rejoin delay in ms for a
--   hand-over (trust.lua; negative counts as 0), ARGV[7] place mode:
--   "place" (the caller names its own place in the wait queue) or "none"
--   (absent: "none"), ARGV[8] that place's waiter id (mode "place"):
--   the place is removed, and its token's lock (one handed over to the
--   place) is released as the caller's own, ARGV[9] the place's hand-over
--   mode (mode "place"): "handover" (the place may be handed the lock:
--   ARGV[10] to ARGV[13] follow) or "none" (absent: "none"; the place is
--   the id alone), ARGV[10] the hand-over ttl in ms, ARGV[11] its channel
--   ("-" for the lock's own), ARGV[12] the place's token and ARGV[13] its
--   owner label; the place stored is built from them (queue.lua, q_place,
--   q_member)
-- Reply: always {verdict, heard, head, counter}, each field in its place
-- and of its type whatever the verdict (one it does not use is "" or 0):
--   verdict  "notheld"   the caller does not hold the lock here (its own
--                        place, if named, is removed); nothing else changed
--            "released"  the lock is deleted
--            "handed"    the lock was handed over to the head of its queue
--                        (q_give), counted as a new holder with counter (a
--                        decimal string)
--   heard    how many subscribers heard the announcement (0 in mode
--            "quiet")
--   head     the head of the live queue the announcement named ("" for
--            none)
--   counter  the new holder's counter ("handed"; else "")
-- Errors:
--   error WRONGTYPE ...    the lock key holds someone else's data
--   error ERR ...          a mode of another name, or a place's field
--                          that q_place refuses (nothing is read)
-- A lock it deletes ends its lease (counter.lua, c_end): the counter goes
-- back to "V" for c_life, or a reader of a read-write lock leaves its
-- readers index.
-- When the lock has a live queue, the announcement names its head after a
-- space: only that waiter need try. When the head left what the lock is
-- set to, the lock is handed over to it instead of deleted (q_give), and
-- the announcement (q_announce) also says the fence counter that counted
-- it, on the channel the head named.
local announce, handover, placed = ARGV[4] or 'quiet', ARGV[5] or 'none', ARGV[7] or 'none'
for _, m in ipairs({{'announce', announce, 'announce', 'quiet'}, {'hand-over', handover, 'handover', 'none'},
    {'place', placed, 'place', 'none'}}) do
  if m[2] ~= m[3] and m[2] ~= m[4] then
    return redis.error_reply('ERR redlock release: ' .. m[1] .. ' mode ' .. m[2] .. ' is neither ' .. m[3] .. ' nor ' .. m[4])
  end
end
-- Each mode's value must be there: an announcement, a place, a delay
-- (plain ifs: this runs at every release).
if announce == 'announce' and (ARGV[3] or '') == '' then
  return redis.error_reply('ERR redlock release: mode announce needs an announcement')
elseif placed == 'place' and (ARGV[8] or '') == '' then
  return redis.error_reply('ERR redlock release: mode place needs a place')
elseif handover == 'handover' and not tonumber(ARGV[6] or '') then
  return redis.error_reply('ERR redlock release: mode handover needs a rejoin delay in ms')
end
-- place is the caller's own place as stored ('' for none: q_place),
-- delay the rejoin delay of a hand-over ('' for none: q_give hands
-- nothing over).
local place, delay = '', ''
if placed == 'place' then
  local perr
  place, perr = q_place('release', ARGV[8], ARGV[9], ARGV[10], ARGV[11], ARGV[12], ARGV[13])
  if not place then return redis.error_reply(perr) end
end
if handover == 'handover' then delay = ARGV[6] end
local v, lerr = l_get(KEYS[1])
if lerr then return lerr end
local mine = l_holds(v, ARGV[1])
if v and not mine and place ~= '' then
  -- A lock handed over to the caller's place after its lease was granted
  -- is the caller's too.
  local _, _, _, value = q_member(place)
  mine = l_holds(v, l_token(value))
end
-- unplace removes the caller's own place. A queue key that holds someone
-- else's data is left alone.
local function unplace()
  if place ~= '' and KEYS[3] then
    redis.pcall('ZREM', KEYS[3], place)
    redis.pcall('ZREM', KEYS[4], place)
  end
end
if not mine then
  unplace()
  return {'notheld', 0, '', ''}
end
if announce == 'quiet' or not KEYS[3] then
  redis.call('DEL', KEYS[1])
  c_end(KEYS[1], KEYS[2])
  unplace()
  if announce == 'quiet' then return {'released', 0, '', ''} end
  return {'released', redis.call('PUBLISH', ARGV[2], ARGV[3]), '', ''}
end
-- The caller's own place may still stand here (a late call of one of its
-- attempts queued it again): it is passed over, never handed the lock.
-- Without a head, q_give scanned the whole queue and removed it already.
local head, counter, hch = q_give(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], delay, place)
if not counter then
  redis.call('DEL', KEYS[1])
  c_end(KEYS[1], KEYS[2])
end
if head then unplace() end
local heard = q_announce(ARGV[2], ARGV[3], head, counter, hch, KEYS[1])
if counter then return {'handed', heard, head, counter} end
return {'released', heard, head or '', ''}
