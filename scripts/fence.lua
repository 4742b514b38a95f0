-- fence: raise this node's counter to F, but only where the caller's own lock
-- stands (raising it elsewhere proves nothing). The counter never goes down.
-- KEYS[1] lock key, KEYS[2] fence key
-- ARGV[1] token, ARGV[2] F
-- Returns 1 when the caller holds the lock here (counter now >= F), else 0.
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then
  if not string.find(v.err or '', 'WRONGTYPE', 1, true) then return redis.error_reply(v.err) end
  return redis.error_reply('WRONGTYPE redlock lock key ' .. KEYS[1] .. ' holds data that is not a lock')
end
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ' ' then
  return 0
end
local cur = redis.call('GET', KEYS[2])
if cur and not (cur == '0' or string.match(cur, '^[1-9]%d*$')) then
  return redis.error_reply('WRONGTYPE redlock fence key ' .. KEYS[2] .. ' does not hold a counter')
end
if not cur or #cur < #ARGV[2] or (#cur == #ARGV[2] and cur < ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2])
end
return 1
