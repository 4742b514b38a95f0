-- model: acquire
-- acquire_all: take several locks at once, all or none (Locker.AcquireAll;
-- docs/design.md section 13). On one node it is the acquire step of each
-- lock, applied atomically; a lock it cannot take makes it take none.
-- Helpers: lock.lua, counter.lua, trust.lua, queue.lua.
-- KEYS[4k-3..4k] the k-th lock's four keys, in the order every lock script
--   takes them: lock P{R}, fence counter P{R}:fence, wait queue tickets
--   P{R}:queue and expiries P{R}:queue:exp (queue.lua); then KEYS[4n+1]
--   (optional) the node's marker key (trust.lua). All share one Redis
--   Cluster slot (the caller groups them by slot)
-- ARGV[1] owner label, ARGV[2] lease TTL in ms, ARGV[3] floor mode:
--   "floor" (an existing counter below ARGV[4] is raised to it, as in
--   acquire.lua) or "none" (absent: "none"), ARGV[4] the floor (mode
--   "floor"), ARGV[4+k] the k-th lock's token, ARGV[5+n] the rejoin delay
--   in ms (trust.lua, t_trust; negative counts as 0), n the number of
--   locks
-- Reply: always {verdict, ms, why, lock, readers} (the granting scripts'
-- one family: rw_write.lua, rw_read.lua), each field in its place and of
-- its type whatever the verdict (one the verdict does not use is "" or
-- 0), followed, for "granted" only, by a counter and a time left per lock:
--   verdict  "granted"  every lock granted: then counter 1, left 1,
--                       counter 2, left 2, ...; each counter a decimal
--                       string, each left 0 for a new grant, or what the
--                       lock had left (at least 1: lock.lua, l_left)
--                       when its token already held it (a
--                       client-side retry of a call that was applied; no
--                       new holder is counted)
--            "held"     the lock-th lock is held by another token: ms its
--                       PTTL
--            "behind"   the lock-th lock is free but a waiter of its queue
--                       is next (ms 0, as the lock is free)
--            "sitout"   the node may not grant for ms (trust.lua), also
--                       when every lock is already the caller's (a retried
--                       call); why key-lost when a free lock's counter
--                       records a live lease (counter.lua, C5)
--   ms, why, lock  as the verdict says; readers is always 0 here
-- Errors:
--   error ERR ...          a floor mode of another name (nothing is read)
--   error REPLICA ...      the node is a replica
--   error ERR ... SELECT refused ...  a new marker cannot search the
--                          server's other dbs (trust.lua, t_alone: an ACL
--                          without SELECT); the marker is not kept
--   error WRONGTYPE ...    a key holds someone else's data
--   error FENCEEXHAUSTED   a free lock's counter is at 2^63-1
-- Every check runs before the first write (as in acquire.lua): an error
-- or a refusal writes nothing, and the first write is a SET.
local given, ferr = t_floor('acquire_all', ARGV[3], ARGV[4]) -- the caller's floor ('' for none: t_gate)
if not given then return ferr end
local n = (#KEYS - #KEYS % 4) / 4
local km = KEYS[4 * n + 1]
local fences, mine, gones, untils = {}, {}, {}, {}
for k = 1, n do
  local kl, kf, kq, ke = KEYS[4*k-3], KEYS[4*k-2], KEYS[4*k-1], KEYS[4*k]
  local cur, lerr = l_get(kl)
  if lerr then return lerr end
  if cur and not l_holds(cur, ARGV[4+k]) then
    return t_vote('held', redis.call('PTTL', kl), '', k)
  end
  local fence, bad, u = c_read(kf)
  if bad then return redis.error_reply(bad) end
  untils[k] = u
  if cur then
    mine[k] = true
  else
    local head, _, gone, err = q_scan(kq, ke, nil)
    if err then return redis.error_reply(err) end
    if head then return t_vote('behind', 0, '', k) end
    if fence == c_top then
      return redis.error_reply('FENCEEXHAUSTED redlock fence key ' .. kf .. ' is at ' .. c_top ..
        ', the largest counter Redis holds: no greater fencing token can be issued')
    end
    gones[k] = gone
  end
  fences[k] = fence
end
local floor, refusal, checked = t_gatevote(km, ARGV[5 + n], given)
if not floor then return refusal end
local us = c_now()
for k = 1, n do
  if checked and not mine[k] then
    local lost = c_lost(untils[k], us)
    if lost > 0 then return t_vote('sitout', lost, 'key-lost') end
  end
end
local upto = us + tonumber(ARGV[2]) * 1000
local out = {}
for k = 1, n do
  local kl, kf = KEYS[4*k-3], KEYS[4*k-2]
  if mine[k] then
    local f, p = fences[k], redis.call('PTTL', kl)
    -- A counter lost while the lock stood is counted again from the clock.
    if not f then f = c_count(kf, false, floor, us + math.max(p, 0) * 1000) end
    table.insert(out, f)
    table.insert(out, l_left(p))
  else
    redis.call('SET', kl, ARGV[4+k] .. ' ' .. ARGV[1], 'PX', ARGV[2])
    q_purge(KEYS[4*k-1], KEYS[4*k], gones[k])
    table.insert(out, c_count(kf, fences[k], floor, upto))
    table.insert(out, 0)
  end
end
return t_vote('granted', 0, '', 0, 0, out)
