-- model: fence
-- fence: raise this node's counter to F, but only where the caller's own lock
-- stands (raising it elsewhere proves nothing). The counter never goes down.
-- KEYS[1] lock key, KEYS[2] fence key
-- ARGV[1] token, ARGV[2] F, ARGV[3] the seed step in microseconds, which
-- sets how long a raised counter lives (counter.lua, c_life)
-- Returns 1 when the caller holds the lock here (counter now >= F), else 0.
local v, lerr = l_get(KEYS[1])
if lerr then return lerr end
if not l_holds(v, ARGV[1]) then
  return 0
end
local cur, bad = c_read(KEYS[2])
if bad then return redis.error_reply(bad) end
if not cur or c_less(cur, ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', c_life(tonumber(ARGV[3] or '') or 1))
end
return 1
