-- model: rw_readers, rw_sweep, rw_intent
-- rw: the helpers the read-write lock's scripts share (docs/design.md
-- section 14), included after lock.lua and counter.lua (and trust.lua for
-- the granting scripts). A read-write lock on resource R has these keys,
-- all with the hash tag {R} (one Redis Cluster slot), and every script
-- names the ones it touches in KEYS:
--   W = P{R}:rw      the writer's lock, an ordinary lock key "<token> <owner>"
--   W:fence          the fence counter readers and writers share (counter.lua);
--                    while a lease is live it records, without a TTL, the
--                    writer's end or the latest end of the live readers
--                    (U, C3 and C5)
--   W:readers        the readers index: a sorted set, reader token -> the
--                    end of its lease (ms on the node's clock, never
--                    before its key's expiry). A reader is live until the
--                    clock passes its end: the index, not the reader's
--                    key, decides (a key that stands has an end not
--                    passed, so a reader the index dropped has no key).
--                    Its TTL reaches its latest end (counter.lua, c_span),
--                    so readers that died leave nothing but the counter;
--                    under a volatile-* policy it may be evicted before
--                    then, and the counter's U, which it must account for,
--                    keeps the live readers' end: while U is ahead of the
--                    index's latest live end, no writer and no new reader
--                    is granted (rw_read.lua, rw_write.lua: "key-lost").
--                    Every rw_read and rw_write call removes the readers
--                    whose end has passed (rw_sweep), and with the last of
--                    them the index.
--   W:reader:<token> one reader's lock "<token> <owner>", TTL = its lease:
--                    what renew.lua, fence.lua and release.lua act on
--                    (renew raises its index entry and U; release removes
--                    the entry and lowers U, counter.lua c_end).
--   W:intent         a sorted set, waiting writer's id -> when its intent
--                    lapses (ms); while one is live, new readers wait.

-- rw_now is the node's clock in milliseconds.
local function rw_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- rw_ms is a whole number of milliseconds as a score argument.
local function rw_ms(ms)
  return string.format('%.0f', ms)
end

-- rw_end is the end of a lease of ttl ms that starts now, in ms on the
-- node's clock, rounded up: read after the SET or PEXPIRE of the reader's
-- key, it is never before that key's expiry.
local function rw_end(ttl)
  return math.ceil((c_now() + tonumber(ttl) * 1000) / 1000)
end

-- rw_readers reads the readers index kr at now (ms): how many readers are
-- live (their end not before now), the most milliseconds one has left (0
-- for none), and an error text when kr holds someone else's data.
local function rw_readers(kr, now)
  local live = redis.pcall('ZCOUNT', kr, rw_ms(now), '+inf')
  if type(live) == 'table' then
    if string.find(live.err or '', 'WRONGTYPE', 1, true) then
      return 0, 0, 'WRONGTYPE redlock readers key ' .. kr .. ' holds data that is not a redlock readers index'
    end
    return 0, 0, live.err
  end
  if live == 0 then return 0, 0, nil end
  local last = redis.call('ZRANGE', kr, -1, -1, 'WITHSCORES')
  return live, tonumber(last[2]) - now, nil
end

-- rw_sweep removes from the readers index kr (checked by rw_readers) the
-- readers whose end is before now: readers that died without
-- releasing, or whose release did not arrive. The last one takes the
-- index with it. Called after a script's other writes (a first write that
-- frees memory would let the later ones past a node's maxmemory).
local function rw_sweep(kr, now)
  redis.call('ZREMRANGEBYSCORE', kr, '-inf', '(' .. rw_ms(now))
end

-- rw_intent reads the writers' intents ki at now: how many are live and
-- the most time one has left, in ms; an error when ki holds someone
-- else's data.
local function rw_intent(ki, now)
  local last = redis.pcall('ZRANGE', ki, -1, -1, 'WITHSCORES')
  if last.err then
    if string.find(last.err, 'WRONGTYPE', 1, true) then
      return 0, 0, 'WRONGTYPE redlock intent key ' .. ki .. ' holds data that is not a redlock intent set'
    end
    return 0, 0, last.err
  end
  local upto = tonumber(last[2])
  if not upto or upto <= now then return 0, 0, nil end
  return redis.call('ZCOUNT', ki, '(' .. rw_ms(now), '+inf'), upto - now, nil
end
