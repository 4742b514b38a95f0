package scripts

import "strings"

// CheckKeys returns s with the KEYS check in front, as a script of its
// own (same name, its own digest): every redis.call or redis.pcall of a
// key that is not in KEYS fails the script with "redlock: undeclared key
// <k> in <cmd>", and a command the check does not know fails it too. For
// tests of scripts and transports; this package's own scripts carry it
// under the build tag redlock_checkkeys (s is then returned as it is).
func CheckKeys(s *Script) *Script {
	if strings.HasPrefix(s.src, checkKeysLua) {
		return s
	}
	return New(s.name, checkKeysLua+s.src)
}

// checkKeysLua is the KEYS check's prelude: prepended to a script's
// source, it makes every redis.call and redis.pcall of a key not declared
// in KEYS raise "redlock: undeclared key <k> in <cmd>". Built into this
// package's scripts only under the build tag redlock_checkkeys
// (checkkeys_on.go); its own test (checkkeys_test.go) runs in every build.
// It is Lua in a Go string, not a .lua file: it is no protocol step (the
// model's test requires every scripts/*.lua to name one).
const checkKeysLua = `-- checkkeys: the KEYS check (built in only under the build tag
-- redlock_checkkeys: checkkeys_on.go). Prepended to a script's source, it
-- shadows redis with a table whose call and pcall first check that every
-- key argument of the command is declared in KEYS, and raise the error
-- "redlock: undeclared key <k> in <cmd>" otherwise; a command missing from
-- the table below raises "redlock: command <cmd> not in the KEYS check's
-- table". It shadows pcall too, so that a script's own pcall cannot
-- swallow the check's error. Redis's scripting contract requires every
-- key a script touches to be declared (Redis Cluster routes by them;
-- Dragonfly refuses undeclared keys by default).
local ck_declared = {}
for _, k in ipairs(KEYS) do ck_declared[k] = true end
-- where each command's keys are: 1 the first argument, 'all' every
-- argument, 0 none.
local ck_keys = {
  GET = 1, SET = 1, PERSIST = 1, PEXPIRE = 1, PEXPIREAT = 1, EXPIRE = 1,
  PTTL = 1, TTL = 1, TYPE = 1, INCR = 1, INCRBY = 1, STRLEN = 1,
  ZADD = 1, ZCARD = 1, ZCOUNT = 1, ZRANGE = 1, ZRANGEBYSCORE = 1,
  ZREVRANGE = 1, ZREM = 1, ZREMRANGEBYSCORE = 1, ZSCORE = 1, ZRANK = 1,
  ZINCRBY = 1, HSET = 1, HGET = 1, HDEL = 1, HGETALL = 1,
  DEL = 'all', UNLINK = 'all', EXISTS = 'all', MGET = 'all', TOUCH = 'all',
  TIME = 0, INFO = 0, PUBLISH = 0, PING = 0, ECHO = 0, SELECT = 0,
}
local function ck_check(cmd, ...)
  local name = string.upper(tostring(cmd))
  local where = ck_keys[name]
  if where == nil then
    error('redlock: command ' .. name .. " not in the KEYS check's table", 0)
  end
  local args = {...}
  local last = 0
  if where == 1 then last = 1 elseif where == 'all' then last = #args end
  for i = 1, last do
    local k = tostring(args[i])
    if not ck_declared[k] then error('redlock: undeclared key ' .. k .. ' in ' .. name, 0) end
  end
end
local ck_redis = redis
local redis = setmetatable({
  call = function(cmd, ...)
    ck_check(cmd, ...)
    return ck_redis.call(cmd, ...)
  end,
  pcall = function(cmd, ...)
    ck_check(cmd, ...)
    return ck_redis.pcall(cmd, ...)
  end,
}, {__index = ck_redis})
local ck_pcall = pcall
local function ck_rethrow(ok, ...)
  if not ok then
    local e = ...
    local text = type(e) == 'table' and e.err or tostring(e)
    if string.find(text or '', 'redlock: undeclared key', 1, true) or
      string.find(text or '', "not in the KEYS check's table", 1, true) then
      error(text, 0)
    end
  end
  return ok, ...
end
local pcall = function(f, ...) return ck_rethrow(ck_pcall(f, ...)) end
`
