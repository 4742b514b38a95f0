-- model: rw_withdraw
-- rw_withdraw: a waiting writer that gives up takes its intent back, so
-- that readers need not wait for it to lapse.
-- KEYS[1] writers' intents W:intent (rw.lua)
-- ARGV[1] the writer's id
-- Returns 1 when the intent stood, else 0.
local r = redis.pcall('ZREM', KEYS[1], ARGV[1])
if type(r) == 'table' then return 0 end
return r
