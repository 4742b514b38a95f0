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

-- q_bad names the first of the queue keys that holds something other than
-- a sorted set (someone else's data), or returns nil.
local function q_bad(kq, ke)
  for _, k in ipairs({kq, ke}) do
    local t = redis.call('TYPE', k)
    if type(t) == 'table' then t = t['ok'] end
    if t ~= 'none' and t ~= 'zset' then return k end
  end
  return nil
end

-- q_scan finds the head without writing: its id and the milliseconds its
-- place has left (nil when the queue has no live place), and the ids of
-- the lapsed places before it (a place with no live expiry is lapsed). A
-- script that grants writes nothing before its first write that needs
-- memory, so that a node out of memory refuses it (Redis lets a script
-- that has already written go on writing).
local function q_scan(kq, ke, now)
  local gone = redis.call('ZRANGEBYSCORE', ke, '-inf', now)
  local dead = {}
  for _, id in ipairs(gone) do dead[id] = true end
  for _, id in ipairs(redis.call('ZRANGE', kq, 0, -1)) do
    if not dead[id] then
      local exp = tonumber(redis.call('ZSCORE', ke, id))
      if exp and exp > now then return id, exp - now, gone end
      table.insert(gone, id)
    end
  end
  return nil, 0, gone
end

-- q_purge removes the lapsed places q_scan found.
local function q_purge(kq, ke, gone)
  for _, id in ipairs(gone) do
    redis.call('ZREM', kq, id)
    redis.call('ZREM', ke, id)
  end
end

-- q_head is q_scan that also removes the lapsed places.
local function q_head(kq, ke, now)
  local head, left, gone = q_scan(kq, ke, now)
  q_purge(kq, ke, gone)
  return head, left
end

-- q_join gives waiter id a place for ttl milliseconds and returns its
-- ticket. t > 0 is a ticket the waiter agreed on (the highest a node gave
-- it): it keeps the higher of that and the one it holds here. t <= 0 is a
-- newcomer's proposal, -t (its arrival time in microseconds on its own
-- clock): it is given that, but never less than one above the last
-- waiter's here. Both keys live as long as their longest place.
local function q_join(kq, ke, id, t, ttl, now)
  local cur = tonumber(redis.call('ZSCORE', kq, id))
  if cur then
    t = math.max(cur, math.abs(t))
  elseif t <= 0 then
    local last = redis.call('ZRANGE', kq, -1, -1, 'WITHSCORES')
    t = math.max(-t, (tonumber(last[2]) or 0) + 1)
  end
  redis.call('ZADD', kq, t, id)
  redis.call('ZADD', ke, now + ttl, id)
  if redis.call('PTTL', kq) < ttl then redis.call('PEXPIRE', kq, ttl) end
  if redis.call('PTTL', ke) < ttl then redis.call('PEXPIRE', ke, ttl) end
  return t
end

