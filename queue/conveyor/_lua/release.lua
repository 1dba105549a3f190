-- release: give leased jobs back to the front of their priority level's list (graceful shutdown,
-- over-claim). A job whose cancel was requested while it was held ends cancelled instead, as
-- lease recovery would end it: given back, it would run again after cancel() said it would not.
-- A started job whose attempts are used up ends failed, as lease recovery would fail it: given
-- back, it ran again beyond max attempts ('attempt 2 of 1').
-- A job of a limit key frees its slot; the parked jobs that releases go behind those given back.
-- KEYS: 1 active, 2 waiting, 3 marker, 4 jobs, 5 dedup, 6 events, 7 results, 8 result_index,
--       9 cancelled, 10 meta, 11 failed
-- ARGV: 1 n (<= 1000), 2 keep (-1 all; bounds the cancelled and failed sets), 3 deduplication window ms
--       (<= 0 off), 4 result ttl ms (0: results off), then n triples: id, token, refund (1 = the
--       job never started: the attempt it was charged is given back; 0 = it started, the
--       attempt counts)
-- Returns: {status per job (1 released, 2 ended cancelled, 3 ended failed, 0 token does not hold
--          the lease, -2 no such job)}
-- Errors: CONVEYOR_BOUND when n exceeds 1000. A refused release changes nothing.
local active, waiting, marker, jobs, dedup, cancelled = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[9]
local meta, failed = KEYS[10], KEYS[11]
local n = bounded(tonumber(ARGV[1]), 1000, 'release')
local keep, window = tonumber(ARGV[2]), tonumber(ARGV[3])
use_results(tonumber(ARGV[4]), KEYS[6], KEYS[7], KEYS[8])
local now = now_ms()
local out, freed, given = {}, {}, {}
-- Check every lease first and free the slots at once: the parked jobs released go behind the jobs
-- put back here, oldest first (a slot freed per job put each between two of them, youngest first).
-- Backwards, as below: of an id given twice, the last one is settled (the other is refused).
for i = n, 1, -1 do
  local id, token = ARGV[3 * i + 2], ARGV[3 * i + 3]
  local limited
  out[i], limited = check_lease(jobs .. id, token)
  if out[i] == 1 and given[id] then out[i] = 0 end
  if out[i] == 1 then
    given[id] = true
    if limited then freed[limited] = (freed[limited] or 0) + 1 end
  end
end
local unparked = free_counted(waiting, jobs, freed)

-- Fail a started job on its last attempt (its error names the attempt, as recover.lua's does);
-- false, changing nothing, while attempts remain.
local function failed_if_used_up(key, id)
  local f = redis.call('HMGET', key, 'a', 'm')
  local attempts, max = tonumber(f[1]) or 1, tonumber(f[2]) or 1
  if attempts < max then return false end
  local err = 'stopped at its worker\'s shutdown after attempt ' .. attempts .. ' of ' .. max
  finish_failed(failed, meta, key, id, err .. ' (its attempts are used up: not run again)', now)
  remember(dedup, window, id, now)
  return true
end
local released, stopped, dead = 0, 0, 0
-- Walk backwards: RPUSH puts each id at the claim end, so the first given is claimed first.
for i = n, 1, -1 do
  local id, refund = ARGV[3 * i + 2], ARGV[3 * i + 4]
  local key = jobs .. id
  if out[i] == 1 then
    redis.call('ZREM', active, id)
    if refund == '1' then redis.call('HINCRBY', key, 'a', -1) end
    if redis.call('HGET', key, 'q') then
      finish_cancelled(cancelled, key, id, now, refund == '1')
      remember(dedup, window, id, now)
      out[i], stopped = 2, stopped + 1
    elseif refund ~= '1' and failed_if_used_up(key, id) then
      out[i], dead = 3, dead + 1
    else
      redis.call('HDEL', key, 'k', 'l', 'h')
      redis.call('HSET', key, 's', 'w')
      requeue('RPUSH', waiting, jobs, id)
      released = released + 1
    end
  end
end
if stopped > 0 then trim_by_count(cancelled, jobs, keep, stopped + 10) end
if dead > 0 then trim_by_count(failed, jobs, keep, dead + 10) end
if released > 0 or unparked then wake(marker) end
return out
