-- recover: redeliver jobs whose lease expired (the worker died or stalled), at most `batch` per call;
-- a job that has used all its attempts ends in the failed state instead.
-- KEYS: 1 meta, 2 waiting, 3 active, 4 failed, 5 marker, 6 jobs, 7 dedup, 8 events, 9 results (prefix)
-- ARGV: 1 batch (1..100000), 2 keep failed (-1 all), 3 deduplication window ms (<= 0 off),
--       4 result ttl ms (0: results off; on: a job failed here gets a result record, see _lib.lua)
-- Returns: {redelivered, failed}
-- Errors: CONVEYOR_BOUND if more than `batch` jobs were processed (asserted, never expected).
local meta, waiting, active, failed, marker, jobs, dedup =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local batch = bounded(tonumber(ARGV[1]), 100000, 'recover batch')
local keep = tonumber(ARGV[2])
if tonumber(ARGV[4]) > 0 then RESULTS = {ttl = tonumber(ARGV[4]), events = KEYS[8], prefix = KEYS[9]} end
local now = now_ms()
local ids = redis.call('ZRANGEBYSCORE', active, '-inf', '(' .. now, 'LIMIT', 0, batch)
bounded(#ids, batch, 'recover')
local redelivered, dead = 0, 0
-- Walk backwards: RPUSH puts each id at the claim end, so the longest-expired is claimed first.
for i = #ids, 1, -1 do
  local id = ids[i]
  local key = jobs .. id
  redis.call('ZREM', active, id)
  local f = redis.call('HMGET', key, 'a', 'm')
  if f[1] then
    local attempts, max = tonumber(f[1]) or 1, tonumber(f[2]) or 1
    if attempts >= max then
      finish_failed(failed, meta, key, id, 'lease expired after attempt ' .. attempts .. ' of ' .. max, now)
      remember(dedup, tonumber(ARGV[3]), id, now)
      dead = dead + 1
    else
      redis.call('HDEL', key, 'k', 'l')
      redis.call('HSET', key, 's', 'w')
      requeue('RPUSH', waiting, jobs, id)
      redelivered = redelivered + 1
    end
  end
end
if dead > 0 then trim_by_count(failed, jobs, keep, dead + 10) end
if redelivered > 0 then wake(marker) end
return {redelivered, dead}
