-- model: t_trust
-- trust: whether this node may grant a lock now (docs/design.md, section
-- 6.2), included by every script that can answer "granted" (a new grant,
-- the retried call's "already held by this token", a hand-over and its
-- report, rehold, acquire_all, both sides of the read-write lock). A node
-- that may have lost keys it wrote grants nothing until every lease it may
-- have forgotten has expired: for the rejoin delay D after the loss was
-- noticed. Nothing here rests on INFO statistics (which CONFIG RESETSTAT
-- zeroes) or on configuration read out of band.
--
-- The rules, as the model says them (Safety v4):
--   T1 identity: the script reads INFO replication. A replica (role:slave)
--      refuses with an error "REPLICA ...": a replica is never a vote.
--      master_replid is the data's identity: it changes at every restart
--      (with or without RDB/AOF), at every promotion (REPLICAOF NO ONE, a
--      failover); a replica takes its master's.
--   T2 marker: one marker key per db (and per hash slot on a Cluster); its
--      NAME carries the db number (SWAPDB moves a db's marker away with its
--      keys). Its value is "v4 <replid> <from> <seen> <why> [<hi>]": the
--      replid it vouches for, the node time (µs) from which the node may
--      grant, the largest node time it has seen (rewritten only when it
--      advanced by more than t_tick), why the node had to wait ("-" once
--      it may), and the db's high-water (counter.lua, C6: absent until a
--      value is counted; a new marker has none).
--      - no marker (first use, FLUSHALL/FLUSHDB, SWAPDB, a restart without
--        data, a marker deleted by hand): a loss, from = now + D (rounded
--        up to c_step, counter.lua, when D > 0);
--      - a marker naming another replid (a restart with or without AOF, a
--        failover, a failback in place, a full sync): a loss, from =
--        max(from, now + D): a recorded sit-out is never shortened;
--      - now < seen - t_tick (the node's clock stepped back): a loss, from
--        = max(from, seen + D);
--      - otherwise from is the marker's from.
--      While now < from the script refuses {3, ms, why}. D is the caller's
--      rejoin delay; negative (the rule off) counts as 0: the identity,
--      replica and lost-key checks and the floor still apply, nothing is
--      waited. There is no durability exemption: every restart sits out D.
--   T3 floor: the marker's from is the floor of every counter the node
--      counts (counter.lua, C1 and C2), and its high-water the least start
--      of a new counter (C6).
--   T4 one marker (Safety v4.1): a new marker deletes every marker of its
--      name in the other dbs of the server (t_alone): its db's data swapped
--      away by SWAPDB, which would vouch for itself when swapped back. A
--      renewal (renew.lua) extends a lock only where its db's marker
--      stands, so that a lease lives only on the data the marker vouches
--      for.
-- A server whose INFO has no replication section (a stand-in such as
-- miniredis, whose keys expire by its own rules, not by its clock) is not
-- checked: no marker, no floor, no lost-key check. A server that refuses
-- INFO (an ACL, a renamed command) grants nothing.
--
-- Why codes (the reply's and the marker's): no-marker, identity,
-- clock-back, key-lost (counter.lua, C5), and a text starting "data state
-- unknown: " when INFO is refused.

-- t_tick is, in microseconds, how far the marker's seen lags the node's
-- clock before it is rewritten, and how far the clock may step back
-- unnoticed.
local t_tick = 1000000

-- t_dbs is how many dbs t_alone searches at most (a server configured
-- with more: the dbs from t_dbs on are not searched, docs/design.md §6.2).
local t_dbs = 1024

-- t_field reads field name of INFO text info (nil when absent).
local function t_field(info, name)
  return string.match(info, '[\r\n]' .. name .. ':([^\r\n]*)')
end

-- t_identity reads INFO replication: the data's identity (master_replid;
-- '-' for a stand-in); or nil and the reason the node is not trusted
-- (INFO refused); or nil, nil and the REPLICA error reply.
local function t_identity()
  local info = redis.pcall('INFO', 'replication')
  if type(info) == 'table' then
    local e = info.err or 'INFO refused'
    -- Only a server that says it has no such section (miniredis: "section
    -- (replication) is not supported") is a stand-in; any other error (an
    -- ACL's NOPERM, a renamed INFO, anything unforeseen) grants nothing.
    if not string.find(e, 'section (replication) is not supported', 1, true) then
      return nil, 'data state unknown: ' .. e, nil
    end
    return '-', nil, nil -- a stand-in: no replication section
  end
  info = '\n' .. info
  if t_field(info, 'role') == 'slave' then
    return nil, nil, redis.error_reply('REPLICA redlock: this node is a replica of ' ..
      (t_field(info, 'master_host') or '?') .. ':' .. (t_field(info, 'master_port') or '?') ..
      '; a replica is never a vote')
  end
  return t_field(info, 'master_replid') or '-', nil, nil
end

-- t_parse reads marker text m: replid, from, seen, why (strings) and the
-- high-water ('' for none); nil when m is not a v4 marker.
local function t_parse(m)
  local rid, from, seen, why, hi = string.match(m, '^v4 (%S+) (%d+) (%d+) (%S+) (%d+)$')
  if not rid then
    rid, from, seen, why = string.match(m, '^v4 (%S+) (%d+) (%d+) (%S+)$')
    hi = ''
  end
  if hi ~= '' and not c_valid(hi) then return nil end
  return rid, from, seen, why, hi
end

-- t_mark reads the marker km for a script that raises a counter without
-- a gate (fence.lua): c_mark is set when km holds a v4 marker, so that
-- the value raised to goes to the high-water (C6).
local function t_mark(km)
  if not km then return end
  local m = redis.pcall('GET', km)
  if type(m) ~= 'string' then return end
  local rid, from, seen, why, hi = t_parse(m)
  if rid then
    c_mark = {km = km, head = 'v4 ' .. rid .. ' ' .. from .. ' ' .. seen .. ' ' .. why, hi = hi}
  end
end

-- t_alone makes the marker km, just written with text val in the script's
-- db, the only key of that name on the server (T4): it deletes every
-- marker named km in the other dbs, and selects the script's db again
-- (found by val). A marker of that name in another db is this db's data
-- swapped away (SWAPDB); deleted, it vouches for nothing when swapped
-- back. Someone else's data under that name is left alone. On a Redis
-- Cluster, whose SELECT refuses every other db, nothing is done. Where
-- SELECT is refused for another reason (an ACL without +select, a renamed
-- command) the search cannot run: the marker just written is deleted
-- again (the refused SELECT left the script in its db) and an error reply
-- is returned, so that no marker stands that T4 did not make alone.
-- It searches the dbs up to the first that SELECT refuses (Redis:
-- "databases", 16 by default), and no more than t_dbs.
local function t_alone(km, val)
  local here = nil
  local db = 0
  while db < t_dbs do
    local ok = redis.pcall('SELECT', db)
    if type(ok) == 'table' and ok.err then
      if db == 0 and not string.find(ok.err, 'cluster mode', 1, true) then
        redis.call('DEL', km)
        return redis.error_reply('ERR redlock: SELECT refused (' .. ok.err .. '): a new marker must delete the markers of its name in the other dbs (docs/design.md 6.2, T4); allow SELECT to this user (docs/security.md)')
      end
      break
    end
    local v = redis.pcall('GET', km)
    if v == val then
      here = db
    elseif type(v) == 'string' and (t_parse(v) or string.match(v, '^(%S+) (%d+) (%d+) (%S+)$')) then
      redis.call('DEL', km)
    end
    db = db + 1
  end
  if here then
    redis.call('SELECT', here)
  elseif db > 0 then
    return redis.error_reply('ERR redlock: the marker ' .. km .. ' just written is in no db')
  end
  return nil
end

-- t_trust applies the rule with marker key km and delay (the rejoin delay
-- in milliseconds; '', absent or negative: 0). It returns the floor for
-- the fence counter (the marker's from, a canonical decimal; '' for a
-- stand-in, which is not checked) when the node may grant, and otherwise
-- nil, the milliseconds left and why; or nil, nil and an error reply (a
-- replica, someone else's data in the marker key).
local function t_trust(km, delay)
  local id, unknown, rerr = t_identity()
  if rerr then return nil, nil, rerr end
  if not id then return nil, 0, unknown end
  if id == '-' then return '' end
  if not km then return nil, 0, 'data state unknown: no marker key given' end
  local d = tonumber(delay or '') or 0
  if d < 0 then d = 0 end
  d = d * 1000
  local m = redis.pcall('GET', km)
  if type(m) == 'table' then
    if not string.find(m.err or '', 'WRONGTYPE', 1, true) then return nil, nil, redis.error_reply(m.err) end
    m = '?'
  end
  local now = c_now()
  local rid, from, seen, why
  local hi = ''
  local write = false
  if m then
    rid, from, seen, why, hi = t_parse(m)
    if not rid then
      hi = ''
      -- An older marker, "<run_id> <evicted_keys> <from> <why>", vouches
      -- for no replid: judged as another identity, its from kept.
      local _, _, f = string.match(m, '^(%S+) (%d+) (%d+) (%S+)$')
      if not f then
        return nil, nil, redis.error_reply('WRONGTYPE redlock marker key ' .. km .. ' holds data that is not a marker')
      end
      rid, from, seen, why = '', f, '0', '-'
    end
    from, seen = tonumber(from), tonumber(seen)
  end
  -- A loss's from is rounded up to c_step (when there is a delay to wait),
  -- so that nodes that noticed it in the same second start new counters
  -- equal.
  local later = now + d
  if d > 0 then later = later + (c_step - later % c_step) % c_step end
  if not m then
    from, seen, why, hi, write = later, now, 'no-marker', '', true
  elseif rid ~= id then
    from, why, write = math.max(from, later), 'identity', true
  end
  if now < seen - t_tick then
    -- The clock stepped back: wait until it is past every time the marker
    -- saw, plus D. seen is kept.
    from, why, write = math.max(from, seen + d), 'clock-back', true
  elseif now > seen + t_tick then
    seen, write = now, true
  end
  if now >= from and why ~= '-' then why, write = '-', true end
  local head = 'v4 ' .. id .. ' ' .. string.format('%.0f', from) .. ' ' ..
    string.format('%.0f', seen) .. ' ' .. why
  c_mark = {km = km, head = head, hi = hi}
  if write then
    if hi ~= '' then head = head .. ' ' .. hi end
    redis.call('SET', km, head)
    if not m then
      local e = t_alone(km, head)
      if e then return nil, nil, e end
    end
  end
  if now < from then
    -- A marker that vouches from a time still ahead: the clock is behind
    -- it (stepped back by less than t_tick since seen was written).
    if why == '-' then why = 'clock-back' end
    return nil, math.ceil((from - now) / 1000), why
  end
  return string.format('%.0f', from)
end

-- t_gate applies t_trust before a grant (the scripts' last check before
-- their first write): it returns the floor to count the fence counter from
-- (the larger of given, the caller's, and the rule's) and whether the node
-- is checked (not a stand-in: the lost-key check applies), or nil and the
-- reply to return: a refusal {3, ms, why} or an error.
local function t_gate(km, delay, given)
  local floor, wait, why = t_trust(km, delay)
  if not floor then
    if not wait then return nil, why end
    return nil, {3, wait, why}
  end
  local checked = floor ~= ''
  given = given or ''
  if given ~= '' and (floor == '' or c_less(floor, given)) then floor = given end
  return floor, nil, checked
end

-- t_floor reads a granting script's floor mode: "floor" (value is the
-- caller's floor, a counter: c_valid) or "none" (or absent). It returns
-- the caller's floor ('' for none), or nil and an ERR reply naming script
-- for a mode of another name or a floor that is not a counter.
local function t_floor(script, mode, value)
  mode = mode or 'none'
  if mode == 'none' then return '' end
  if mode ~= 'floor' then
    return nil, redis.error_reply('ERR redlock ' .. script .. ': floor mode ' .. mode .. ' is neither floor nor none')
  end
  if c_valid(value) then return value end
  return nil, redis.error_reply('ERR redlock ' .. script .. ': floor ' .. tostring(value) .. ' is not a counter (a canonical decimal up to ' .. c_top .. ')')
end

-- t_vote is the one reply of the scripts that grant several locks or a
-- read-write lock (acquire_all, rw_write, rw_read): {verdict, ms, why,
-- lock, readers}, each field in its place (0 or '' when unused), then a
-- grant's counters and times left.
local function t_vote(verdict, ms, why, lock, readers, grants)
  local r = {verdict, ms or 0, why or '', lock or 0, readers or 0}
  for _, x in ipairs(grants or {}) do table.insert(r, x) end
  return r
end

-- t_gatevote is t_gate with its refusal {3, ms, why} as t_vote's
-- "sitout" reply.
local function t_gatevote(km, delay, given)
  local floor, refusal, checked = t_gate(km, delay, given)
  if not floor and type(refusal) == 'table' and refusal[1] == 3 then refusal = t_vote('sitout', refusal[2], refusal[3]) end
  return floor, refusal, checked
end
