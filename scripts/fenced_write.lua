-- model: fenced_write
-- fenced_write: the protected resource's side of fencing. Write the value only
-- when the caller's fencing token is not below the highest token this key has
-- seen, and remember the token. The check and the write are one step.
-- Helpers: counter.lua.
-- KEYS[1] the value key, KEYS[2] its fence key (the highest token seen, a
--   decimal)
-- ARGV[1] fencing token (a canonical decimal), ARGV[2] value
-- Replies:
--   {1, token}             written (equal tokens are accepted)
--   {0, highest}           stale: the token is below the highest seen, which
--                          is answered; nothing is written
--   error WRONGTYPE ...    the fence key holds something else
local cur = redis.call('GET', KEYS[2])
if cur and not c_decimal(cur) then
  return redis.error_reply('WRONGTYPE fence key ' .. KEYS[2] .. ' does not hold a fencing token')
end
local t = ARGV[1]
if cur and c_less(t, cur) then
  return {0, cur}
end
redis.call('SET', KEYS[2], t)
redis.call('SET', KEYS[1], ARGV[2])
return {1, t}
