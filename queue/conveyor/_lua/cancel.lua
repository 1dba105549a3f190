-- cancel: remove a waiting or delayed job, or ask the worker holding an active job to stop it.
-- KEYS: 1 waiting, 2 delayed, 3 jobs, 4 events, 5 results, 6 result_index, 7 marker, 8 dedup
-- ARGV: 1 id, 2 result ttl ms (0: results off; on: a job removed here gets a cancelled result
--       record and is announced, so its result waiters end instead of waiting for nothing),
--       3 deduplication window ms (<= 0 off; on: a removed job's id is kept for the window, as
--       every finished job's is, so an enqueue of that id meanwhile creates nothing)
-- Returns: {status (1 cancelled: removed, 2 cancel requested: the job is active; its worker learns
--          at its next heartbeat, stops the handler and settles the job as cancelled, or recovery
--          does should the worker be gone; 0 not cancellable: finished, -2 no such job), state}
-- Errors: none. Cancelling a waiting job is O(length of its priority level's list) (LREM).
-- Per-key limits: a freed slot releases one parked job of its key, which then holds the key's
-- turn while it waits (or waits out its rate reservation in the delayed set), marked gt. A removed
-- job holding such a turn hands it on: while the key has a free slot, its oldest parked job goes
-- to the claim end of its level (else the other parked jobs waited for ever). A removed job that
-- held no turn hands on nothing: a parked job released for it went to the claim end ahead of the
-- one holding the turn, and the key's jobs started out of order. Yet a free slot that no job holds
-- a turn for (unowed_slots: a job released by the scripts of c70ab76 held one unmarked) releases a
-- parked job, so none waits for ever.
-- Rate: a removed job that waited for a start it reserved (rs), delayed until then or waiting
-- once it came, gives that start back when it is its key's latest reservation, so the key's next
-- job is not held an interval for nothing.
local waiting, delayed, jobs = KEYS[1], KEYS[2], KEYS[3]
local id = ARGV[1]
local key = jobs .. id
local f = redis.call('HMGET', key, 's', 'p', 'g', 'a', 'gc', 'rs', 'gr', 'gt')
local state = f[1]
if not state then return {-2, ''} end
if state == 'w' then
  local removed
  if f[2] then
    local list = waiting .. ':' .. f[2]
    removed = redis.call('LREM', list, 1, id)
    if redis.call('LLEN', list) == 0 then redis.call('ZREM', levels_of(waiting), f[2]) end
  else
    removed = redis.call('LREM', waiting, 1, id)
  end
  -- Not in its level's list: parked at its limit key's concurrency limit (a job of a level above 0
  -- parked by the scripts of c70ab76 sits in the key's level-0 list: else its id stayed parked,
  -- counted as waiting until a freed slot popped it).
  if removed == 0 and f[3] then
    local list = parked_list(waiting, f[3], f[2])
    removed = redis.call('LREM', list, 1, id)
    if removed == 1 and f[2] and redis.call('LLEN', list) == 0 then
      redis.call('ZREM', waiting .. ':pl:' .. f[3], f[2])  -- as pop_levels drops an emptied level
    end
    if removed == 0 and f[2] then removed = redis.call('LREM', parked_list(waiting, f[3]), 1, id) end
    if removed == 1 then
      redis.call('DECR', waiting .. ':pn')
      unregister_parked(waiting, f[3])
    end
  end
  -- Promoted once its reserved start came, it still holds that start until a worker claims it.
  if f[6] and f[7] then give_back_start(waiting, f[3], tonumber(f[6]), tonumber(f[7])) end
elseif state == 'd' then
  local start = redis.call('ZSCORE', delayed, id)
  redis.call('ZREM', delayed, id)
  if f[6] and f[7] and start then give_back_start(waiting, f[3], tonumber(start), tonumber(f[7])) end
elseif state == 'a' then
  redis.call('HSET', key, 'q', 1)
  return {2, state}
else
  return {0, state}
end
redis.call('DEL', key)
remember(KEYS[8], tonumber(ARGV[3]), id, now_ms())
if f[8] then redis.call('HDEL', turns_of(waiting, f[3]), id) end
if f[3] and f[5] then
  local free = tonumber(f[5]) - (tonumber(redis.call('HGET', waiting .. ':g', f[3])) or 0)
  local hand_on = math.min(free, 1)
  if not f[8] and free > 0 then hand_on = unowed_slots(waiting, jobs, f[3], free) end
  if hand_on > 0 and release_parked(waiting, jobs, f[3], hand_on) > 0 then wake(KEYS[7]) end
end
use_results(tonumber(ARGV[2]), KEYS[4], KEYS[5], KEYS[6])
if RESULTS.ttl > 0 then
  store_result(id, 'C', f[4] or '', cancelled_unstarted(f[4]), now_ms())  -- a retry: earlier attempts ran
end
return {1, state}
