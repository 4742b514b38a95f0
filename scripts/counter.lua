-- model: c_count
-- counter: the fence counter's helpers, included at the top of the
-- scripts that read or raise a counter. A counter is a canonical decimal
-- (no sign, no leading zero) that Redis can INCR; it never passes through a
-- Lua number, which is exact only up to 2^53: counters are compared as
-- decimal strings, length first.
--
-- The rules, as the model says them (Safety v4, docs/design.md §6.1):
--   C1 seed: a counter that does not exist is created at the node's clock
--      in microseconds rounded down to c_step (a node constant, 1 s), but
--      never below the floor (the marker's from, trust.lua), then
--      incremented.
--   C2 floor: an existing counter below the floor is raised to the floor
--      before the increment.
--   C3 live: while a lease it counted is live, the counter holds "V U"
--      with no TTL: V the counter, U the node time in microseconds until
--      which that lease runs (a renewal sets U again). A key without a TTL
--      is never evicted under noeviction or a volatile-* policy.
--   C4 life: when its lease ends (a release, or a script that finds U
--      passed), the counter goes back to "V" with a TTL of c_life (a node
--      constant, 20 s): a counter outlives its last lease by c_life.
--   C5 lost key: a grant that finds the lock key missing while the
--      counter's U is more than c_grace ahead of the node's clock refuses
--      until U ("lock key lost": evicted or deleted by hand). A read-write
--      lock's readers share the counter: U is then the latest end of its
--      live readers, and the readers index (which has a TTL) must account
--      for it (rw_read.lua; c_end lowers U when a reader leaves).
--   C6 high-water (Safety v4.1): the db's marker (trust.lua) keeps the
--      largest counter value counted or fenced in its db since the marker
--      was created, rewritten when a value goes above it; a counter that
--      does not exist starts no lower (C1). A counter evicted or expired
--      (it has a TTL after its lease, C4), then created again, even in
--      the same second or after the node's clock stepped back, starts
--      above every value issued here.
-- No Locker's Config changes c_step or c_life, so a mix of Configs cannot
-- make tokens go back.

local c_top = '9223372036854775807'

-- c_step is the granularity of a new counter's start, in microseconds.
local c_step = 1000000
-- c_life is how long a counter lives after its last lease ended, in
-- milliseconds.
local c_life = 20000
-- c_grace is how far, in microseconds, a lease's recorded end may lie
-- ahead of the node's clock when its lock key has expired (PX counts from
-- the command's millisecond, U from the script's microsecond).
local c_grace = 1000

-- c_mark is the db's marker as the script's gate read or wrote it
-- (trust.lua, t_trust; fence.lua, t_mark): its key (nil when no gate ran
-- and no marker key was given: C6 does not apply), its text up to the
-- high-water, and the high-water ('' for none).
local c_mark = {}

-- c_now is the node's clock in microseconds.
local function c_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- c_less reports whether canonical decimal a is below canonical decimal b.
local function c_less(a, b)
  return #a < #b or (#a == #b and a < b)
end

-- c_decimal reports whether s is a canonical decimal.
local function c_decimal(s)
  return type(s) == 'string' and (s == '0' or string.match(s, '^[1-9]%d*$') ~= nil)
end

-- c_valid reports whether s is a counter: a canonical decimal up to c_top.
local function c_valid(s)
  return c_decimal(s) and not c_less(c_top, s)
end

-- c_read reads the fence counter: its value (false when it does not exist
-- yet), nil or an error text when the key holds something else, and the
-- end of its live lease in microseconds (nil when none is recorded).
local function c_read(kf)
  local raw = redis.pcall('GET', kf)
  if type(raw) == 'table' and not string.find(raw.err or '', 'WRONGTYPE', 1, true) then
    return nil, raw.err, nil
  end
  if not raw then return false, nil, nil end
  local v, u = nil, nil
  if type(raw) == 'string' then
    v, u = string.match(raw, '^(%d+) (%d+)$')
    if not v then v = raw end
  end
  if not c_valid(v) then
    return nil, 'WRONGTYPE redlock fence key ' .. kf .. ' holds data that is not a counter', nil
  end
  return v, nil, tonumber(u)
end

-- c_high records counter value v as the db's high-water when it is above
-- it (C6): the marker is rewritten.
local function c_high(v)
  if not c_mark.km or not c_valid(v) or (c_mark.hi ~= '' and not c_less(c_mark.hi, v)) then return end
  c_mark.hi = v
  redis.call('SET', c_mark.km, c_mark.head .. ' ' .. v)
end

