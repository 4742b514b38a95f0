-- model: rehold
-- rehold: set the caller's own lock to a new value for a new TTL, and say
-- the fence counter that counted its holder. A fair Acquire uses it to
-- renew locks handed over to its place, and to move its attempt's grants
-- under its place's token when they and the hand-overs make a majority
-- together (docs/design.md section 11.2). Never re-creates an expired lock
-- and never touches a lock held by another token.
-- KEYS[1] lock key, KEYS[2] fence key
-- ARGV[1] the token that holds the lock, ARGV[2] the new value "<token>
-- <owner>", ARGV[3] TTL in milliseconds, ARGV[4] (optional) the seed step
-- of a counter created again (c_count)
-- Returns {1, counter} when done, {0} when ARGV[1] does not hold the lock.
local v, lerr = l_get(KEYS[1])
if lerr then return lerr end
if not l_holds(v, ARGV[1]) then
  return {0}
end
local fence, bad = c_read(KEYS[2])
if bad then return redis.error_reply(bad) end
if not fence then
  -- The counter expired while the lock stood: count it again from the
  -- node's clock (c_count), above every token it counted.
  fence = c_count(KEYS[2], false, '', ARGV[4])
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return {1, fence}
