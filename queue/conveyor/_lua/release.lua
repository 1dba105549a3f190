-- release: give leased jobs back to the front of their priority level's list (graceful shutdown,
-- over-claim).
-- KEYS: 1 active, 2 waiting, 3 marker, 4 jobs
-- ARGV: 1 n (<= 1000), then n triples: id, token, refund (1 = the job never started: the attempt
--       it was charged is given back; 0 = it started, the attempt counts)
-- Returns: {status per job (1 ok, 0 token does not hold the lease, -2 no such job)}
-- Errors: CONVEYOR_BOUND when n exceeds 1000. A refused release changes nothing.
local active, waiting, marker, jobs = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local n = bounded(tonumber(ARGV[1]), 1000, 'release')
local out = {}
local released = 0
-- Walk backwards: RPUSH puts each id at the claim end, so the first given is claimed first.
for i = n, 1, -1 do
  local id, token, refund = ARGV[3 * i - 1], ARGV[3 * i], ARGV[3 * i + 1]
  local key = jobs .. id
  local limited
  out[i], limited = check_lease(key, token)
  if out[i] == 1 then
    if limited then free_slot(waiting, jobs, limited) end
    redis.call('ZREM', active, id)
    redis.call('HDEL', key, 'k', 'l', 'h')
    redis.call('HSET', key, 's', 'w')
    if refund == '1' then redis.call('HINCRBY', key, 'a', -1) end
    requeue('RPUSH', waiting, jobs, id)
    released = released + 1
  end
end
if released > 0 then wake(marker) end
return out
