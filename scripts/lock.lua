-- model: l_holds
-- lock: what the scripts that read a lock key share, included at the top
-- of them. A lock key holds "<token> <owner>"; only the token is compared.

-- l_get reads lock key k: its value (false when the lock is free), or nil
-- and an error reply when k holds someone else's data.
local function l_get(k)
  local v = redis.pcall('GET', k)
  if type(v) == 'table' then
    if not string.find(v.err or '', 'WRONGTYPE', 1, true) then return nil, redis.error_reply(v.err) end
    return nil, redis.error_reply('WRONGTYPE redlock lock key ' .. k .. ' holds data that is not a lock')
  end
  return v, nil
end

-- l_holds reports whether lock value v (anything but a string: no lock)
-- is held by token t (anything but a string: no token).
local function l_holds(v, t)
  return type(t) == 'string' and type(v) == 'string' and string.sub(v, 1, #t + 1) == t .. ' '
end

-- l_token is the token of lock value v (nil when v is not one).
local function l_token(v)
  return v and string.match(v, '^(%S+) ')
end


-- l_left is what a lock the caller's token holds has left, for a reply:
-- its PTTL p, but 1 where p is 0 (Redis reports 0 in a key's last
-- millisecond), since a time left of 0 reads as a new grant's whole lease.
local function l_left(p)
  if p == 0 then return 1 end
  return p
end
