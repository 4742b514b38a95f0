-- model: q_scan, q_join, q_count, q_give
-- queue: the fair wait queue of one lock (docs/design.md, section 11.1),
-- included at the top of the scripts that use it. Two sorted sets share
-- the lock's hash tag: Q maps a waiter id to its ticket, E maps it to the
-- time its ticket expires (milliseconds on this node's clock). The head of
-- the queue is the live waiter with the lowest (ticket, id): the same
-- order on every node that holds the same tickets.

-- q_now is the node's clock in milliseconds.
local function q_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- q_wrong is the error for a queue key k that holds someone else's data
-- (err is the server's error), or that error itself when it is another.
local function q_wrong(k, err)
  if string.find(err or '', 'WRONGTYPE', 1, true) then
    return 'WRONGTYPE redlock queue key ' .. k .. ' holds data that is not a redlock queue'
  end
  return err
end

-- q_scan finds the head without writing: its id and the milliseconds its
-- place has left (nil and 0 when the queue has no live place), the places
-- before it that have lapsed (a place with no live expiry has), an error
-- when a queue key holds someone else's data (nothing else then), and the
-- node's clock in milliseconds (now, or read here when nil and needed).
-- A place equal to skip counts as lapsed.
-- The queue is read a few places at a time: the head is nearly always
-- first. A script that grants writes nothing before its first write that
-- needs memory, so that a node out of memory refuses it (Redis lets a
-- script that has already written go on writing).
local function q_scan(kq, ke, now, skip)
  local gone = {}
  local from, step = 0, 4
  while true do
    local ids = redis.pcall('ZRANGE', kq, from, from + step - 1)
    if ids.err then return nil, 0, gone, q_wrong(kq, ids.err), now end
    for _, id in ipairs(ids) do
      local exp = 0
      if id ~= skip then exp = redis.pcall('ZSCORE', ke, id) end
      if type(exp) == 'table' then return nil, 0, gone, q_wrong(ke, exp.err), now end
      now = now or q_now()
      exp = tonumber(exp)
      if exp and exp > now then return id, exp - now, gone, nil, now end
      table.insert(gone, id)
    end
    if #ids < step then return nil, 0, gone, nil, now end
    from, step = from + step, step * 2
  end
end

-- q_purge removes the lapsed places q_scan found.
local function q_purge(kq, ke, gone)
  for _, id in ipairs(gone) do
    redis.call('ZREM', kq, id)
    redis.call('ZREM', ke, id)
  end
end

-- q_join gives waiter id a place for ttl milliseconds and returns its
-- ticket, or nil and an error when a queue key holds someone else's data
-- (then nothing was written). t > 0 is a ticket the waiter agreed on (the
-- highest a node gave it): it keeps the higher of that and the one it
-- holds here. t <= 0 is a newcomer's proposal, -t (its arrival time in
-- microseconds on its own clock): it is given that, but never less than
-- one above the last waiter's here. Both keys outlive their longest place
-- (by up to its TTL). Its first write is a ZADD, which a node out of memory
-- refuses.
local function q_join(kq, ke, id, t, ttl, now)
  local cur = redis.pcall('ZSCORE', kq, id)
  if type(cur) == 'table' then return nil, q_wrong(kq, cur.err) end
  cur = tonumber(cur)
  if cur then
    t = math.max(cur, math.abs(t))
  elseif t <= 0 then
    local last = redis.call('ZRANGE', kq, -1, -1, 'WITHSCORES')
    t = math.max(-t, (tonumber(last[2]) or 0) + 1)
  end
  local ok = redis.pcall('ZADD', ke, now + ttl, id)
  if type(ok) == 'table' and ok.err then return nil, q_wrong(ke, ok.err) end
  redis.call('ZADD', kq, t, id)
  -- Extended to twice the place's TTL when less than it is left: not on
  -- every join.
  if redis.call('PTTL', kq) < ttl then redis.call('PEXPIRE', kq, 2 * ttl) end
  if redis.call('PTTL', ke) < ttl then redis.call('PEXPIRE', ke, 2 * ttl) end
  return t, nil
end

-- A place's member is the waiter id, or, from a waiter that takes a lock
-- handed over to it, "<id> <ttl ms> <channel> <token> <owner>": how long
-- the lock is handed over for, the channel to announce it on ("-" for the
-- lock's own) and the lock's value "<token> <owner>". q_member splits it
-- into the id, the ttl (nil without one), the channel and the value.
local function q_member(m)
  local id, ttl, ch, value = string.match(m, '^(%S+) (%d+) (%S+) (%S+ .*)$')
  if not id then return m, nil, nil, nil end
  return id, tonumber(ttl), ch, value
end

-- q_announce publishes the lock's release (id rel) on its channel ch, or
-- its hand-over to waiter head with counter on the waiter's channel hch
-- (with the lock key, kl, at the end) or, when that is "-", on the lock's.
-- It returns how many subscribers heard it.
local function q_announce(ch, rel, head, counter, hch, kl)
  if counter and hch and hch ~= '-' then
    return redis.call('PUBLISH', hch, rel .. ' ' .. head .. ' ' .. counter .. ' ' .. kl)
  elseif counter then
    return redis.call('PUBLISH', ch, rel .. ' ' .. head .. ' ' .. counter)
  elseif head then
    return redis.call('PUBLISH', ch, rel .. ' ' .. head)
  end
  return redis.call('PUBLISH', ch, rel)
end

local q_top = '9223372036854775807'

-- q_fence reads the fence counter: its value (false when it does not exist
-- yet), or nil and an error text when the key holds something else.
local function q_fence(kf)
  local fence = redis.pcall('GET', kf)
  if type(fence) == 'table' and not string.find(fence.err or '', 'WRONGTYPE', 1, true) then
    return nil, fence.err
  end
  if type(fence) == 'table' or (fence and not (fence == '0' or (string.match(fence, '^[1-9]%d*$')
      and (#fence < #q_top or (#fence == #q_top and fence <= q_top))))) then
    return nil, 'WRONGTYPE redlock fence key ' .. kf .. ' holds data that is not a counter'
  end
  return fence, nil
end

-- q_count counts a new holder on fence key kf, whose value was read as
-- fence (false: no counter yet; never q_top, which the caller refuses).
-- A new counter starts from the node's clock in microseconds, rounded down
-- to a multiple of step (so that the nodes of one acquisition start equal
-- and the fence step is not needed); a node that restarted empty thus
-- counts on from above every token issued before (docs/design.md, section
-- 6.1). A counter below floor (a canonical decimal, or '' for none) may
-- have lost increments in a restart and counts on from floor. The counter
-- never passes through a Lua number (exact only up to 2^53): INCR's reply
-- is not used. Returns the new counter as Redis stores it.
local function q_count(kf, fence, floor, step)
  if not fence then
    local now = redis.call('TIME')
    local us = tonumber(now[1]) * 1000000 + tonumber(now[2])
    step = tonumber(step or '1') or 1
    if step < 1 then step = 1 end
    redis.call('SET', kf, string.format('%.0f', us - us % step))
  elseif floor and floor ~= '' and (#fence < #floor or (#fence == #floor and fence < floor)) then
    redis.call('SET', kf, floor)
  end
  redis.call('INCR', kf)
  return redis.call('GET', kf)
end

-- q_rejoin applies the rejoin rule (docs/design.md, section 6.1) on the
-- node itself, for a hand-over: delay is the rejoin delay in milliseconds
-- (negative: the rule does not apply, the server keeps its data through a
-- restart). It returns false while the server has been up for less than
-- the delay or its uptime cannot be read (no grant then), and otherwise
-- the floor for the fence counter: the server's start plus the delay, in
-- microseconds ('' when the rule does not apply or the server does not
-- report its uptime).
local function q_rejoin(delay)
  delay = tonumber(delay)
  if not delay or delay < 0 then return '' end
  local info = redis.pcall('INFO', 'server')
  if type(info) == 'table' then
    if string.find(info.err or '', 'NOPERM', 1, true) then return false end
    return '' -- a server without INFO server (a stand-in)
  end
  local up = tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
  local now = tonumber(string.match(info, 'server_time_usec:(%d+)'))
  if not up then return '' end
  if up * 1000 < delay then return false end
  if not now then return '' end
  return string.format('%.0f', now - up * 1000000 + delay * 1000)
end

-- q_give hands lock kl, which its holder gives up, to the head of its live
-- queue when the head left what the lock is set to (q_member): the lock
-- then holds the head's token for the head's ttl, but never longer than
-- the head's place has left (a waiter that died holds the lock up no
-- longer than its place would have), its place is removed and the fence
-- counter counts it as a new holder. delay and step are the rejoin delay
-- (q_rejoin) and the seed step (q_count); the place skip (the releasing
-- caller's own) is passed over and removed. It returns the head's id (nil
-- when the queue has no live place, or a queue key holds someone else's
-- data) and, when it handed the lock over, the
-- new counter and the channel to announce it on (q_member). Nothing is written before the SET, which a node out of
-- memory refuses: the lock is then not handed over, and the caller
-- deletes it. Lapsed places are removed after.
local function q_give(kl, kq, ke, kf, delay, step, skip)
  local head, left, gone, err = q_scan(kq, ke, nil, skip)
  if err then return nil, nil, nil end -- not a redlock queue: none
  if not head then
    q_purge(kq, ke, gone)
    return nil, nil, nil
  end
  local id, ttl, ch, value = q_member(head)
  local counter = nil
  if ttl and delay and delay ~= '' and math.min(ttl, left) >= 1 then
    local fence = q_fence(kf)
    local floor = q_rejoin(delay)
    if fence ~= nil and fence ~= q_top and floor then
      local ok = redis.pcall('SET', kl, value, 'PX', math.min(ttl, left))
      if type(ok) == 'table' and ok.ok then
        redis.call('ZREM', kq, head)
        redis.call('ZREM', ke, head)
        counter = q_count(kf, fence, floor, step)
      end
    end
  end
  q_purge(kq, ke, gone)
  return id, counter, ch
end
