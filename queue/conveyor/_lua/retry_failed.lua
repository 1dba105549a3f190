-- retry_failed: give failed jobs a fresh start (attempts reset to 0) at the claim end of the queue,
-- in the order given (the oldest failure first when none are named).
-- Their failure records go too, whatever the caller's store_results: a new attempt finished by a
-- worker that stores no result would else leave the old failure as the job's result.
-- KEYS: 1 waiting, 2 failed, 3 marker, 4 jobs, 5 results (hash)
-- ARGV: 1 n (<= 1000; 0 = the oldest `batch` failed jobs), 2 batch (1..1000), then n ids
-- Returns: {retried, then the ids retried}
-- Errors: CONVEYOR_BOUND when n or batch exceeds 1000. Ids that are not failed are skipped.
local waiting, failed, marker, jobs = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local ids = chosen_ids(failed, ARGV)
local moved = {}
for i = 1, #ids do
  local key = jobs .. ids[i]
  if redis.call('HGET', key, 's') == 'f' then
    redis.call('HSET', key, 's', 'w', 'a', 0)
    redis.call('HDEL', key, 't')
    moved[#moved + 1] = ids[i]
  end
end
-- Add before removing (as in promote): a failure midway may duplicate, never lose. Each job goes
-- to the claim end of its own priority level, walking backwards (as release.lua does): RPUSH puts
-- each at the claim end, so the first id given (or the oldest failure) is claimed first.
for i = #moved, 1, -1 do requeue('RPUSH', waiting, jobs, moved[i]) end
call_chunked('ZREM', failed, moved)
call_chunked('HDEL', KEYS[5], moved)
if #moved > 0 then wake(marker) end
local out = {#moved}
for i = 1, #moved do out[i + 1] = moved[i] end
return out
