-- ack: complete leased jobs, then (optionally) claim the next ones in the same call.
-- KEYS: 1 meta, 2 waiting, 3 delayed, 4 active, 5 completed, 6 marker, 7 jobs, 8 requests, 9 dedup,
--       10 events, 11 results, 12 result_index
--       (10-12: see RESULTS in _lib.lua: 11 is a hash, 12 a list)
--       (8: the calling worker's request record, <requests prefix><worker>; unused without an id)
-- ARGV: 1 lease ms (for claimed jobs), 2 claim count (<= 1000), 3 promote batch,
--       4 keep completed (-1 all, 0 none, N newest), 5 request id ('' = none; a leading '+' marks
--       a re-sent call, the only kind that reads the record),
--       6 deduplication window ms (<= 0 off), 7 result ttl ms (0: results off), 8 n acks (<= 1000),
--       then n tuples: id, token, and (results on only) the success record, 'c:' .. serialised value
-- Returns: {status per ack (1 ok, 0 token does not hold the lease, -2 no such job),
--          now, next due (-1 none; now when jobs are still ready), then 2 (CLAIM_FIELDS in
--          _replies.py) values per claimed job as in claim.lua}
-- Errors: CONVEYOR_BOUND when a count exceeds its limit. A refused ack changes nothing; an id
--         acked twice in one call (same token) is completed once, the repeat answered 0.
-- Retry safety: with a request id, the call records its ack statuses and claimed (id, token)
-- pairs under KEYS[8] for one lease. A re-sent call with the same id (its first reply was lost to
-- a socket timeout) changes nothing and answers the recorded batch again, each job read afresh and
-- only while the recorded token still holds it.
local meta, waiting, delayed, active, completed, marker, jobs, record, dedup =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local lease_ms, count, promote_batch = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local keep, request, window, n = tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[8])
local ttl = tonumber(ARGV[7])
local stride = 2
if ttl > 0 then
  use_results(ttl, KEYS[10], KEYS[11], KEYS[12])
  stride = 3
end
bounded(count, 1000, 'claim')
bounded(n, 1000, 'ack')
local now = now_ms()

-- Record layout: request id, statuses joined by ',', then id, token pairs, all split by '{'.
local function replay(parts)
  local out = {}
  for status in string.gmatch(parts[2], '[^,]+') do out[#out + 1] = tonumber(status) end
  if #out ~= n then return nil end
  out[#out + 1] = now
  out[#out + 1] = next_due(delayed)
  for i = 3, #parts - 1, 2 do
    local id, token = parts[i], parts[i + 1]
    local f = redis.call('HMGET', jobs .. id, 'k', 'n', 'd', 'a', 'm', 'e', 'x')
    if f[1] == token then
      claimed_entry(out, id, token, f[2], f[3], f[4], f[5], f[6], f[7])
    end
  end
  return out
end

if string.sub(request, 1, 1) == '+' then
  request = string.sub(request, 2)
  local stored = redis.call('GET', record)
  if stored then
    local parts = split_braces(stored)
    if parts[1] == request then
      local out = replay(parts)
      if out then return out end
    end
  end
end

local out, done, finished, freed, gone = {}, {}, {}, {}, {}
-- Ids this call completed: the same (id, token) given twice is completed and counted once, the
-- repeat answered 0 as when keep > 0 (its first ack cleared the token). With keep = 0 the job
-- is deleted after the loop, so its lease still checked out for the repeat: counted twice in the
-- totals, the stats and its limit key's running count (one slot freed too many).
local acked = {}
local claimed = request ~= '' and {} or nil  -- claimed ids and tokens, for the record
local records, expires = {}, nil
if ttl > 0 then expires = tostring(now + ttl) end  -- formatted once, not once per job
for i = 1, n do
  local at = 9 + stride * (i - 1)
  local id, token = ARGV[at], ARGV[at + 1]
  local key = jobs .. id
  local status, limited = check_lease(key, token)
  if status == 1 and acked[id] then status = 0 end
  out[i] = status
  if status == 1 then
    acked[id] = true
    if limited then freed[limited] = (freed[limited] or 0) + 1 end
    done[#done + 1] = id
    remember(dedup, window, id, now)
    if expires then
      -- the client sends the success record but its expiry ('c:' .. value)
      local r = #records
      records[r + 1], records[r + 2] = id, expires .. ARGV[at + 2]
    end
    if keep == 0 then
      gone[#gone + 1] = key  -- one DEL for the batch: a command called from Lua has a fixed cost
    else
      redis.call('HDEL', key, 'k', 'l', 'h', 'q')
      redis.call('HSET', key, 's', 'c', 't', now)
      finished[#finished + 1] = now
      finished[#finished + 1] = id
    end
  end
end
if free_counted(waiting, jobs, freed) then wake(marker) end
if #gone > 0 then redis.call('DEL', unpack(gone)) end  -- <= 1000 keys (bounded above)
if #done > 0 then
  redis.call('ZREM', active, unpack(done))  -- <= 1000 (bounded above): no chunks needed
  redis.call('HINCRBY', meta, 'completed', #done)
end
if expires and #done > 0 then
  keep_results(expires, 'c', table.concat(done, '{'), records)  -- one RPUSH, HSET, XADD per batch
end
if #finished > 0 then
  redis.call('ZADD', completed, unpack(finished))
  -- Amortised retention: remove up to twice what was added, so the set converges to `keep`.
  trim_by_count(completed, jobs, keep, 2 * #done + 10)
end

out[#out + 1] = now
local next_pos = #out + 1
out[next_pos] = -1
if count > 0 then
  promote_due(delayed, waiting, jobs, now, promote_batch)
  local got, ready = claim_jobs(out, claimed, meta, waiting, delayed, active, marker, jobs, now, count,
    lease_ms)
  if got < count then out[next_pos] = ready and now or next_due(delayed) end
end
if request ~= '' then
  local rec = request .. '{' .. table.concat(out, ',', 1, n)
  if #claimed > 0 then rec = rec .. '{' .. table.concat(claimed, '{') end
  redis.call('SET', record, rec, 'PX', lease_ms)
end
return out
