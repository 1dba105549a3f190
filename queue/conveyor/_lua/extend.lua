-- extend: push the lease deadline of leased jobs to now + lease (heartbeat).
-- KEYS: 1 active, 2 jobs
-- ARGV: 1 lease ms, 2 n (<= 1000), then n pairs: id, token
-- Returns: {status per job (1 ok, 0 token does not hold the lease, -2 no such job)}
-- Errors: CONVEYOR_BOUND when n exceeds 1000. A refused extend changes nothing.
local active, jobs = KEYS[1], KEYS[2]
local lease_ms, n = tonumber(ARGV[1]), tonumber(ARGV[2])
bounded(n, 1000, 'extend')
local now = now_ms()
local out = {}
for i = 1, n do
  local id, token = ARGV[1 + 2 * i], ARGV[2 + 2 * i]
  out[i] = check_lease(jobs .. id, token)
  if out[i] == 1 then
    redis.call('ZADD', active, 'XX', now + lease_ms, id)
    redis.call('HSET', jobs .. id, 'l', now + lease_ms)
  end
end
return out
