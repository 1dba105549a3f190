-- fire: advance a schedule's next fire time by compare-and-set and, for a due fire, enqueue its job.
-- Any number of schedulers may call this for the same fire time: only the one whose expected value
-- still matches advances the schedule, and the job id is derived from the name and fire time, so
-- each fire time enqueues at most one job.
-- A schedule redefined under the same name may move its stored time earlier (the client decides,
-- _schedule.py): the mark stored with it (field '<name>{', '<fingerprint>:<next>:<floor>') names
-- the definition that wrote it and is compared too. Earlier versions' scripts write the plain
-- time alone, which clients then read without a valid mark.
-- KEYS: 1 schedules, 2 waiting, 3 marker, 4 jobs, 5 delayed (schedules: hash of schedule name ->
--       next fire ms, and '<name>{' -> its mark)
-- ARGV: 1 schedule name, 2 expected next fire time ('' = not stored yet), 3 new next fire time (ms),
--       4 job id ('' = advance without a job), 5 task, 6 payload, 7 max attempts,
--       8 time limit ms of each attempt (0 = none), 9 priority level (0..9, checked by the client),
--       10 key limit ('' = none; as in enqueue.lua), 11 expected mark ('' = none stored),
--       12 new mark ('' = delete it), 13 delay ms of the job (its task's default delay; 0 = ready now)
-- Returns: 1 advanced and the job created, 2 advanced without a job (first sighting, skipped fire,
--          moved earlier, or the job id exists already), 0 the expected time or mark did not match:
--          nothing changed.
-- Errors: none of its own.
local schedules, waiting, marker, jobs, delayed = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local name, expected, new_next, id = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local current = redis.call('HMGET', schedules, name, name .. '{')
if (current[1] or '') ~= expected or (current[2] or '') ~= ARGV[11] then return 0 end
if ARGV[12] == '' then
  redis.call('HSET', schedules, name, new_next)
  redis.call('HDEL', schedules, name .. '{')
else
  redis.call('HSET', schedules, name, new_next, name .. '{', ARGV[12])
end
if id == '' then return 2 end

local key, level = jobs .. id, ARGV[9]
if redis.call('EXISTS', key) == 1 then return 2 end
if ARGV[10] ~= '' then limit_job(key, ARGV[10]) end
local now, delay = now_ms(), tonumber(ARGV[13])
redis.call('HSET', key, 's', delay > 0 and 'd' or 'w', 'n', ARGV[5], 'd', ARGV[6], 'm', ARGV[7], 'e', now)
if ARGV[8] ~= '0' then redis.call('HSET', key, 'x', ARGV[8]) end
if level ~= '0' then redis.call('HSET', key, 'p', level) end
if delay > 0 then
  redis.call('ZADD', delayed, now + delay, id)
else
  redis.call('LPUSH', ready_list(waiting, level), id)
end
wake(marker)
return 1
