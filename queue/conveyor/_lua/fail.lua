-- fail: record a failed, timed-out or stopped attempt; retry later through the delayed set, end in
-- the failed state, or (a cancel was requested while it ran) end in the cancelled state.
-- KEYS: 1 meta, 2 waiting, 3 delayed, 4 active, 5 failed, 6 marker, 7 jobs, 8 dedup, 9 events,
--       10 results, 11 result_index, 12 cancelled, 13 held_slots
-- ARGV: 1 id, 2 token, 3 error text, 4 retry delay ms (-1 = do not retry), 5 keep failed (-1 all;
--       also bounds the cancelled set), 6 deduplication window ms (<= 0 off), 7 result ttl ms (0:
--       results off; on: a final failure or cancel stores its error as the job's result record and
--       announces it, see _lib.lua), 8 lease ms (how long the record of a fail outlives a job
--       retention deleted in this call), 9 started (0: the attempt never started, stopped before a
--       handler took it; a cancel then refunds the attempt and says the job never ran),
--       10 hold ms (> 0: the stopped handler still runs, a thread that cannot be interrupted;
--       a job of a key with a concurrency then keeps its key's slot, held until its worker ends
--       the hold or this long past its last renewal: hold_slot in _lib_limits.lua; absent or 0:
--       the slot is freed now)
-- Returns: {status (1 ok, 0 token does not hold the lease, -2 no such job),
--          outcome ('retry' | 'failed' | 'cancelled' | ''), due or finish time (ms),
--          the held slot's member ('' when none was held; a re-sent fail answers '': the hold it
--          took goes unrenewed and is freed one hold past the fail)}
-- Errors: none; a refused fail changes nothing. Retries happen only while attempts < max attempts.
-- Re-sent: the job keeps its last fail as o = '<token>{<outcome>{<time>'. A fail whose token no
--          longer holds the lease but matches o is the same fail sent again after its reply was
--          lost (tokens are never reused): it gets the first one's reply and changes nothing,
--          instead of a refusal that would tell its worker the lease was lost. When this call's
--          own trim deletes the job (keep 0), o is kept for one lease in the string <job key>{o
--          (no id holds a '{': never a job key), so a re-sent fail finds it there.
local meta, waiting, delayed, active, failed, marker, jobs, dedup, cancelled =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[12]
local id, token, err, delay, keep = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local key = jobs .. id
local now = now_ms()
local status, limited = check_lease(key, token)
if status ~= 1 then
  local last = false
  if status == 0 then last = redis.call('HGET', key, 'o') end
  if status == -2 then last = redis.call('GET', key .. '{o') end
  local by, outcome, at = string.match(last or '', '^(%d+){(%a+){(%d+)$')
  if by == token then return {1, outcome, tonumber(at)} end
  return {status, '', 0}
end

-- Written before any trim, which may delete this job's hash (it must not be re-created).
local function record(outcome, at)
  return token .. '{' .. outcome .. '{' .. string.format('%d', at)
end

local held = ''  -- the member of the slot this fail holds (hold_slot), if any
local function answer(outcome, at)
  redis.call('HSET', key, 'o', record(outcome, at))
  return {1, outcome, at, held}
end

-- End the job in `set` and apply its retention; with keep 0 that may delete the job itself, and
-- then its o lives on for one lease (see Re-sent above).
local function finish(set, outcome)
  local reply = answer(outcome, now)
  trim_by_count(set, jobs, keep, 10)
  if keep == 0 and redis.call('EXISTS', key) == 0 then
    redis.call('SET', key .. '{o', record(outcome, now), 'PX', tonumber(ARGV[8]))
  end
  return reply
end
if limited then
  local hold_ms = tonumber(ARGV[10]) or 0
  if hold_ms > 0 and redis.call('HGET', key, 'gc') then
    held = hold_slot(KEYS[13], token, limited, now + hold_ms)
  elseif free_slot(waiting, jobs, limited) then
    wake(marker)
  end
end

local f = redis.call('HMGET', key, 'a', 'm', 'q')
local attempts, max = tonumber(f[1]) or 1, tonumber(f[2]) or 1
redis.call('ZREM', active, id)
use_results(tonumber(ARGV[7]), KEYS[9], KEYS[10], KEYS[11])
if f[3] then
  local unstarted = ARGV[9] == '0'
  if unstarted then redis.call('HINCRBY', key, 'a', -1) end  -- as release.lua refunds it
  finish_cancelled(cancelled, key, id, now, unstarted)
  remember(dedup, tonumber(ARGV[6]), id, now)
  return finish(cancelled, 'cancelled')
end
if delay >= 0 and attempts < max then
  redis.call('HDEL', key, 'k', 'l', 'h')
  if delay == 0 then
    redis.call('HSET', key, 's', 'w', 'r', err)
    requeue('LPUSH', waiting, jobs, id)
  else
    redis.call('HSET', key, 's', 'd', 'r', err)
    redis.call('ZADD', delayed, now + delay, id)
  end
  wake(marker)
  return answer('retry', now + delay)
end
finish_failed(failed, meta, key, id, err, now)
remember(dedup, tonumber(ARGV[6]), id, now)
return finish(failed, 'failed')
