-- model: rw_readers, rw_intent
-- rw: what the read-write lock's scripts share (docs/design.md section
-- 14), included after lock.lua, counter.lua and queue.lua. A read-write
-- lock on resource R has, beside its writer's lock key W = P{R}:rw (an
-- ordinary lock key, with its fence counter W:fence shared by readers and
-- writers), an index of its readers W:readers (a sorted set of reader
-- tokens, each scored with the end of its lease in ms) and one key per
-- reader, W:reader:<token>, an ordinary lock key
-- holding "<token> <owner>" with the reader's TTL: the reader's life is
-- its key's, renewed and released by renew.lua and release.lua like any
-- lock. W:intent is a sorted set: a waiting writer's id -> when its intent
-- lapses (ms on the node's clock); while one is live, new readers wait.
-- All share the hash tag {R}, so they fall in one Redis Cluster slot (the
-- reader keys are named by the scripts from W:reader:, which the caller
-- passes).

-- rw_readers reads the index kr of reader keys named prefix .. token at
-- now (ms on the node's clock): how many readers are live, the longest
-- PTTL among them (-1 when one has no expiry), the tokens whose key is
-- gone (lapsed or released: the caller removes them after its first
-- write, rw_purge), and the milliseconds a grant must wait for a reader
-- whose key is gone before the end its score records (evicted or deleted
-- by hand: "lock key lost", counter.lua C5; 0 for none). Each reader's
-- score is the end of its lease (ms), set when it is granted and renewed;
-- the index has no TTL while a reader is live, so it is never evicted
-- under noeviction or a volatile-* policy. An index that holds someone
-- else's data is an error (then nil, 0, {}, err, 0).
local function rw_readers(kr, prefix, now)
  local ids = redis.pcall('ZRANGE', kr, 0, -1, 'WITHSCORES')
  if ids.err then
    if string.find(ids.err, 'WRONGTYPE', 1, true) then
      return nil, 0, {}, 'WRONGTYPE redlock readers key ' .. kr .. ' holds data that is not a redlock readers index', 0
    end
    return nil, 0, {}, ids.err, 0
  end
  local live, longest, gone, lost = 0, 0, {}, 0
  for i = 1, #ids, 2 do
    local id, upto = ids[i], tonumber(ids[i + 1]) or 0
    local p = redis.call('PTTL', prefix .. id)
    if p == -2 then
      table.insert(gone, id)
      if upto - now > 1 then lost = math.max(lost, upto - now) end
    else
      live = live + 1
      if p < 0 or longest < 0 then longest = -1 elseif p > longest then longest = p end
    end
  end
  return live, longest, gone, nil, lost
end

-- rw_purge removes the gone readers rw_readers found.
local function rw_purge(kr, gone)
  for _, id in ipairs(gone) do redis.call('ZREM', kr, id) end
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
  return redis.call('ZCOUNT', ki, '(' .. string.format('%.0f', now), '+inf'), upto - now, nil
end
