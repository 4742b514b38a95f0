-- model: rw_withdraw
-- rw_withdraw: a waiting writer that gives up takes its intent back, so
-- that readers need not wait for it to lapse. Helpers: none.
-- KEYS[1] the writers' intents W:intent (rw.lua)
-- ARGV[1] the writer's id
-- Replies:
--   1    the intent stood and is gone
--   0    it did not stand (or W:intent holds someone else's data)
local r = redis.pcall('ZREM', KEYS[1], ARGV[1])
if type(r) == 'table' then return 0 end
return r
