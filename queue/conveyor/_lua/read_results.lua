-- read_results: what result waiters read (read only): the events stream's last id, then each
-- job's state and its result record, a record past its expiry hidden (trim.lua deletes expired
-- records in batches, so one may still be stored).
-- KEYS: 1 events, 2 jobs (prefix), 3 results (hash), 4 legacy_results (prefix)
--       (4: a string key per record, as 0.1 stored them; the server expires those itself)
-- ARGV: 1 n (1..1000), then n job ids
-- Returns: {last stream id ('0-0' when the stream is empty), then per id: state letter (nil: no
--          such job), record without its expiry (nil: none, or expired)}
-- Errors: CONVEYOR_BOUND when n exceeds 1000.
local events, jobs, records, legacy = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
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
    local digits = string.match(record, '^%d+') or '0'
    if tonumber(digits) > now then record = string.sub(record, #digits + 1) else record = false end
  else
    record = redis.call('GET', legacy .. id)
  end
  out[2 * i] = redis.call('HGET', jobs .. id, 's')
  out[2 * i + 1] = record
end
return out
