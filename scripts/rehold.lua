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
-- Reply: always {verdict, counter, ms, why}, each field in its place and
-- of its type whatever the verdict (one it does not use is "" or 0):
--   verdict  "done"     the lock holds the new value for the new TTL; the
--                       lease's end goes to the counter (counter.lua, C3)
--            "notheld"  ARGV[1] does not hold the lock: nothing is changed
--            "sitout"   the node may not grant for ms (trust.lua; only
--                       with KEYS[3]): nothing is changed
--   counter  the fence counter, a decimal string ("done"; else "")
--   ms       how long the node sits out ("sitout"; else 0)
--   why      why it sits out ("sitout", as acquire.lua says; else "")
-- Errors:
--   error REPLICA ...      the node is a replica
--   error ERR ... SELECT refused ...  a new marker cannot search the
--                          server's other dbs (trust.lua, t_alone: an ACL
--                          without SELECT); the marker is not kept
--   error WRONGTYPE ...    a key holds someone else's data
local v, lerr = l_get(KEYS[1])
if lerr then return lerr end
if not l_holds(v, ARGV[1]) then
  return {'notheld', '', 0, ''}
end
local fence, bad = c_read(KEYS[2])
if bad then return redis.error_reply(bad) end
local floor = ''
if KEYS[3] then
  local refusal
  floor, refusal = t_gate(KEYS[3], ARGV[5], '')
  if not floor then
    if type(refusal) == 'table' and refusal[1] == 3 then
      return {'sitout', '', refusal[2], refusal[3]}
    end
    return refusal
  end
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
return {'done', fence, 0, ''}
