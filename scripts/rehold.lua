-- model: rehold
-- rehold: set the caller's own lock to a new value for a new TTL, and say
-- the fence counter that counted its holder. A fair Acquire uses it to
-- renew locks handed over to its place, and to move its attempt's grants
-- under its place's token when they and the hand-overs make a majority
-- together (docs/design.md section 11.2). Never re-creates an expired lock
-- and never touches a lock held by another token. It answers "granted", so
-- the node must be trusted (trust.lua) when the marker key is given.
-- Helpers: lock.lua, counter.lua, trust.lua.
-- KEYS[1] the lock key P{R}, KEYS[2] the fence counter P{R}:fence, KEYS[3]
--   (optional) the node's marker key (trust.lua)
-- ARGV[1] the token that holds the lock, ARGV[2] the new value "<token>
--   <owner>", ARGV[3] TTL in ms, ARGV[4] unused (was the seed step),
--   ARGV[5] the rejoin delay in ms (trust.lua, t_trust)
-- Replies:
--   {1, counter}           done; counter a decimal string. The lease's end
--                          goes to the counter (counter.lua, C3)
--   {0}                    ARGV[1] does not hold the lock: nothing is changed
--   {3, ms, why}           the node may not grant for ms (trust.lua; only
--                          with KEYS[3])
--   error REPLICA ...      the node is a replica
--   error WRONGTYPE ...    a key holds someone else's data
local v, lerr = l_get(KEYS[1])
if lerr then return lerr end
if not l_holds(v, ARGV[1]) then
  return {0}
end
local fence, bad = c_read(KEYS[2])
if bad then return redis.error_reply(bad) end
local floor = ''
if KEYS[3] then
  local refusal
  floor, refusal = t_gate(KEYS[3], ARGV[5], '')
  if not floor then return refusal end
end
local upto = c_now() + tonumber(ARGV[3]) * 1000
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
if not fence then
  -- The counter was lost while the lock stood: count it again from the
  -- node's clock (c_count), above every token it counted.
  fence = c_count(KEYS[2], false, floor, upto)
else
  c_store(KEYS[2], fence, upto)
end
return {1, fence}
