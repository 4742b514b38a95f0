-- model: rw_read
-- rw_read: take a read-write lock shared (a reader). Helpers: lock.lua,
-- counter.lua, trust.lua, rw.lua.
-- KEYS[1] the writer's lock W, KEYS[2] the fence counter W:fence, KEYS[3]
--   the readers index W:readers, KEYS[4] the writers' intents W:intent,
--   KEYS[5] the reader's own key W:reader:<token>, KEYS[6] the node's
--   marker key (trust.lua; absent when the caller does not know the
--   node's state)
-- ARGV[1] token, ARGV[2] owner label, ARGV[3] lease TTL in ms, ARGV[4]
--   floor mode: "floor" (an existing counter below ARGV[5] is raised to
--   it, as in acquire.lua) or "none" (absent: "none"), ARGV[5] the floor
--   (mode "floor"), ARGV[6] the rejoin delay in ms (trust.lua)
-- Replies:
--   {1, counter}           granted; counter a decimal string
--   {1, counter, pttl}     the token already holds it (a retried call)
--   {0, pttl}              a writer holds it
--   {0, ms, 0, 1}          a writer waits (a live intent), for ms at most
--   {3, ms, why}           the node may not grant for ms (trust.lua), or
--                          W's key is gone while the counter records its
--                          lease (why "key-lost", counter.lua C5)
--   error ERR ...          a mode of another name (nothing is read)
--   error REPLICA ...      the node is a replica
--   error WRONGTYPE ...    a key holds someone else's data
--   error FENCEEXHAUSTED   the counter is at 2^63-1
-- Granted where no writer holds the lock and no writer waits: it sets the
-- reader's key for the lease's TTL, records the reader in the index with
-- the end of its lease as its score (no TTL on the index: rw.lua), and
-- counts a new holder on the counter the writers share, so that a
-- reader's token exceeds every earlier writer's. Every check that can
-- fail runs before the first write, a SET; the sweep of lapsed readers
-- comes last.
local floor_mode = ARGV[4] or 'none'
if floor_mode ~= 'floor' and floor_mode ~= 'none' then
  return redis.error_reply('ERR redlock rw_read: floor mode ' .. floor_mode .. ' is neither floor nor none')
end
-- given is the caller's floor ('' for none: t_gate).
local given = ''
if floor_mode == 'floor' then given = ARGV[5] end
local cur, lerr = l_get(KEYS[5])
if lerr then return lerr end
local fence, bad, upto = c_read(KEYS[2])
if bad then return redis.error_reply(bad) end
if l_holds(cur, ARGV[1]) then
  local floor, refusal = t_gate(KEYS[6], ARGV[6], given)
  if not floor then return refusal end
  if not fence then fence = c_count(KEYS[2], false, floor, nil) end
  return {1, fence, redis.call('PTTL', KEYS[5])}
end
local w, werr = l_get(KEYS[1])
if werr then return werr end
local now = rw_now()
local _, _, rerr = rw_readers(KEYS[3], now)
if rerr then return redis.error_reply(rerr) end
local waiting, left, ierr = rw_intent(KEYS[4], now)
if ierr then return redis.error_reply(ierr) end
if w or waiting > 0 then
  rw_sweep(KEYS[3], now)
  if w then return {0, redis.call('PTTL', KEYS[1])} end
  return {0, left, 0, 1}
end
if fence == c_top then
  return redis.error_reply('FENCEEXHAUSTED redlock fence key ' .. KEYS[2] .. ' is at ' .. c_top ..
    ', the largest counter Redis holds: no greater fencing token can be issued')
end
local floor, refusal, checked = t_gate(KEYS[6], ARGV[6], given)
if not floor then return refusal end
local lost = c_lost(upto, c_now())
if checked and lost > 0 then return {3, lost, 'key-lost'} end
redis.call('SET', KEYS[5], ARGV[1] .. ' ' .. ARGV[2], 'PX', ARGV[3])
redis.call('ZADD', KEYS[3], rw_ms(rw_end(ARGV[3])), ARGV[1])
redis.call('PERSIST', KEYS[3])
rw_sweep(KEYS[3], now)
return {1, c_count(KEYS[2], fence, floor, nil)}
