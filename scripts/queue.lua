-- model: q_scan, q_join, q_give
-- queue: the fair wait queue of one lock (docs/design.md, section 11.1),
-- included at the top of the scripts that use it, after lock.lua and
-- counter.lua and trust.lua (q_give counts a new holder). Two sorted sets share
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
-- (then nothing was written). With agreed, t is a ticket the waiter agreed
-- on (the highest a node gave it): it keeps the higher of that and the one
-- it holds here. Without, t is a newcomer's proposal, its arrival time in
-- microseconds on its own clock: a waiter that holds no ticket here is
-- given that, but never less than one above the last waiter's here (one
-- that holds one keeps the higher of the two). Both keys outlive their
-- longest place (by up to its TTL). Its first write is a ZADD, which a node
-- out of memory refuses.
local function q_join(kq, ke, id, agreed, t, ttl, now)
  local cur = redis.pcall('ZSCORE', kq, id)
  if type(cur) == 'table' then return nil, q_wrong(kq, cur.err) end
  cur = tonumber(cur)
  if cur then
    t = math.max(cur, t)
  elseif not agreed then
    local last = redis.call('ZRANGE', kq, -1, -1, 'WITHSCORES')
    t = math.max(t, (tonumber(last[2]) or 0) + 1)
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

-- q_place builds the member of a place (q_member) from its fields, the
-- named arguments of the script that takes it (name, for its errors): id
-- the waiter id, mode "handover" (the lock may be handed over to the
-- place: ttl, ch, token and owner follow) or "none" (absent: "none"; the
-- member is the id alone, the other fields are not read), ttl how long
-- the lock is handed over for in ms, ch the channel to announce it on
-- ("-" for the lock's own), token and owner the lock's value then. Each
-- field is checked (no spaces in id, ttl, ch and token; ttl a positive
-- integer; owner not empty): it returns the member, or nil and an ERR
-- error. It reads and writes nothing.
local function q_place(name, id, mode, ttl, ch, token, owner)
  mode = mode or 'none'
  if mode ~= 'handover' and mode ~= 'none' then
    return nil, 'ERR redlock ' .. name .. ': place hand-over mode ' .. mode .. ' is neither handover nor none'
  end
  if not string.match(id or '', '^%S+$') then
    return nil, 'ERR redlock ' .. name .. ': the place needs an id without spaces, not "' .. tostring(id) .. '"'
  end
  if mode == 'none' then return id end
  if not string.match(ttl or '', '^[1-9]%d*$') then
    return nil, 'ERR redlock ' .. name .. ': place hand-over mode handover needs a ttl in ms above 0, not "' .. tostring(ttl) .. '"'
  elseif not string.match(ch or '', '^%S+$') then
    return nil, 'ERR redlock ' .. name .. ': place hand-over mode handover needs a channel without spaces ("-" for the lock\'s own), not "' .. tostring(ch) .. '"'
  elseif not string.match(token or '', '^%S+$') then
    return nil, 'ERR redlock ' .. name .. ': place hand-over mode handover needs a token without spaces, not "' .. tostring(token) .. '"'
  elseif (owner or '') == '' then
    return nil, 'ERR redlock ' .. name .. ': place hand-over mode handover needs an owner'
  end
  return id .. ' ' .. ttl .. ' ' .. ch .. ' ' .. token .. ' ' .. owner
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

-- q_give hands lock kl, which its holder gives up, to the head of its live
-- queue when the head left what the lock is set to (q_member): the lock
-- then holds the head's token for the head's ttl, but never longer than
-- the head's place has left (a waiter that died holds the lock up no
-- longer than its place would have), its place is removed and the fence
-- counter counts it as a new holder, its lease's end recorded (counter.lua,
-- C3), unless the node may not grant (trust.lua: km the marker key, delay
-- the rejoin delay; a replica, or a node that lost data, hands nothing
-- over); the place skip (the releasing caller's own) is passed over and
-- removed. It returns the head's id (nil when the queue has no live place,
-- or a queue key holds someone else's data) and, when it handed the lock
-- over, the new counter and the channel to announce it on (q_member).
-- Nothing is written before the marker's or the lock's SET, which a node
-- out of memory refuses: the lock is then not handed over, and the caller
-- deletes it. Lapsed places, and the place skip, are removed after (skip
-- only when the scan reached it: always when there is no head).
local function q_give(kl, kf, kq, ke, km, delay, skip)
  local head, left, gone, err = q_scan(kq, ke, nil, skip)
  if err then return nil, nil, nil end -- not a redlock queue: none
  if not head then
    q_purge(kq, ke, gone)
    return nil, nil, nil
  end
  local id, ttl, ch, value = q_member(head)
  local counter = nil
  if ttl and delay and delay ~= '' and math.min(ttl, left) >= 1 then
    local fence = c_read(kf)
    local floor = nil
    if fence ~= nil and fence ~= c_top then
      local ok, f = pcall(t_trust, km, delay)
      if ok and type(f) == 'string' then floor = f end
    end
    if floor then
      local ms = math.min(ttl, left)
      local ok = redis.pcall('SET', kl, value, 'PX', ms)
      if type(ok) == 'table' and ok.ok then
        redis.call('ZREM', kq, head)
        redis.call('ZREM', ke, head)
        counter = c_count(kf, fence, floor, c_now() + ms * 1000)
      end
    end
  end
  q_purge(kq, ke, gone)
  return id, counter, ch
end
