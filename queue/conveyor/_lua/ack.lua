-- ack: complete leased jobs, then (optionally) claim the next ones in the same call.
-- KEYS: 1 meta, 2 waiting, 3 delayed, 4 active, 5 completed, 6 marker, 7 jobs
-- ARGV: 1 lease ms (for claimed jobs), 2 claim count (<= 1000), 3 promote batch,
--       4 keep completed (-1 all, 0 none, N newest), 5 n acks (<= 1000), then n pairs: id, token
-- Returns: {status per ack (1 ok, 0 token does not hold the lease, -1 lease expired, -2 no such job),
--          now, next due (-1 none), then 7 fields per claimed job as in claim.lua}
-- Errors: CONVEYOR_BOUND when a count exceeds its limit. A refused ack changes nothing.
local meta, waiting, delayed, active, completed, marker, jobs =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local lease_ms, count, promote_batch = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local keep, n = tonumber(ARGV[4]), tonumber(ARGV[5])
bounded(count, 1000, 'claim')
bounded(n, 1000, 'ack')
local now = now_ms()

local out, done, finished = {}, {}, {}
for i = 1, n do
  local id, token = ARGV[4 + 2 * i], ARGV[5 + 2 * i]
  local key = jobs .. id
  local status = check_lease(key, token, now)
  out[i] = status
  if status == 1 then
    done[#done + 1] = id
    if keep == 0 then
      redis.call('DEL', key)
    else
      redis.call('HDEL', key, 'k', 'l')
      redis.call('HSET', key, 's', 'c', 't', now)
      finished[#finished + 1] = now
      finished[#finished + 1] = id
    end
  end
end
if #done > 0 then
  redis.call('ZREM', active, unpack(done))
  redis.call('HINCRBY', meta, 'completed', #done)
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
  local got = claim_jobs(out, meta, waiting, active, marker, jobs, now, count, lease_ms)
  if got < count then out[next_pos] = next_due(delayed) end
end
return out
