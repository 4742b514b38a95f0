-- model: fenced_write
-- fenced_write: the protected resource's side of fencing. Write the value only
-- when the caller's fencing token is not below the highest token this key has
-- seen, and remember the token. The check and the write are one step.
-- KEYS[1] value key, KEYS[2] fence key
-- ARGV[1] fencing token (decimal), ARGV[2] value
-- Returns {1, token} when written, {0, highest token seen} when stale.
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
