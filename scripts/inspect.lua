-- model: inspect
-- inspect: read one resource's state without changing it. Helpers:
-- queue.lua.
-- KEYS[1] the lock key P{R}, KEYS[2] the fence counter P{R}:fence, KEYS[3]
--   and KEYS[4] (optional) the lock's wait queue: tickets P{R}:queue and
--   their expiry times P{R}:queue:exp (only the expiries are read)
-- ARGV: none
-- Reply: always {verdict, kind, value, pttl, counter, waiting}, each field
-- in its place and of its type whatever the verdict (one it does not use
-- is "" or 0), with or without the queue's keys:
--   verdict  "free"     there is no lock key
--            "held"     the lock key holds a lock
--            "foreign"  the lock key holds data of another type (kind)
--   kind     the lock key's type, as TYPE answers it ("none", "string",
--            "hash", ...)
--   value    the lock's value "<token> <owner>" ("held"; else "")
--   pttl     the lock key's PTTL (-2 when there is none, -1 without TTL)
--   counter  the fence counter's value V alone, without the live lease's
--            end a counter "V U" records (counter.lua); "" when the
--            counter key holds no string
--   waiting  the number of live places in the wait queue (0 without
--            KEYS[4])
-- key_type is the type of key k, as TYPE answers it (a status reply,
-- which Redis hands to Lua as a table).
local function key_type(k)
  local t = redis.call('TYPE', k)
  if type(t) == 'table' then t = t['ok'] end
  return t
end
local kind = key_type(KEYS[1])
local verdict, value = 'foreign', ''
if kind == 'none' then verdict = 'free' end
if kind == 'string' then verdict, value = 'held', redis.call('GET', KEYS[1]) end
local fence = ''
if key_type(KEYS[2]) == 'string' then
  fence = redis.call('GET', KEYS[2])
  fence = string.match(fence, '^(%d+) %d+$') or fence
end
local waiting = 0
if KEYS[4] and key_type(KEYS[4]) == 'zset' then
  waiting = #redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. string.format('%.0f', q_now()), '+inf')
end
return {verdict, kind, value, redis.call('PTTL', KEYS[1]), fence, waiting}
