-- model: acquire
-- acquire: take the lock if it is free and count a new holder. Helpers:
-- lock.lua, counter.lua, trust.lua, queue.lua.
-- KEYS[1] the lock key P{R}, KEYS[2] the fence counter P{R}:fence,
--   KEYS[3] and KEYS[4] (optional: without them the lock has no queue) the
--   lock's wait queue, tickets P{R}:queue and their expiry times
--   P{R}:queue:exp (queue.lua, docs/design.md section 11.1), KEYS[5]
--   (optional) the node's marker key (trust.lua)
-- ARGV[1] token, ARGV[2] owner label, ARGV[3] lease TTL in ms,
--   ARGV[4] floor mode: "floor" (an existing counter below ARGV[5], a
--   canonical decimal, is raised to it before the increment) or "none"
--   (absent: "none"; the node's own floor, the marker's from, always
--   applies: trust.lua), ARGV[5] the floor (mode "floor"),
--   ARGV[6] queue mode: "queue" (a fair Acquire: a refusal takes or keeps
--   its place in the wait queue) or "alone" (it does not queue; absent:
--   "alone"), ARGV[7] its place's waiter id (mode "queue"), ARGV[8]
--   ticket mode (mode "queue"): "agreed" (ARGV[9] is a ticket the waiter
--   agreed on) or "propose" (it has none yet: ARGV[9] is its arrival time
--   in microseconds on its own clock, proposed as its ticket), ARGV[9]
--   that ticket or time, ARGV[10] how long its place lasts, in ms (mode
--   "queue"), ARGV[11] the place's hand-over mode (mode "queue"):
--   "handover" (the lock may be handed over to the place: ARGV[12] to
--   ARGV[15] follow) or "none" (absent: "none"; the place is the id
--   alone), ARGV[12] how long a lock handed over to it lasts, in ms,
--   ARGV[13] the channel to announce that on ("-" for the lock's own),
--   ARGV[14] the place's token and ARGV[15] its owner label (the value
--   the lock is handed over with); the place stored is built from them
--   (queue.lua, q_place, q_member), ARGV[16] the rejoin delay in ms
--   (trust.lua, t_trust; negative, the rule off, counts as 0; always the
--   last argument)
-- A mode of another name is an ERR error, before anything is read; so is
-- a place's field that q_place refuses (mode "queue").
-- Reply: always {verdict, counter, ms, ticket, wait, why}, each field in
-- its place and of its type whatever the verdict (a field the verdict
-- does not use is "" or 0):
--   verdict  "granted"  the caller holds it now, counted as a new holder
--            "retried"  the token already held it (a client-side retry of
--                       a call that was applied): no new holder is
--                       counted; the caller counts its validity from ms
--            "handed"   the lock was handed over to the caller's place
--                       (its token is the place's, queue.lua q_member):
--                       reported and left as it is
--            "held"     another token holds it
--            "behind"   it is free, but an earlier waiter of its queue is
--                       next
--            "sitout"   the node may not grant for ms (trust.lua; also in
--                       place of "retried" and "handed")
--   counter  the fence counter, a decimal string ("granted", "retried",
--            "handed"; else "")
--   ms       what the lock has left, its PTTL ("retried", "handed",
--            "held"; 0 for "behind"; at least 1 for "retried" and
--            "handed": lock.lua, l_left), or how long the node sits out
--            ("sitout")
--   ticket   the caller's ticket in the queue ("held", "behind"; 0 when
--            it does not queue: mode "alone" or no queue keys)
--   wait     what the head's place has left, in ms ("behind", whether the
--            caller queues or not; "held" when it queues; 0 when the
--            caller is the head, or "held" and it does not queue)
--   why      why the node sits out ("sitout"): no-marker, identity,
--            clock-back, "data state unknown: ..." (INFO refused), or
--            key-lost when the lock key is missing while its counter
--            records a live lease (counter.lua, C5)
-- Errors:
--   error REPLICA ...      the node is a replica
--   error ERR ... SELECT refused ...  a new marker cannot search the
--                          server's other dbs (trust.lua, t_alone: an ACL
--                          without SELECT); the marker is not kept
--   error WRONGTYPE ...    a key holds someone else's data
--   error FENCEEXHAUSTED   the counter is at 2^63-1 (nothing is written)
-- A free lock is granted only to the head of its live queue, or to anyone
-- when the queue is empty.
-- The counter is the decimal string Redis stores. Lua numbers are doubles,
-- exact only up to 2^53, so the counter never passes through one: no
-- arithmetic on it here, and INCR's reply (a Lua number) is not used.
-- A fence counter that does not exist yet is created from the node's TIME
-- in microseconds (counter.lua, C1), then incremented; a grant leaves it
-- "V U" without a TTL, U the lease's end on the node's clock (C3).
-- Every check that can fail runs before the first write, so an error never
-- leaves a half-done acquisition behind, and someone else's data under the
-- same key names is never changed. The first write of a grant is SET
-- and of a refusal that queues ZADD, both refused by a node out of memory
-- (Redis lets a script that has written once go on writing).
local queue_mode, ticket_mode = ARGV[6] or 'alone', ARGV[8]
local given, ferr = t_floor('acquire', ARGV[4], ARGV[5]) -- the caller's floor ('' for none: t_gate)
if not given then return ferr end
if queue_mode ~= 'queue' and queue_mode ~= 'alone' then
  return redis.error_reply('ERR redlock acquire: queue mode ' .. queue_mode .. ' is neither queue nor alone')
