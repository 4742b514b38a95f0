-- model: renew
-- renew: extend the caller's own lock, and the life of the fence counter
-- that counted it (counter.lua: a counter lives on while a lock it counted
-- stands). Never re-creates an expired lock and never touches a lock held
-- by another token, nor a fence key that holds someone else's data.
-- KEYS[1] lock key, KEYS[2] (optional) fence key
-- ARGV[1] token, ARGV[2] lease TTL in milliseconds, ARGV[3] (optional) the
-- seed step in microseconds, which sets the counter's life (c_life)
-- Returns 1 when extended, 0 when the caller does not hold the lock here.
local v, lerr = l_get(KEYS[1])
if lerr then return lerr end
if not l_holds(v, ARGV[1]) then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if KEYS[2] and ARGV[3] then
  local fence = c_read(KEYS[2])
  if fence then redis.call('PEXPIRE', KEYS[2], c_life(tonumber(ARGV[3]) or 1)) end
end
return 1
