-- model: rw_inspect
-- rw_inspect: read a read-write lock without changing it. Helpers:
-- lock.lua, counter.lua, rw.lua.
-- KEYS[1] the writer's lock W, KEYS[2] the fence counter W:fence, KEYS[3]
--   the readers index W:readers, KEYS[4] the writers' intents W:intent,
--   KEYS[5..] (optional) reader keys W:reader:<token> whose values to
--   read (a caller that wants the readers' owners names the live readers
--   an earlier call returned)
-- ARGV: none
-- Reply: {writer's value or false, its PTTL, fence counter V or false,
--   live intents, then for each live reader of the index (its end not
--   before the node's clock, soonest end first) three fields: its token, the ms
--   its end has left, and its key's value "<token> <owner>" when that key
--   is in KEYS[5..] and stands, else false}
--   error WRONGTYPE ...    a key holds someone else's data
local w, lerr = l_get(KEYS[1])
if lerr then return lerr end
local fence, bad = c_read(KEYS[2])
if bad then return redis.error_reply(bad) end
local now = rw_now()
local waiting, _, ierr = rw_intent(KEYS[4], now)
if ierr then return redis.error_reply(ierr) end
local _, _, rerr = rw_readers(KEYS[3], now)
if rerr then return redis.error_reply(rerr) end
local named = {}
for i = 5, #KEYS do
  local v, verr = l_get(KEYS[i])
  if verr then return verr end
  local tok = l_token(v)
  if tok then named[tok] = v end
end
local out = {w, redis.call('PTTL', KEYS[1]), fence, waiting}
local ids = redis.call('ZRANGEBYSCORE', KEYS[3], rw_ms(now), '+inf', 'WITHSCORES')
for i = 1, #ids, 2 do
  table.insert(out, ids[i])
  table.insert(out, tonumber(ids[i + 1]) - now)
  table.insert(out, named[ids[i]] or false)
end
return out