end
-- brought and place_ttl are the ticket (or proposed time) the caller
-- brings and how long its place lasts (mode "queue"; checked below).
local brought, place_ttl = tonumber(ARGV[9]), tonumber(ARGV[10])
-- wid is the caller's place as stored (q_place; '' when it does not
-- queue).
local wid = ''
if queue_mode == 'queue' then
  if ticket_mode ~= 'agreed' and ticket_mode ~= 'propose' then
    return redis.error_reply('ERR redlock acquire: ticket mode ' .. tostring(ticket_mode) .. ' is neither agreed nor propose')
  end
  -- Mode "queue" needs its values: a place, a ticket (agreed: above 0, as
  -- every ticket a node gives is) or a time (propose: not negative), and
  -- a time to keep the place (above 0).
  if (ARGV[7] or '') == '' then
    return redis.error_reply('ERR redlock acquire: queue mode queue needs a place')
  end
  local perr
  wid, perr = q_place('acquire', ARGV[7], ARGV[11], ARGV[12], ARGV[13], ARGV[14], ARGV[15])
  if not wid then
    return redis.error_reply(perr)
  elseif not brought or brought < 0 or (ticket_mode == 'agreed' and brought <= 0) then
    return redis.error_reply('ERR redlock acquire: ticket mode ' .. ticket_mode .. ' needs a ticket above 0 (agreed) or a time not below 0 (propose), not ' .. tostring(ARGV[9]))
  elseif not place_ttl or place_ttl <= 0 then
    return redis.error_reply('ERR redlock acquire: queue mode queue needs how long the place lasts, in ms above 0, not ' .. tostring(ARGV[10]))
  end
end
-- join takes or keeps the caller's place (queue.lua, q_join).
local function join(now)
  return q_join(KEYS[3], KEYS[4], wid, ticket_mode == 'agreed', brought, place_ttl, now)
end
-- reply is the script's one reply, its fields in their places (header).
local function reply(verdict, counter, ms, ticket, wait, why)
  return {verdict, counter or '', ms or 0, ticket or 0, wait or 0, why or ''}
end
-- gate is t_gate with its refusal {3, ms, why} as the "sitout" reply.
local function gate()
  local floor, refusal, checked = t_gate(KEYS[5], ARGV[16], given)
  if not floor and type(refusal) == 'table' and refusal[1] == 3 then refusal = reply('sitout', '', refusal[2], 0, 0, refusal[3]) end
  return floor, refusal, checked
end
local cur, lerr = l_get(KEYS[1])
if lerr then return lerr end
local fence, bad = nil, nil
-- held answers for the caller's own lock ("retried") or its place's
-- ("handed"): the node must still be trusted (a replica, or a node that
-- lost data since, answers no grant). A counter lost while the lock stood
-- is counted again from the clock.
local function held(verdict)
  local f, b = c_read(KEYS[2])
  if b then return redis.error_reply(b) end
  local floor, refusal = gate()
  if not floor then return refusal end
  local p = redis.call('PTTL', KEYS[1])
  if not f then f = c_count(KEYS[2], false, floor, c_now() + math.max(p, 0) * 1000) end
  return reply(verdict, f, l_left(p))
end
if l_holds(cur, ARGV[1]) then return held('retried') end
if cur and wid ~= '' then
  -- A lock handed over to the caller's place (under the place's own
  -- token) is reported, not taken: only the place's Acquire may use it.
  local _, _, _, value = q_member(wid)
  if l_holds(cur, l_token(value)) then return held('handed') end
end
if cur and (wid == '' or not KEYS[3]) then
  return reply('held', '', redis.call('PTTL', KEYS[1]))
end
local err = nil
if cur then
  -- Busy: the caller takes (or keeps) its place, then learns the head.
  local now = q_now()
  local ticket, head, left, gone
  ticket, err = join(now)
  if err then return redis.error_reply(err) end
  head, left, gone = q_scan(KEYS[3], KEYS[4], now)
  q_purge(KEYS[3], KEYS[4], gone)
  if head == wid then left = 0 end
  return reply('held', '', redis.call('PTTL', KEYS[1]), ticket, left)
end
-- Free: granted to the head of the live queue, or to anyone when it has
-- none.
local head, left, gone, now = nil, 0, {}, nil
if KEYS[3] then
  head, left, gone, err, now = q_scan(KEYS[3], KEYS[4], nil)
  if err then return redis.error_reply(err) end
end
if head and head ~= wid then
  local ticket = 0
  if wid ~= '' then
    -- ZADD first: a node out of memory refuses before anything is written
    ticket, err = join(now or q_now())
    if err then return redis.error_reply(err) end
    q_purge(KEYS[3], KEYS[4], gone)
    head, left, gone = q_scan(KEYS[3], KEYS[4], now)
  end
  if head ~= wid then
    return reply('behind', '', 0, ticket, left)
  end
end
local upto
fence, bad, upto = c_read(KEYS[2])
if bad then return redis.error_reply(bad) end
local floor, refusal, checked = gate()
if not floor then return refusal end
local us = c_now()
local lost = c_lost(upto, us)
if checked and lost > 0 then return reply('sitout', '', lost, 0, 0, 'key-lost') end
if fence == c_top then
  return redis.error_reply('FENCEEXHAUSTED redlock fence key ' .. KEYS[2] .. ' is at ' .. c_top ..
    ', the largest counter Redis holds: no greater fencing token can be issued')
end
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. ARGV[2], 'PX', ARGV[3])
if head and head == wid then
  redis.call('ZREM', KEYS[3], wid)
  redis.call('ZREM', KEYS[4], wid)
end
q_purge(KEYS[3], KEYS[4], gone)
return reply('granted', c_count(KEYS[2], fence, floor, us + tonumber(ARGV[3]) * 1000))
