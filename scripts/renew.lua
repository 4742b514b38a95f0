-- model: renew
-- renew: extend the caller's own lock. Never re-creates an expired lock and
-- never touches a lock held by another token.
-- KEYS[1] lock key
-- ARGV[1] token, ARGV[2] lease TTL in milliseconds
-- Returns 1 when extended, 0 when the caller does not hold the lock here.
local v, lerr = l_get(KEYS[1])
if lerr then return lerr end
if not l_holds(v, ARGV[1]) then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
