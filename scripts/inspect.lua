-- inspect: read one resource's state without changing it.
-- KEYS[1] lock key, KEYS[2] fence key
-- Returns {type of the lock key, its value or false, its PTTL, fence counter or false}.
local kind = redis.call('TYPE', KEYS[1])
if type(kind) == 'table' then kind = kind['ok'] end
local value = false
if kind == 'string' then value = redis.call('GET', KEYS[1]) end
local fkind = redis.call('TYPE', KEYS[2])
if type(fkind) == 'table' then fkind = fkind['ok'] end
local fence = false
if fkind == 'string' then fence = redis.call('GET', KEYS[2]) end
return {kind, value, redis.call('PTTL', KEYS[1]), fence}
