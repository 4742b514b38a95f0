-- model: release
-- release: give up the caller's own lock and, when asked, tell waiters it
-- is free or hand it over to the head of its wait queue. Never touches a
-- lock held by another token.
-- KEYS[1] lock key, KEYS[2] fence key, KEYS[3] and KEYS[4] the lock's wait
-- queue (queue.lua); without KEYS[3] the lock has no queue; KEYS[5] the
-- node's marker key (trust.lua)
-- ARGV[1] token, ARGV[2] release channel, ARGV[3] the announcement (the
-- release id waiters count it by), or "" for none; ARGV[4] the rejoin
-- delay in milliseconds for a hand-over (negative: 0, trust.lua; "" or
-- absent: no hand-over; a node that may not grant, or a replica, hands
-- nothing over), ARGV[5] unused (was the seed step); ARGV[6] the caller's
-- own place in the wait queue ("" or absent: none), removed, and whose
-- token's lock (one handed over to the place) is released as the caller's
-- own.
-- A lock it deletes ends its lease (counter.lua, c_end): the counter goes
-- back to "V" for c_life, or a reader of a read-write lock leaves its
-- readers index, which the reader declares as its last key (after
-- KEYS[4], or KEYS[5] when a marker is given).
-- When the lock has a live queue, the announcement names its head after a
-- space: only that waiter need try. When the head left what the lock is
-- set to, the lock is handed over to it instead of deleted (q_give), and
-- the announcement (q_announce) also says the fence counter that counted
-- it, on the channel the head named.
-- Returns 0 when the caller does not hold the lock here; otherwise 1 plus
-- the number of subscribers that heard the announcement, and when the
-- announcement named a head, {that number, the head} or, when the lock
-- was handed over to it, {that number, the head, the counter}.
local v, lerr = l_get(KEYS[1])
if lerr then return lerr end
local mine = l_holds(v, ARGV[1])
if v and not mine and ARGV[6] and ARGV[6] ~= '' then
  -- A lock handed over to the caller's place after its lease was granted
  -- is the caller's too.
  local _, _, _, value = q_member(ARGV[6])
  mine = l_holds(v, l_token(value))
end
-- unplace removes the caller's own place. A queue key that holds someone
-- else's data is left alone.
local function unplace()
  if ARGV[6] and ARGV[6] ~= '' and KEYS[3] then
    redis.pcall('ZREM', KEYS[3], ARGV[6])
    redis.pcall('ZREM', KEYS[4], ARGV[6])
  end
end
if not mine then
  unplace()
  return 0
end
if ARGV[3] == '' or not KEYS[3] then
  redis.call('DEL', KEYS[1])
  c_end(KEYS[1], KEYS[2])
  unplace()
  if ARGV[3] == '' then return 1 end
  return 1 + redis.call('PUBLISH', ARGV[2], ARGV[3])
end
-- The caller's own place may still stand here (a late call of one of its
-- attempts queued it again): it is passed over, never handed the lock.
-- Without a head, q_give scanned the whole queue and removed it already.
local head, counter, hch = q_give(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[4], ARGV[6])
if not counter then
  redis.call('DEL', KEYS[1])
  c_end(KEYS[1], KEYS[2])
end
if head then unplace() end
local heard = 1 + q_announce(ARGV[2], ARGV[3], head, counter, hch, KEYS[1])
if counter then return {heard, head, counter} end
if head then return {heard, head} end
return heard
