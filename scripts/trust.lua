-- model: t_trust
-- trust: whether this node may grant a lock now (docs/design.md, section
-- 6.2), included by the scripts that grant (acquire, and release when it
-- hands a lock over). A node that may have lost keys it wrote -- a restart
-- without fsync, FLUSHALL or FLUSHDB, eviction, a failover to a replica
-- that missed writes -- grants nothing until every lease it may have
-- forgotten has expired: for the rejoin delay after the loss was noticed.
--
-- The marker key (one per server, or per hash slot of a Redis Cluster)
-- holds "<run_id> <evicted> <from> <why>": the server whose data it vouches
-- for (INFO run_id), that server's evicted_keys when the marker was
-- written, the time in microseconds on the node's clock from which the
-- node may grant, and why it had to wait ("-" once it may grant). A
-- missing marker, or one naming another server, means the data may not be
-- the data the locks were granted on: the node judges from INFO (t_judge).
-- The marker never expires: one key per server (per slot of a cluster).

-- t_field reads field name of INFO text info (nil when absent).
local function t_field(info, name)
  return string.match(info, '[\r\n]' .. name .. ':([^\r\n]*)')
end

-- t_info reads what the judgement needs in one INFO call, or nil and an
-- error text (an ACL that refuses INFO: the node is then not trusted).
local function t_info()
  local info = redis.pcall('INFO', 'server', 'stats', 'replication', 'commandstats')
  if type(info) == 'table' then return nil, info.err or 'INFO refused' end
  return '\n' .. info, nil
end

-- t_continuous reports whether, by what INFO says, the server has held its
-- data without a loss since it started: no key evicted, no FLUSHALL,
-- FLUSHDB or SWAPDB run, not promoted from a replica, and its statistics
-- not reset (which would hide the rest).
local function t_continuous(info)
  return t_field(info, 'evicted_keys') == '0' and t_field(info, 'second_repl_offset') == '-1' and
    not string.find(info, 'cmdstat_flushall:', 1, true) and
    not string.find(info, 'cmdstat_flushdb:', 1, true) and
    not string.find(info, 'cmdstat_swapdb:', 1, true) and
    not string.find(info, 'cmdstat_config|resetstat:', 1, true)
end

-- t_now is the node's clock in microseconds.
local function t_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- t_judge decides, from INFO, from when a node whose marker is missing or
-- names another server may grant, and writes the marker. A server that
-- held its data since it started may have lost only what it had before
-- its start: it waits the delay from its start (not at all if durable,
-- its data then survived the restart). Any other loss happened at some
-- time up to now: the delay counts from now.
local function t_judge(km, info, delay, durable, now)
  local up = tonumber(t_field(info, 'uptime_in_seconds') or '')
  local from, why = now + delay, 'lost'
  if up and t_continuous(info) then
    -- uptime is whole seconds, rounded down: the start it gives is never
    -- earlier than the real one
    from, why = now - up * 1000000, 'restarted'
    if not durable then from = from + delay end
  end
  if from <= now then why = '-' end
  local m = (t_field(info, 'run_id') or '?') .. ' ' .. (t_field(info, 'evicted_keys') or '0') .. ' ' ..
    string.format('%.0f', from) .. ' ' .. why
  redis.call('SET', km, m)
  return m
end

-- t_trust applies the rule with marker key km. delay is the rejoin delay
-- in milliseconds ('' or absent: the rule is off, nothing is read);
-- servers the run_ids the caller believes the node's servers have,
-- space-separated ('' when unknown: INFO tells); flags holds 'd' when
-- every server of the node fsyncs every write (appendfsync always) and
-- 'e' when it may evict keys (maxmemory with an evicting policy, or
-- unknown): evictions since the marker was written are then a loss. It
-- returns the floor for the fence counter (a canonical decimal, '' for
-- none: counters below the time the node may grant from are raised to it)
-- when the node may grant, and otherwise nil, the milliseconds left and
-- why; or nil, nil and an error reply.
local function t_trust(km, delay, servers, flags)
  delay = tonumber(delay or '')
  if not delay or delay < 0 then return '' end
  if not km then return nil, 0, 'data state unknown: no marker key given' end
  delay = delay * 1000
  flags = flags or ''
  local m = redis.pcall('GET', km)
  if type(m) == 'table' then
    if not string.find(m.err or '', 'WRONGTYPE', 1, true) then return nil, nil, redis.error_reply(m.err) end
    m = '?'
  end
  local run, ev, from, why
  if m then
    run, ev, from, why = string.match(m, '^(%S+) (%d+) (%d+) (%S+)$')
    if not run then
      return nil, nil, redis.error_reply('WRONGTYPE redlock marker key ' .. km .. ' holds data that is not a marker')
    end
  end
  local info, now = nil, nil
  if not m or not string.find(' ' .. (servers or '') .. ' ', ' ' .. run .. ' ', 1, true) then
    local err
    info, err = t_info()
    if not info then return nil, 0, 'data state unknown: ' .. err end
    if not m or t_field(info, 'run_id') ~= run then
      now = t_now()
      m = t_judge(km, info, delay, string.find(flags, 'd', 1, true), now)
      run, ev, from, why = string.match(m, '^(%S+) (%d+) (%d+) (%S+)$')
    end
  end
  if string.find(flags, 'e', 1, true) then
    if not info then
      local err
      info, err = t_info()
      if not info then return nil, 0, 'data state unknown: ' .. err end
    end
    local cur = t_field(info, 'evicted_keys') or '0'
    if cur ~= ev then
      -- Keys were evicted (or the count reset) since the marker was
      -- written: ours may be among them.
      now = now or t_now()
      from, why, ev = string.format('%.0f', now + delay), 'evicted', cur
      redis.call('SET', km, run .. ' ' .. ev .. ' ' .. from .. ' ' .. why)
    end
  end
  if why ~= '-' then
    now = now or t_now()
    local left = tonumber(from) - now
    if left > 0 then return nil, math.ceil(left / 1000), why end
    redis.call('SET', km, run .. ' ' .. ev .. ' ' .. from .. ' -')
  end
  return from
end

-- t_gate applies t_trust before a grant (the scripts' last check before
-- their first write): it returns the floor to count the fence counter from
-- (the larger of given, the caller's, and the rule's), or nil and the
-- reply to return: a refusal {3, ms, why} or an error.
local function t_gate(km, delay, servers, flags, given)
  local floor, wait, why = t_trust(km, delay, servers, flags)
  if not floor then
    if not wait then return nil, why end
    return nil, {3, wait, why}
  end
  given = given or ''
  if floor == '' or (given ~= '' and c_less(floor, given)) then floor = given end
  return floor, nil
end
