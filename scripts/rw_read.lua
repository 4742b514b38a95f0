-- model: rw_read
-- rw_read: take a read-write lock shared (a reader): granted where no
-- writer holds the lock and no writer waits (a live intent, rw.lua); it
-- sets the reader's own key and records it in the index, and counts a new
-- holder on the counter the writers share, so that a reader's token
-- exceeds every earlier writer's.
-- KEYS[1] writer lock W, KEYS[2] fence W:fence, KEYS[3] readers index
-- W:readers, KEYS[4] writers' intents W:intent, KEYS[5] the reader's key,
-- KEYS[6] the node's marker key (trust.lua)
-- W:reader:<token>
-- ARGV[1] token, ARGV[2] owner label, ARGV[3] lease TTL in ms, ARGV[4]
-- optional floor, ARGV[5] granularity of a new counter's start (both as
-- acquire.lua), ARGV[6] the prefix of reader keys (W:reader:); ARGV[7],
-- ARGV[8], ARGV[9] the data-loss rule's arguments (t_trust, trust.lua): a
-- node that may have lost data refuses with {3, ms, why}
-- Returns {1, counter} when granted, {1, counter, pttl} when the token
-- already held it (a client-side retry), {0, pttl} when a writer holds
-- the lock, and {0, ms, 0, 1} when a writer waits (ms: the most its
-- intent has left). Every check that can fail runs before the first
-- write, a SET.
local cur, lerr = l_get(KEYS[5])
if lerr then return lerr end
local fence, bad = c_read(KEYS[2])
if bad then return redis.error_reply(bad) end
if l_holds(cur, ARGV[1]) then
  return {1, fence, redis.call('PTTL', KEYS[5])}
end
local w, werr = l_get(KEYS[1])
if werr then return werr end
local live, _, gone, err = rw_readers(KEYS[3], ARGV[6])
if err then return redis.error_reply(err) end
if w then return {0, redis.call('PTTL', KEYS[1])} end
local waiting, left, ierr = rw_intent(KEYS[4], q_now())
if ierr then return redis.error_reply(ierr) end
if waiting > 0 then return {0, left, 0, 1} end
if fence == c_top then
  return redis.error_reply('FENCEEXHAUSTED redlock fence key ' .. KEYS[2] .. ' is at ' .. c_top ..
    ', the largest counter Redis holds: no greater fencing token can be issued')
end
local floor, refusal = t_gate(KEYS[6], ARGV[7], ARGV[8], ARGV[9], ARGV[4])
if not floor then return refusal end
redis.call('SET', KEYS[5], ARGV[1] .. ' ' .. ARGV[2], 'PX', ARGV[3])
redis.call('ZADD', KEYS[3], 0, ARGV[1])
rw_purge(KEYS[3], gone)
return {1, c_count(KEYS[2], fence, floor, ARGV[5])}
