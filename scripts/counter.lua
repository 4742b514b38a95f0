-- model: c_count
-- counter: the fence counter's helpers, included at the top of the
-- scripts that read or raise a counter. A counter is a canonical decimal
-- (no sign, no leading zero) that Redis can INCR; it never passes through a
-- Lua number, which is exact only up to 2^53: counters are compared as
-- decimal strings, length first.

local c_top = '9223372036854775807'

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
-- yet), or nil and an error text when the key holds something else.
local function c_read(kf)
  local fence = redis.pcall('GET', kf)
  if type(fence) == 'table' and not string.find(fence.err or '', 'WRONGTYPE', 1, true) then
    return nil, fence.err
  end
  if type(fence) == 'table' or (fence and not c_valid(fence)) then
    return nil, 'WRONGTYPE redlock fence key ' .. kf .. ' holds data that is not a counter'
  end
  return fence, nil
end

-- c_life is how long a fence counter lives after its last change, in
-- milliseconds, for a seed step in microseconds: 4 steps, at least a
-- second.
local function c_life(step)
  return math.max(math.ceil(step * 4 / 1000), 1000)
end

-- c_inc is canonical decimal s plus one, as a canonical decimal, without
-- passing through a Lua number.
local function c_inc(s)
  local i = #s
  while i > 0 and string.byte(s, i) == 57 do i = i - 1 end -- trailing 9s
  if i == 0 then return '1' .. string.rep('0', #s) end
  return string.sub(s, 1, i - 1) .. string.char(string.byte(s, i) + 1) .. string.rep('0', #s - i)
end

-- c_count counts a new holder on fence key kf, whose value was read as
-- fence (false: no counter yet; never c_top, which the caller refuses).
-- A new counter starts from the node's clock in microseconds, rounded down
-- to a multiple of step (so that the nodes of one acquisition start equal
-- and the fence step is not needed); a node that restarted empty thus
-- counts on from above every token issued before (docs/design.md, section
-- 6.1). A counter below floor (a canonical decimal, or '' for none) may
-- have lost increments in a restart and counts on from floor. The counter
-- never passes through a Lua number (exact only up to 2^53): it is
-- incremented as a decimal string and written with one SET. It expires 4
-- steps (twice the rejoin delay) after its last count: a counter created
-- again from the clock then still exceeds every token it counted
-- (docs/design.md, section 6.1). Returns the new counter as Redis stores
-- it.
local function c_count(kf, fence, floor, step)
  step = tonumber(step or '1') or 1
  if step < 1 then step = 1 end
  local v = fence
  if not v then
    local now = redis.call('TIME')
    local us = tonumber(now[1]) * 1000000 + tonumber(now[2])
    v = string.format('%.0f', us - us % step)
  elseif floor and floor ~= '' and c_less(v, floor) then
    v = floor
  end
  v = c_inc(v)
  redis.call('SET', kf, v, 'PX', c_life(step))
  return v
end
