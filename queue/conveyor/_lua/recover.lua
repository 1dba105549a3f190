-- recover: settle jobs whose lease expired (the worker died or stalled), at most `batch` per call.
-- A job whose cancel was requested ends cancelled; one whose attempt ran past its time limit (h)
-- counts as timed out, any other as a lost lease; either is redelivered while attempts remain and
-- ends in the failed state otherwise (its error names the cause). A job with a limit key frees
-- its key's slot (releasing one parked job, which goes behind the jobs put back here), so a crashed
-- worker never holds a slot. So does a slot held for a stopped handler past the hold's deadline
-- (at most `batch` of them per call: hold_slot in _lib_limits.lua).
-- KEYS: 1 meta, 2 waiting, 3 active, 4 failed, 5 marker, 6 jobs, 7 dedup, 8 events, 9 results,
--       10 result_index, 11 cancelled, 12 held_slots
-- ARGV: 1 batch (1..100000), 2 keep failed (-1 all; also bounds the cancelled set),
--       3 deduplication window ms (<= 0 off),
--       4 result ttl ms (0: results off; on: a job failed or cancelled here gets a result record)
-- Returns: {redelivered, failed, cancelled}; their sum is added to meta's 'recovered' total (the
--          lease recoveries since the queue was created, read by the Prometheus exporter).
-- Errors: CONVEYOR_BOUND if more than `batch` jobs were processed (asserted, never expected).
local meta, waiting, active, failed, marker, jobs, dedup, cancelled =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[11]
local batch = bounded(tonumber(ARGV[1]), 100000, 'recover batch')
local keep, window = tonumber(ARGV[2]), tonumber(ARGV[3])
use_results(tonumber(ARGV[4]), KEYS[8], KEYS[9], KEYS[10])
local now = now_ms()
local ids = redis.call('ZRANGEBYSCORE', active, '-inf', '(' .. now, 'LIMIT', 0, batch)
bounded(#ids, batch, 'recover')
-- Free every slot first, then put the jobs back: the parked jobs released go behind them, oldest
-- first (a slot freed per job put each released job between two recovered ones, youngest first).
local fields, freed = {}, {}
for i = 1, #ids do
  local f = redis.call('HMGET', jobs .. ids[i], 'a', 'm', 'q', 'h', 'x', 'g')
  fields[i] = f
  if f[6] then freed[f[6]] = (freed[f[6]] or 0) + 1 end
end
call_chunked('ZREM', active, ids)
local holds = redis.call('ZRANGEBYSCORE', KEYS[12], '-inf', '(' .. now, 'LIMIT', 0, batch)
for i = 1, #holds do
  local g = held_key_of(holds[i])
  freed[g] = (freed[g] or 0) + 1
end
call_chunked('ZREM', KEYS[12], holds)
local unparked = free_counted(waiting, jobs, freed)
local redelivered, dead, stopped = 0, 0, 0
-- Walk backwards: RPUSH puts each id at the claim end, so the longest-expired is claimed first.
for i = #ids, 1, -1 do
  local id = ids[i]
  local key = jobs .. id
  local f = fields[i]
  if f[1] then
    local attempts, max = tonumber(f[1]) or 1, tonumber(f[2]) or 1
    local cause = 'lease expired'
    if f[4] and now >= tonumber(f[4]) then cause = timed_out(f[5]) end
    if f[3] then
      finish_cancelled(cancelled, key, id, now, false,
        'cancelled: its worker\'s lease expired (it died or stalled, maybe before the attempt started)')
      remember(dedup, window, id, now)
      stopped = stopped + 1
    elseif attempts >= max then
      finish_failed(failed, meta, key, id, cause .. ' after attempt ' .. attempts .. ' of ' .. max, now)
      remember(dedup, window, id, now)
      dead = dead + 1
    else
      redis.call('HDEL', key, 'k', 'l', 'h')
      if cause == 'lease expired' then
        redis.call('HSET', key, 's', 'w')
      else
        redis.call('HSET', key, 's', 'w', 'r', cause .. ' after attempt ' .. attempts .. ' of ' .. max)
      end
      requeue('RPUSH', waiting, jobs, id)
      redelivered = redelivered + 1
    end
  end
end
if dead > 0 then trim_by_count(failed, jobs, keep, dead + 10) end
if stopped > 0 then trim_by_count(cancelled, jobs, keep, stopped + 10) end
local settled = redelivered + dead + stopped
if settled > 0 then redis.call('HINCRBY', meta, 'recovered', settled) end
if redelivered > 0 or unparked then wake(marker) end
return {redelivered, dead, stopped}