-- c_inc is canonical decimal s plus one, as a canonical decimal, without
-- passing through a Lua number.
local function c_inc(s)
  local i = #s
  while i > 0 and string.byte(s, i) == 57 do i = i - 1 end -- trailing 9s
  if i == 0 then return '1' .. string.rep('0', #s) end
  return string.sub(s, 1, i - 1) .. string.char(string.byte(s, i) + 1) .. string.rep('0', #s - i)
end

-- c_store writes counter v on kf: "v U" without a TTL while a lease runs
-- until upto (µs, C3), else "v" for c_life (C4).
local function c_store(kf, v, upto)
  if upto then
    redis.call('SET', kf, v .. ' ' .. string.format('%.0f', upto))
  else
    redis.call('SET', kf, v, 'PX', c_life)
  end
end

-- c_count counts a new holder on fence key kf, whose value was read as
-- fence (false: no counter yet; never c_top, which the caller refuses).
-- A new counter starts from the node's clock rounded down to c_step, or
-- the db's high-water when that is higher (C1, C6);
-- a counter below floor (a canonical decimal, or '' for none) counts on
-- from floor (C2). The holder's lease runs until upto (µs on the node's
-- clock; nil when no lease runs: the counter then lives c_life). Returns
-- the new counter as Redis stores it.
local function c_count(kf, fence, floor, upto)
  local v = fence
  if not v then
    local us = c_now()
    v = string.format('%.0f', us - us % c_step)
    if c_mark.km and c_mark.hi ~= '' and c_less(v, c_mark.hi) then v = c_mark.hi end
  end
  if floor and floor ~= '' and c_less(v, floor) then v = floor end
  v = c_inc(v)
  c_store(kf, v, upto)
  c_high(v)
  return v
end

-- c_lost returns the milliseconds a grant must wait when its lock key is
-- missing while the counter records a live lease until upto (C5), else 0.
local function c_lost(upto, now)
  if upto and upto - now > c_grace then return math.ceil((upto - now) / 1000) end
  return 0
end

-- c_reader recognises a read-write lock's reader key kl ("W:reader:<token>")
-- whose counter is kf ("W:fence"): it returns the readers index
-- ("W:readers") and the reader's token, or nil for any other lock key (a
-- lock key "P{R}" ends in a brace, a writer's "P{R}:rw" in "rw").
local function c_reader(kl, kf)
  local w, tok = string.match(kl, '^(.*):reader:(%x+)$')
  if w and kf == w .. ':fence' then return w .. ':readers', tok end
  return nil, nil
end

-- c_declared says whether key k is one of the script's KEYS after the
-- lock and its counter: a reader's lease declares its readers index last
-- (Redis's scripting contract: a script touches only the keys it is given).
local function c_declared(k)
  for i = 3, #KEYS do
    if KEYS[i] == k then return true end
  end
  return false
end

-- c_span sets the readers index kr's TTL to reach its latest entry's end
-- (ms on the node's clock; now is the clock in ms), so that an index whose
-- readers all died goes by itself. It may be evicted before that under a
-- volatile-* policy: the counter's U, which has no TTL, keeps the readers'
-- end (C5). An index that does not exist is left so.
local function c_span(kr, now)
  local last = redis.pcall('ZRANGE', kr, -1, -1, 'WITHSCORES')
  if type(last) ~= 'table' or last.err or not last[2] then return end
  redis.call('PEXPIRE', kr, math.max(tonumber(last[2]) - now, 0) + 1)
end

-- c_end ends a lease on lock key kl (released or given up); a key that
-- holds someone else's data is left alone. Any lease but a reader's: the
-- counter goes back to "V" for c_life (C4). A reader leaves its readers
-- index kr (declared in KEYS; else it stays there until its score lapses
-- and a sweep takes it, and U stays), whose last member takes the index
-- with it. Where its entry stood, the index stood and holds every live
-- reader (an index is created again only by a grant that U does not
-- forbid: rw_read.lua), so U comes down to the latest end left in it, or
-- goes (C4) when none is left; where its entry did not stand (the index
-- was evicted), U stays: a writer waits until it passes.
local function c_end(kl, kf)
  local kr, tok = c_reader(kl, kf)
  if kr and not c_declared(kr) then return end
  local v, bad, upto = nil, nil, nil
  if kr then
    if redis.pcall('ZREM', kr, tok) ~= 1 then return end
    v, bad, upto = c_read(kf)
    if not v or bad or not upto then return end
    local last = redis.call('ZRANGE', kr, -1, -1, 'WITHSCORES')
    local top = tonumber(last[2] or '')
    if top and top >= math.floor(c_now() / 1000) then -- a live reader is left (rw.lua)
      c_store(kf, v, math.min(upto, top * 1000))
      return
    end
  else
    v, bad, upto = c_read(kf)
  end
  if v and not bad and upto then c_store(kf, v, nil) end
end
