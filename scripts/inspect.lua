-- model: inspect
-- inspect: read one resource's state without changing it.
-- KEYS[1] lock key, KEYS[2] fence key, KEYS[3] (optional) the expiry key of
-- the lock's wait queue (queue.lua, included above)
-- Returns {type of the lock key, its value or false, its PTTL, fence counter
-- or false, the number of live places in the wait queue}.
local kind = redis.call('TYPE', KEYS[1])
if type(kind) == 'table' then kind = kind['ok'] end
local value = false
if kind == 'string' then value = redis.call('GET', KEYS[1]) end
local fkind = redis.call('TYPE', KEYS[2])
if type(fkind) == 'table' then fkind = fkind['ok'] end
local fence = false
if fkind == 'string' then fence = redis.call('GET', KEYS[2]) end
local waiting = 0
if KEYS[3] then
  local qkind = redis.call('TYPE', KEYS[3])
  if type(qkind) == 'table' then qkind = qkind['ok'] end
  if qkind == 'zset' then
    waiting = #redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. string.format('%.0f', q_now()), '+inf')
  end
end
return {kind, value, redis.call('PTTL', KEYS[1]), fence, waiting}
