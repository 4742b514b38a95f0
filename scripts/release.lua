-- release: delete the caller's own lock and tell waiters it is free.
-- Never deletes a lock held by another token.
-- KEYS[1] lock key
-- ARGV[1] token, ARGV[2] release channel
-- Returns 1 when deleted, 0 when the caller does not hold the lock here.
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then
  return redis.error_reply('WRONGTYPE redlock lock key ' .. KEYS[1] .. ' holds data that is not a lock')
end
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ' ' then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], '1')
return 1
