-- acquire: take the lock if it is free and count a new holder.
-- KEYS[1] lock key, KEYS[2] fence key, KEYS[3] and KEYS[4] the lock's wait
-- queue (queue.lua, docs/design.md section 11.1)
-- ARGV[1] token, ARGV[2] owner label, ARGV[3] lease TTL in milliseconds,
-- ARGV[4] optional floor: a canonical decimal below which an existing
-- counter is raised to it before the increment (after a restart that may
-- have lost increments), or empty; ARGV[5] optional granularity of a new
-- counter's start, in microseconds; ARGV[6] the waiter id of a fair
-- Acquire ("" for an attempt that does not queue), ARGV[7] its ticket (0
-- for none yet), ARGV[8] how long its place lasts, in milliseconds
-- Returns {1, counter} when granted, {0, pttl} when another holder has it.
-- When the lock has a queue or the caller queues, a refusal is {0, pttl,
-- ticket, ms}: pttl 0 when the lock is free but an earlier waiter is next,
-- the caller's ticket (0 when it does not queue), and how long the head's
-- ticket has left (0 when the caller is the head). A free lock is granted
-- only to the head of its live queue, or to anyone when the queue is empty.
-- The counter is the decimal string Redis stores. Lua numbers are doubles,
-- exact only up to 2^53, so the counter never passes through one: no
-- arithmetic on it here, and INCR's reply (a Lua number) is not used.
-- A fence counter that does not exist yet is created from the node's TIME
-- in microseconds, then incremented.
-- A repeated call with the same token (a client-side retry) answers {1,
-- counter} again without counting a new holder.
-- Every check that can fail runs before the first write, so an error never
-- leaves a half-done acquisition behind, and someone else's data under the
-- same key names is never changed. A counter at 2^63-1, which INCR cannot
-- raise, is refused with FENCEEXHAUSTED. The first write of a grant is SET
-- and of a refusal that queues ZADD, both refused by a node out of memory
-- (Redis lets a script that has written once go on writing).
local top = '9223372036854775807'
local fence = redis.pcall('GET', KEYS[2])
if type(fence) == 'table' and not string.find(fence.err or '', 'WRONGTYPE', 1, true) then
  return redis.error_reply(fence.err)
end
if type(fence) == 'table' or (fence and not (fence == '0' or (string.match(fence, '^[1-9]%d*$')
    and (#fence < #top or (#fence == #top and fence <= top))))) then
  return redis.error_reply('WRONGTYPE redlock fence key ' .. KEYS[2] .. ' holds data that is not a counter')
end
local cur = redis.pcall('GET', KEYS[1])
if type(cur) == 'table' then
  if not string.find(cur.err or '', 'WRONGTYPE', 1, true) then return redis.error_reply(cur.err) end
  return redis.error_reply('WRONGTYPE redlock lock key ' .. KEYS[1] .. ' holds data that is not a lock')
end
if cur and string.sub(cur, 1, #ARGV[1] + 1) == ARGV[1] .. ' ' then
  return {1, fence}
end
local wid = ARGV[6] or ''
local queued = false -- the lock has a queue, or the caller may have a place
local gone = {}      -- lapsed places, removed after the grant's first write
if wid ~= '' or (KEYS[3] and redis.call('EXISTS', KEYS[3]) == 1) then
  queued = true
  local bad = q_bad(KEYS[3], KEYS[4])
  if bad then
    return redis.error_reply('WRONGTYPE redlock queue key ' .. bad .. ' holds data that is not a redlock queue')
  end
  local now = q_now()
  local head, left
  head, left, gone = q_scan(KEYS[3], KEYS[4], now)
  local ticket = 0
  if wid ~= '' and (cur or (head and head ~= wid)) then
    -- ZADD first: a node out of memory refuses before anything is written
    ticket = q_join(KEYS[3], KEYS[4], wid, tonumber(ARGV[7]) or 0, tonumber(ARGV[8]) or 1000, now)
    q_purge(KEYS[3], KEYS[4], gone)
    head, left = q_scan(KEYS[3], KEYS[4], now)
  end
  if cur or (head and head ~= wid) then
    if head == wid then left = 0 end
    return {0, cur and redis.call('PTTL', KEYS[1]) or 0, ticket, left or 0}
  end
elseif cur then
  return {0, redis.call('PTTL', KEYS[1])}
end
if fence == top then
  return redis.error_reply('FENCEEXHAUSTED redlock fence key ' .. KEYS[2] .. ' is at ' .. top ..
    ', the largest counter Redis holds: no greater fencing token can be issued')
end
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. ARGV[2], 'PX', ARGV[3])
if queued then
  if wid ~= '' then
    redis.call('ZREM', KEYS[3], wid)
    redis.call('ZREM', KEYS[4], wid)
  end
  q_purge(KEYS[3], KEYS[4], gone)
end
local floor = ARGV[4]
if not fence then
  -- A new counter starts from the node's clock in microseconds, rounded down
  -- to a multiple of ARGV[5] (microseconds; 1 if absent) so that the nodes
  -- of one acquisition start equal and the fence step is not needed; a node
  -- that restarted empty thus counts on from above every token issued
  -- before (docs/design.md, section 6.1). A time in microseconds is below
  -- 2^53, exact as a Lua number; it is formatted back without exponent.
  local now = redis.call('TIME')
  local us = tonumber(now[1]) * 1000000 + tonumber(now[2])
  local step = tonumber(ARGV[5] or '1') or 1
  if step < 1 then step = 1 end
  redis.call('SET', KEYS[2], string.format('%.0f', us - us % step))
elseif floor and floor ~= '' and (#fence < #floor or (#fence == #floor and fence < floor)) then
  -- A counter below the floor may have lost increments in a restart (a node
  -- without appendfsync always): it counts on from the floor.
  redis.call('SET', KEYS[2], floor)
end
redis.call('INCR', KEYS[2])
return {1, redis.call('GET', KEYS[2])}
