-- cancel: remove a waiting or delayed job. Active and finished jobs cannot be cancelled.
-- KEYS: 1 waiting, 2 delayed, 3 jobs
-- ARGV: 1 id
-- Returns: {status (1 cancelled, 0 not cancellable in its state, -2 no such job), state}
-- Errors: none. Cancelling a waiting job is O(length of the waiting list) (LREM).
local waiting, delayed, jobs = KEYS[1], KEYS[2], KEYS[3]
local id = ARGV[1]
local key = jobs .. id
local state = redis.call('HGET', key, 's')
if not state then return {-2, ''} end
if state == 'w' then
  redis.call('LREM', waiting, 1, id)
elseif state == 'd' then
  redis.call('ZREM', delayed, id)
else
  return {0, state}
end
redis.call('DEL', key)
return {1, state}
