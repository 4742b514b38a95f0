-- model: fence
-- fence: raise this node's counter to F, but only where the caller's own lock
-- stands (raising it elsewhere proves nothing). The counter never goes down,
-- and keeps the record of its live lease's end (counter.lua, C3). Helpers:
-- lock.lua, counter.lua, trust.lua.
-- KEYS[1] the lock key P{R} (or a read-write lock's reader key
--   W:reader:<token>, rw.lua), KEYS[2] its fence counter (P{R}:fence,
--   W:fence), KEYS[3] (optional) the node's marker key (trust.lua): F goes
--   to the db's high-water when above it (counter.lua, C6; nothing is
--   judged, and a missing marker is not written)
-- ARGV[1] token, ARGV[2] F (a canonical decimal), ARGV[3] unused (was the
--   seed step)
-- Replies:
--   1                      the caller holds the lock here: the counter is
--                          now at least F
--   0                      it does not: nothing is changed
--   error WRONGTYPE ...    a key holds someone else's data
local v, lerr = l_get(KEYS[1])
if lerr then return lerr end
if not l_holds(v, ARGV[1]) then
  return 0
end
local cur, bad, upto = c_read(KEYS[2])
if bad then return redis.error_reply(bad) end
if not cur or c_less(cur, ARGV[2]) then
  if not upto then -- no end recorded: the caller's own (a recorded U stays)
    upto = c_now() + math.max(redis.call('PTTL', KEYS[1]), 0) * 1000
  end
  c_store(KEYS[2], ARGV[2], upto)
  t_mark(KEYS[3])
  c_high(ARGV[2])
end
return 1
