-- model: rw_write
-- rw_write: take a read-write lock exclusively (a writer): granted only
-- where no writer holds the lock and no live reader is recorded
-- (rw.lua); it counts a new holder on the counter the readers share, and
-- records its lease's end there (counter.lua, C3).
-- KEYS[1] writer lock W, KEYS[2] fence W:fence, KEYS[3] readers index
-- W:readers, KEYS[4] writers' intents W:intent, KEYS[5] the node's marker
-- key (trust.lua)
-- ARGV[1] token, ARGV[2] owner label, ARGV[3] lease TTL in ms, ARGV[4]
-- optional floor (acquire.lua), ARGV[5] unused (was the seed step), ARGV[6]
-- the prefix of reader keys (W:reader:), ARGV[7] the waiting writer's id
-- ("" for one that does not wait: TryAcquire), ARGV[8] how long its intent
-- lasts, in ms; ARGV[9] the rejoin delay in milliseconds (trust.lua,
-- t_trust)
-- Returns {1, counter} when granted (the counter a decimal string), {1,
-- counter, pttl} when the token already held it (a client-side retry),
-- {0, pttl} when a writer holds it, {0, ms, readers} when readers hold it
-- (ms: the longest PTTL among them), and {3, ms, why} when the node may
-- not grant (trust.lua; a retried call too), or a writer's or a reader's
-- key is missing before the end of its lease that the counter or the
-- readers index records (why key-lost, counter.lua C5). A replica answers
-- an error "REPLICA ...". A refused writer with an id records its intent
-- (for ARGV[8] ms), so that new readers wait behind it; a granted one
-- removes its own.
-- Every check that can fail runs before the first write, which is the
-- SET of a grant or the ZADD of an intent (a node out of memory refuses
-- either).
local cur, lerr = l_get(KEYS[1])
if lerr then return lerr end
local fence, bad, upto = c_read(KEYS[2])
if bad then return redis.error_reply(bad) end
if l_holds(cur, ARGV[1]) then
  local floor, refusal = t_gate(KEYS[5], ARGV[9], ARGV[4])
  if not floor then return refusal end
  local p = redis.call('PTTL', KEYS[1])
  if not fence then fence = c_count(KEYS[2], false, floor, c_now() + math.max(p, 0) * 1000) end
  return {1, fence, p}
end
local now = q_now()
local live, longest, gone, err, lostReader = rw_readers(KEYS[3], ARGV[6], now)
if err then return redis.error_reply(err) end
local _, _, ierr = rw_intent(KEYS[4], now)
if ierr then return redis.error_reply(ierr) end
local id = ARGV[7] or ''
if cur or live > 0 then
  if id ~= '' then
    redis.call('ZADD', KEYS[4], now + (tonumber(ARGV[8]) or 1000), id)
    redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
    redis.call('PEXPIRE', KEYS[4], tonumber(ARGV[8]) or 1000)
    rw_purge(KEYS[3], gone)
  end
  if cur then return {0, redis.call('PTTL', KEYS[1])} end
  return {0, longest, live}
end
if fence == c_top then
  return redis.error_reply('FENCEEXHAUSTED redlock fence key ' .. KEYS[2] .. ' is at ' .. c_top ..
    ', the largest counter Redis holds: no greater fencing token can be issued')
end
local floor, refusal, checked = t_gate(KEYS[5], ARGV[9], ARGV[4])
if not floor then return refusal end
local us = c_now()
local lost = math.max(c_lost(upto, us), lostReader)
if checked and lost > 0 then return {3, lost, 'key-lost'} end
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. ARGV[2], 'PX', ARGV[3])
if id ~= '' then redis.call('ZREM', KEYS[4], id) end
rw_purge(KEYS[3], gone)
return {1, c_count(KEYS[2], fence, floor, us + tonumber(ARGV[3]) * 1000)}
