-- model: inspect
-- inspect: read one resource's state without changing it. Helpers:
-- queue.lua.
-- KEYS[1] the lock key P{R}, KEYS[2] the fence counter P{R}:fence, KEYS[3]
--   and KEYS[4] (optional) the lock's wait queue: tickets P{R}:queue and
--   their expiry times P{R}:queue:exp (only the expiries are read)
-- ARGV: none
-- Reply: {type of the lock key (as TYPE answers), its value or false, its
--   PTTL, fence counter or false, the number of live places in the wait
--   queue (0 without KEYS[4])}. The counter is its value V alone, without
--   the live lease's end a counter "V U" records (counter.lua).
-- key_type is the type of key k, as TYPE answers it (a status reply,
-- which Redis hands to Lua as a table).
local function key_type(k)
  local t = redis.call('TYPE', k)
  if type(t) == 'table' then t = t['ok'] end
  return t
end
local kind = key_type(KEYS[1])
local value = false
if kind == 'string' then value = redis.call('GET', KEYS[1]) end
local fence = false
if key_type(KEYS[2]) == 'string' then
  fence = redis.call('GET', KEYS[2])
  fence = string.match(fence, '^(%d+) %d+$') or fence
end
local waiting = 0
if KEYS[4] and key_type(KEYS[4]) == 'zset' then
  waiting = #redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. string.format('%.0f', q_now()), '+inf')
end
return {kind, value, redis.call('PTTL', KEYS[1]), fence, waiting}
