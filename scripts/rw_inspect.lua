-- model: rw_inspect
-- rw_inspect: read a read-write lock without changing it (rw.lua).
-- KEYS[1] writer lock W, KEYS[2] fence W:fence, KEYS[3] readers index
-- W:readers, KEYS[4] writers' intents W:intent
-- ARGV[1] the prefix of reader keys (W:reader:)
-- Returns {writer's value or false, its PTTL, fence counter or false,
-- live intents, value 1, pttl 1, value 2, pttl 2, ...} with one pair per
-- live reader. A key holding someone else's data is an error.
local w, lerr = l_get(KEYS[1])
if lerr then return lerr end
local fence, bad = c_read(KEYS[2])
if bad then return redis.error_reply(bad) end
local waiting, _, ierr = rw_intent(KEYS[4], q_now())
if ierr then return redis.error_reply(ierr) end
local out = {w, redis.call('PTTL', KEYS[1]), fence, waiting}
local ids = redis.pcall('ZRANGE', KEYS[3], 0, -1)
if ids.err then return redis.error_reply(ids.err) end
for _, id in ipairs(ids) do
  local v = redis.call('GET', ARGV[1] .. id)
  if v then
    table.insert(out, v)
    table.insert(out, redis.call('PTTL', ARGV[1] .. id))
  end
end
return out
