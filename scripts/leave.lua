-- model: leave
-- leave: take a waiter out of a lock's wait queue (an Acquire that ended
-- without the lock). In mode "give", a lock the waiter's token holds
-- here (handed over to it: queue.lua, q_give) is given up too. When the
-- waiter was the head of a free lock, or gave the lock up, the new head is
-- announced on the release channel, so that it tries at once (no hand-over
-- here: this script has written before, and a node out of memory must
-- refuse a grant's first write). Helpers: lock.lua, counter.lua,
-- queue.lua.
-- KEYS[1] the lock key P{R}, KEYS[2] the fence counter P{R}:fence (a lock
--   given up ends its lease: counter.lua, c_end), KEYS[3] and KEYS[4] the
--   lock's wait queue, tickets P{R}:queue and expiries P{R}:queue:exp
-- ARGV[1] the waiter's place's id, ARGV[2] release channel, ARGV[3] the
--   announcement's id, ARGV[4] mode: "give" (the place leaves and gives
--   up a lock handed over to it) or "leave" (the place only leaves;
--   absent: "leave"), ARGV[5] the place's hand-over mode: "handover" (the
--   place may be handed the lock: ARGV[6] to ARGV[9] follow) or "none"
--   (absent: "none"; the place is the id alone), ARGV[6] the hand-over
--   ttl in ms, ARGV[7] its channel ("-" for the lock's own), ARGV[8] the
--   place's token and ARGV[9] its owner label; the place stored is built
--   from them (queue.lua, q_place, q_member)
-- Replies:
--   1                      the waiter was queued here or held the lock
--   0                      neither: nothing is changed
--   error ERR ...          a mode of another name, or a place's field
--                          that q_place refuses (nothing is read)
local mode = ARGV[4] or 'leave'
if mode ~= 'give' and mode ~= 'leave' then
  return redis.error_reply('ERR redlock leave: mode ' .. mode .. ' is neither give nor leave')
end
-- place is the waiter's place as stored.
local place, perr = q_place('leave', ARGV[1], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9])
if not place then return redis.error_reply(perr) end
local _, _, _, value = q_member(place)
local held = false
if value and mode == 'give' then
  held = l_holds(redis.pcall('GET', KEYS[1]), l_token(value))
end
local first, _, _, err = q_scan(KEYS[3], KEYS[4], nil)
if err then
  first = nil -- someone else's data: no queue to leave
end
local queued = false
if not err then
  queued = redis.call('ZREM', KEYS[3], place) == 1
  redis.call('ZREM', KEYS[4], place)
end
if not queued and not held then
  return 0
end
if held or (first == place and redis.call('EXISTS', KEYS[1]) == 0) then
  if held then
    redis.call('DEL', KEYS[1])
    c_end(KEYS[1], KEYS[2])
  end
  local head = nil
  if not err then head = q_scan(KEYS[3], KEYS[4], nil) end
  if head then head = q_member(head) end
  if head or held then q_announce(ARGV[2], ARGV[3], head) end
end
return 1
