-- release: delete the caller's own lock and, when asked, tell waiters it is
-- free. Never deletes a lock held by another token.
-- KEYS[1] lock key, KEYS[2] and KEYS[3] the lock's wait queue (queue.lua)
-- ARGV[1] token, ARGV[2] release channel, ARGV[3] the announcement (the
-- release id waiters count it by), or "" for none. When the lock has a
-- live queue, the announcement names its head after a space: only that
-- waiter need try.
-- Returns 0 when the caller does not hold the lock here; otherwise 1 plus
-- the number of subscribers that heard the announcement, and when the
-- announcement named a head, {that number, the head}.
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then
  if not string.find(v.err or '', 'WRONGTYPE', 1, true) then return redis.error_reply(v.err) end
  return redis.error_reply('WRONGTYPE redlock lock key ' .. KEYS[1] .. ' holds data that is not a lock')
end
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ' ' then
  return 0
end
redis.call('DEL', KEYS[1])
if ARGV[3] ~= '' then
  local msg = ARGV[3]
  if KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 and not q_bad(KEYS[2], KEYS[3]) then
    local head = q_head(KEYS[2], KEYS[3], q_now())
    if head then
      return {1 + redis.call('PUBLISH', ARGV[2], msg .. ' ' .. head), head}
    end
  end
  return 1 + redis.call('PUBLISH', ARGV[2], msg)
end
return 1
