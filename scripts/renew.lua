-- renew: extend the caller's own lock. Never re-creates an expired lock and
-- never touches a lock held by another token.
-- KEYS[1] lock key
-- ARGV[1] token, ARGV[2] lease TTL in milliseconds
-- Returns 1 when extended, 0 when the caller does not hold the lock here.
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then
  if not string.find(v.err or '', 'WRONGTYPE', 1, true) then return redis.error_reply(v.err) end
  return redis.error_reply('WRONGTYPE redlock lock key ' .. KEYS[1] .. ' holds data that is not a lock')
end
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ' ' then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
