-- leave: take a waiter out of a lock's wait queue (an Acquire that ended
-- without the lock, or that got it on a majority and left a ticket on
-- other nodes). When the waiter was the head and the lock is free, the new
-- head is announced on the release channel so that it tries at once.
-- KEYS[1] lock key, KEYS[2] and KEYS[3] the lock's wait queue (queue.lua)
-- ARGV[1] waiter id, ARGV[2] release channel, ARGV[3] the announcement's id
-- Returns 1 when the waiter was queued here, else 0.
if redis.call('EXISTS', KEYS[2]) == 0 or q_bad(KEYS[2], KEYS[3]) then
  return 0
end
local now = q_now()
local first = q_head(KEYS[2], KEYS[3], now)
if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then
  return 0
end
redis.call('ZREM', KEYS[3], ARGV[1])
if first == ARGV[1] and redis.call('EXISTS', KEYS[1]) == 0 then
  local head = q_head(KEYS[2], KEYS[3], now)
  if head then redis.call('PUBLISH', ARGV[2], ARGV[3] .. ' ' .. head) end
end
return 1
