-- model: rw_read
-- rw_read: take a read-write lock shared (a reader): granted where no
-- writer holds the lock and no writer waits (a live intent, rw.lua); it
-- sets the reader's own key and records it in the index, scored with the
-- end of its lease (ms, no TTL on the index: rw.lua), and counts a new
-- holder on the counter the writers share, so that a reader's token
-- exceeds every earlier writer's.
-- KEYS[1] writer lock W, KEYS[2] fence W:fence, KEYS[3] readers index
-- W:readers, KEYS[4] writers' intents W:intent, KEYS[5] the reader's key
-- W:reader:<token>, KEYS[6] the node's marker key (trust.lua)
-- ARGV[1] token, ARGV[2] owner label, ARGV[3] lease TTL in ms, ARGV[4]
-- optional floor (acquire.lua), ARGV[5] unused (was the seed step),
-- ARGV[6] the prefix of reader keys (W:reader:); ARGV[7] the rejoin delay
-- in milliseconds (trust.lua, t_trust)
-- Returns {1, counter} when granted, {1, counter, pttl} when the token
-- already held it (a client-side retry), {0, pttl} when a writer holds
-- the lock, {0, ms, 0, 1} when a writer waits (ms: the most its intent
-- has left), and {3, ms, why} when the node may not grant (trust.lua; a
-- retried call too) or the writer's key is missing while the counter
-- records its live lease (why key-lost, counter.lua C5). A replica answers
-- an error "REPLICA ...". Every check that can fail runs before the first
-- write, a SET.
local cur, lerr = l_get(KEYS[5])
if lerr then return lerr end
local fence, bad, upto = c_read(KEYS[2])
if bad then return redis.error_reply(bad) end
if l_holds(cur, ARGV[1]) then
  local floor, refusal = t_gate(KEYS[6], ARGV[7], ARGV[4])
  if not floor then return refusal end
  if not fence then fence = c_count(KEYS[2], false, floor, nil) end
  return {1, fence, redis.call('PTTL', KEYS[5])}
end
local w, werr = l_get(KEYS[1])
if werr then return werr end
local now = q_now()
local live, _, gone, err = rw_readers(KEYS[3], ARGV[6], now)
if err then return redis.error_reply(err) end
if w then return {0, redis.call('PTTL', KEYS[1])} end
local waiting, left, ierr = rw_intent(KEYS[4], now)
if ierr then return redis.error_reply(ierr) end
if waiting > 0 then return {0, left, 0, 1} end
if fence == c_top then
  return redis.error_reply('FENCEEXHAUSTED redlock fence key ' .. KEYS[2] .. ' is at ' .. c_top ..
    ', the largest counter Redis holds: no greater fencing token can be issued')
end
local floor, refusal, checked = t_gate(KEYS[6], ARGV[7], ARGV[4])
if not floor then return refusal end
local lost = c_lost(upto, c_now())
if checked and lost > 0 then return {3, lost, 'key-lost'} end
redis.call('SET', KEYS[5], ARGV[1] .. ' ' .. ARGV[2], 'PX', ARGV[3])
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PERSIST', KEYS[3])
rw_purge(KEYS[3], gone)
return {1, c_count(KEYS[2], fence, floor, nil)}
