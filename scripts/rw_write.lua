-- model: rw_write
-- rw_write: take a read-write lock exclusively (a writer). Helpers:
-- lock.lua, counter.lua, trust.lua, rw.lua.
-- KEYS[1] the writer's lock W, KEYS[2] the fence counter W:fence, KEYS[3]
--   the readers index W:readers, KEYS[4] the writers' intents W:intent,
--   KEYS[5] the node's marker key (trust.lua; absent when the caller does
--   not know the node's state)
-- ARGV[1] token, ARGV[2] owner label, ARGV[3] lease TTL in ms, ARGV[4]
--   floor mode: "floor" (an existing counter below ARGV[5] is raised to
--   it, as in acquire.lua) or "none" (absent: "none"), ARGV[5] the floor
--   (mode "floor"), ARGV[6] mode: "wait" (a writer that waits: a refusal
--   records its intent, a grant removes it) or "try" (records nothing),
--   ARGV[7] the waiting writer's id (mode "wait"), ARGV[8] how long its
--   intent lasts, in ms (mode "wait"), ARGV[9] the rejoin delay in ms
--   (trust.lua)
-- Reply: always {verdict, ms, why, lock, readers}, the granting scripts'
-- one family (acquire_all.lua), each field in its place and of its type
-- (one the verdict does not use is "" or 0; lock is 1, the one lock,
-- unless "sitout"), followed, for "granted" only, by the counter and the
-- time left:
--   verdict  "granted"  then counter (a decimal string) and left: 0 for a
--                       new grant, what W has left (at least 1: lock.lua,
--                       l_left) when the token already held it (a
--                       retried call)
--            "held"     a writer holds it: ms its PTTL
--            "readers"  that many live readers hold it, the longest for ms
--            "sitout"   the node may not grant for ms (trust.lua), or the
--                       counter records a live lease while W's key is gone
--                       and the index has no live reader (why "key-lost",
--                       counter.lua C5: W's key, or the index, evicted)
-- Errors:
--   error ERR ...          a mode of another name (nothing is read)
--   error REPLICA ...      the node is a replica
--   error ERR ... SELECT refused ...  a new marker cannot search the
--                          server's other dbs (trust.lua, t_alone: an ACL
--                          without SELECT); the marker is not kept
--   error WRONGTYPE ...    a key holds someone else's data
--   error FENCEEXHAUSTED   the counter is at 2^63-1
-- Granted only where no writer holds the lock, the readers index has no
-- live reader (rw.lua: the index's scores decide, whether or not a
-- reader's key still stands), and the counter records no live lease (a
-- writer's whose key was evicted, or readers' whose index was: C5); it
-- counts a new holder on the shared counter and records its lease's end
-- there (C3). Every check that can
-- fail runs before the first write, the SET of a grant or the ZADD of an
-- intent (a node out of memory refuses either); the sweep of lapsed
-- readers comes last.
local mode = ARGV[6]
if mode ~= 'wait' and mode ~= 'try' then
  return redis.error_reply('ERR redlock rw_write: mode ' .. tostring(mode) .. ' is neither wait nor try')
end
local given, ferr = t_floor('rw_write', ARGV[4], ARGV[5]) -- the caller's floor ('' for none: t_gate)
if not given then return ferr end
local cur, lerr = l_get(KEYS[1])
if lerr then return lerr end
local fence, bad, upto = c_read(KEYS[2])
if bad then return redis.error_reply(bad) end
if l_holds(cur, ARGV[1]) then
  local floor, refusal = t_gatevote(KEYS[5], ARGV[9], given)
  if not floor then return refusal end
  local p = redis.call('PTTL', KEYS[1])
  if not fence then fence = c_count(KEYS[2], false, floor, c_now() + math.max(p, 0) * 1000) end
  return t_vote('granted', 0, '', 1, 0, {fence, l_left(p)})
end
local now = rw_now()
local live, longest, rerr = rw_readers(KEYS[3], now)
if rerr then return redis.error_reply(rerr) end
local _, _, ierr = rw_intent(KEYS[4], now)
if ierr then return redis.error_reply(ierr) end
if cur or live > 0 then
  if mode == 'wait' then
    local ttl = tonumber(ARGV[8]) or 1000
    redis.call('ZADD', KEYS[4], rw_ms(now + ttl), ARGV[7])
    redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', rw_ms(now))
    redis.call('PEXPIRE', KEYS[4], ttl)
  end
  rw_sweep(KEYS[3], now)
  if cur then return t_vote('held', redis.call('PTTL', KEYS[1]), '', 1) end
  return t_vote('readers', longest, '', 1, live)
end
if fence == c_top then
  return redis.error_reply('FENCEEXHAUSTED redlock fence key ' .. KEYS[2] .. ' is at ' .. c_top ..
    ', the largest counter Redis holds: no greater fencing token can be issued')
end
local floor, refusal, checked = t_gatevote(KEYS[5], ARGV[9], given)
if not floor then return refusal end
local us = c_now()
local lost = c_lost(upto, us)
if checked and lost > 0 then return t_vote('sitout', lost, 'key-lost') end
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. ARGV[2], 'PX', ARGV[3])
if mode == 'wait' then redis.call('ZREM', KEYS[4], ARGV[7]) end
rw_sweep(KEYS[3], now)
return t_vote('granted', 0, '', 1, 0, {c_count(KEYS[2], fence, floor, us + tonumber(ARGV[3]) * 1000), 0})
