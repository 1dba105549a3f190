-- extend: push the lease deadline of leased jobs to now + lease (heartbeat), and tell the holder
-- which jobs to stop: a cancel was requested (q), or the attempt ran past its time limit (h).
-- KEYS: 1 active, 2 jobs
-- ARGV: 1 lease ms, 2 n (<= 1000), then n pairs: id, token
-- Returns: {status per job: 1 ok (renewed), 2 cancel requested (renewed, so the holder has a lease
--          to settle it with), 3 time limit passed (not renewed: the lease runs out and recovery
--          settles the job as timed out should the holder not), 0 token does not hold the lease,
--          -2 no such job}
-- Errors: CONVEYOR_BOUND when n exceeds 1000. A refused extend changes nothing.
local active, jobs = KEYS[1], KEYS[2]
local lease_ms, n = tonumber(ARGV[1]), tonumber(ARGV[2])
bounded(n, 1000, 'extend')
local now = now_ms()
local out = {}
for i = 1, n do
  local id, token = ARGV[1 + 2 * i], ARGV[2 + 2 * i]
  local key = jobs .. id
  out[i] = check_lease(key, token)
  if out[i] == 1 then
    local f = redis.call('HMGET', key, 'q', 'h')
    if f[1] then
      out[i] = 2
    elseif f[2] and now >= tonumber(f[2]) then
      out[i] = 3
    end
    if out[i] ~= 3 then
      redis.call('ZADD', active, 'XX', now + lease_ms, id)
      redis.call('HSET', key, 'l', now + lease_ms)
    end
  end
end
return out
