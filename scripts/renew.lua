-- model: renew
-- renew: extend the caller's own lock, and the record of its lease's end
-- (counter.lua, C3). Never re-creates an expired lock and never touches a
-- lock held by another token, nor a key that holds someone else's data.
-- Helpers: lock.lua, counter.lua, trust.lua.
-- KEYS[1] the lock key P{R} (or a read-write lock's reader key
--   W:reader:<token>), KEYS[2] (optional) its fence counter (P{R}:fence,
--   W:fence), KEYS[3] (optional) the node's marker key (trust.lua, T4):
--   where it is missing the lock is not extended (it stands on data that
--   its db's marker does not vouch for: a db swapped back, whose marker a
--   new one deleted), unless the server is a stand-in that keeps no marker
--   (trust.lua, t_identity); a reader declares its readers index W:readers
--   last (after the marker, or in its place when the caller names no
--   marker: KEYS[3] is the marker unless it is the reader's readers index)
-- ARGV[1] token, ARGV[2] lease TTL in ms, ARGV[3] unused (was the seed
--   step)
-- Replies:
--   1                      extended
--   0                      the caller does not hold the lock here, or its
--                          db's marker is missing: nothing is changed
--   error ERR ...          a reader whose readers index is not in KEYS:
--                          its lock is not extended
--   error WRONGTYPE ...    the lock key holds someone else's data
-- The lease's end (the node's clock plus the TTL) goes to the counter as
-- "V U", without a TTL (a counter lost while the lock stood, deleted by
-- hand, is counted again from the clock, and never below the db's
-- high-water, counter.lua C6: the marker's); U never goes down here, since a read-write
-- lock's readers share it. A reader of a read-write lock (KEYS[1]
-- "W:reader:<token>", KEYS[2] "W:fence") also gets its end, in ms rounded
-- up, as its score in the readers index W:readers (rw.lua), which is
-- given a TTL that reaches it; an index that is gone (evicted) is not
-- created again (only rw_read may, counter.lua C5), and U keeps the
-- reader's end.
local v, lerr = l_get(KEYS[1])
if lerr then return lerr end
if not l_holds(v, ARGV[1]) then
  return 0
end
local kr, tok
if KEYS[2] then kr, tok = c_reader(KEYS[1], KEYS[2]) end
local km = KEYS[3]
if km == kr then km = nil end
if km and not redis.pcall('GET', km) and t_identity() ~= '-' then
  return 0
end
if kr and not c_declared(kr) then
  return redis.error_reply('ERR redlock: renew of a reader whose readers index ' .. kr .. ' is not in KEYS')
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if KEYS[2] then
  local us = c_now()
  local upto = us + tonumber(ARGV[2]) * 1000
  if kr then
    local ms = math.ceil(upto / 1000)
    upto = ms * 1000
    redis.pcall('ZADD', kr, 'XX', ms, tok)
    c_span(kr, math.floor(us / 1000))
  end
  local fence, bad, u = c_read(KEYS[2])
  if not bad and not fence then
    t_mark(km)
    c_count(KEYS[2], false, '', upto)
  elseif not bad then
    c_store(KEYS[2], fence, math.max(u or 0, upto))
  end
end
return 1
