-- read_results: what result waiters read (read only): the events stream's last id, then each
-- job's state and its result record, a record past its expiry hidden (trim.lua deletes expired
-- records in batches, so one may still be stored).
-- KEYS: 1 events, 2 jobs (prefix), 3 results (hash), 4 result_expiry, 5 legacy_results (prefix)
--       (5: a string key per record, as 0.1 stored them; the server expires those itself)
-- ARGV: 1 n (1..1000), then n job ids
-- Returns: {last stream id ('0-0' when the stream is empty), then per id: state letter (nil: no
--          such job), record (nil: none, or expired)}
-- Errors: CONVEYOR_BOUND when n exceeds 1000.
local events, jobs, records, expiry, legacy = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local n = bounded(tonumber(ARGV[1]), 1000, 'ids')
local ids = {}
for i = 1, n do ids[i] = ARGV[1 + i] end
local last = redis.call('XREVRANGE', events, '+', '-', 'COUNT', 1)
local out = {last[1] and last[1][1] or '0-0'}
local now = now_ms()
local stored = redis.call('HMGET', records, unpack(ids))
for i = 1, n do
  local id, record = ids[i], stored[i]
  if record then
    local expires = tonumber(redis.call('ZSCORE', expiry, id))
    if not expires or expires <= now then record = false end
  else
    record = redis.call('GET', legacy .. id)
  end
  out[2 * i] = redis.call('HGET', jobs .. id, 's')
  out[2 * i + 1] = record
end
return out
