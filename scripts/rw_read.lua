-- model: rw_read
-- rw_read: take a read-write lock shared (a reader). Helpers: lock.lua,
-- counter.lua, trust.lua, rw.lua.
-- KEYS[1] the writer's lock W, KEYS[2] the fence counter W:fence, KEYS[3]
--   the readers index W:readers, KEYS[4] the writers' intents W:intent,
--   KEYS[5] the reader's own key W:reader:<token>, KEYS[6] the node's
--   marker key (trust.lua; absent when the caller does not know the
--   node's state)
-- ARGV[1] token, ARGV[2] owner label, ARGV[3] lease TTL in ms, ARGV[4]
--   floor mode: "floor" (an existing counter below ARGV[5] is raised to
--   it, as in acquire.lua) or "none" (absent: "none"), ARGV[5] the floor
--   (mode "floor"), ARGV[6] the rejoin delay in ms (trust.lua)
-- Reply: always {verdict, ms, why, lock, readers}, the granting scripts'
-- one family (acquire_all.lua), each field in its place and of its type
-- (one the verdict does not use is "" or 0; lock is 1, the one lock,
-- unless "sitout"), followed, for "granted" only, by the counter and the
-- time left:
--   verdict  "granted"  then counter (a decimal string) and left: 0 for a
--                       new grant, what the reader's key has left (at
--                       least 1: lock.lua, l_left) when the token already
--                       held it (a retried call)
--            "held"     a writer holds it: ms its PTTL
--            "intent"   a writer waits (a live intent), for ms at most
--            "sitout"   the node may not grant for ms (trust.lua), or the
--                       counter records a lease that neither W's key nor
--                       the readers index accounts for (why "key-lost",
--                       counter.lua C5: W's key, or the index, evicted)
-- Errors:
--   error ERR ...          a mode of another name (nothing is read)
--   error REPLICA ...      the node is a replica
--   error ERR ... SELECT refused ...  a new marker cannot search the
--                          server's other dbs (trust.lua, t_alone: an ACL
--                          without SELECT); the marker is not kept
--   error WRONGTYPE ...    a key holds someone else's data
--   error FENCEEXHAUSTED   the counter is at 2^63-1
-- Granted where no writer holds the lock, no writer waits, and the
-- counter's U (the end of the live lease it records) is passed or is the
-- end of a live reader of the index: it sets the reader's key for the
-- lease's TTL, records the reader in the index with the end of its lease
-- as its score (the index's TTL then reaches its latest end: rw.lua),
-- and counts a new holder on the counter the writers share, so that a
-- reader's token exceeds every earlier writer's, with U the latest end of
-- the readers. A U the index does not account for is the lease of a
-- writer whose key was evicted, or of readers whose index was: a new
-- index would not hold them, and a release would lower U past them
-- (counter.lua c_end), so the grant waits until U. Every check that can
-- fail runs before the first write, a SET; the sweep of lapsed readers
-- comes last.
local given, ferr = t_floor('rw_read', ARGV[4], ARGV[5]) -- the caller's floor ('' for none: t_gate)
if not given then return ferr end
local cur, lerr = l_get(KEYS[5])
if lerr then return lerr end
local fence, bad, upto = c_read(KEYS[2])
if bad then return redis.error_reply(bad) end
if l_holds(cur, ARGV[1]) then
  local floor, refusal = t_gatevote(KEYS[6], ARGV[6], given)
  if not floor then return refusal end
  local p = redis.call('PTTL', KEYS[5])
  if not fence then fence = c_count(KEYS[2], false, floor, c_now() + math.max(p, 0) * 1000) end
  return t_vote('granted', 0, '', 1, 0, {fence, l_left(p)})
end
local w, werr = l_get(KEYS[1])
if werr then return werr end
local now = rw_now()
local live, longest, rerr = rw_readers(KEYS[3], now)
if rerr then return redis.error_reply(rerr) end
local waiting, left, ierr = rw_intent(KEYS[4], now)
if ierr then return redis.error_reply(ierr) end
if w or waiting > 0 then
  rw_sweep(KEYS[3], now)
  if w then return t_vote('held', redis.call('PTTL', KEYS[1]), '', 1) end
  return t_vote('intent', left, '', 1)
end
if fence == c_top then
  return redis.error_reply('FENCEEXHAUSTED redlock fence key ' .. KEYS[2] .. ' is at ' .. c_top ..
    ', the largest counter Redis holds: no greater fencing token can be issued')
end
local floor, refusal, checked = t_gatevote(KEYS[6], ARGV[6], given)
if not floor then return refusal end
-- U is accounted for when the index's latest live end reaches it.
local lost = 0
if not (upto and live > 0 and upto <= (now + longest) * 1000) then lost = c_lost(upto, c_now()) end
if checked and lost > 0 then return t_vote('sitout', lost, 'key-lost') end
redis.call('SET', KEYS[5], ARGV[1] .. ' ' .. ARGV[2], 'PX', ARGV[3])
local e = rw_end(ARGV[3])
redis.call('ZADD', KEYS[3], rw_ms(e), ARGV[1])
c_span(KEYS[3], now)
rw_sweep(KEYS[3], now)
return t_vote('granted', 0, '', 1, 0, {c_count(KEYS[2], fence, floor, math.max(upto or 0, e * 1000)), 0})
