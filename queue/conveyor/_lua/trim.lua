-- trim: retention of completed, failed and cancelled jobs by count and by age, at most `batch`
-- removals per set (cancelled jobs are retained like failed ones); then up to `batch` expired
-- result records (whether results are on or not: records stored before they were turned off
-- expire too).
-- KEYS: 1 completed, 2 failed, 3 jobs, 4 dedup, 5 results (hash), 6 cancelled, 7 result_index
-- ARGV: 1 keep completed (-1 all), 2 completed max age ms (-1 none), 3 keep failed (-1 all),
--       4 failed max age ms (-1 none), 5 batch (1..100000), 6 deduplication window ms (<= 0 off),
--       7 results on (1: a removed job's result record goes with it, but where its set's keep is 0:
--       see trim_by_count; 0: off)
-- Returns: {completed removed, failed removed, cancelled removed} (expired dedup entries and
--          expired result records are dropped too, up to batch each)
-- Errors: CONVEYOR_BOUND if more than `batch` removals happened in one set (asserted).
local completed, failed, jobs, dedup, cancelled = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[6]
local batch = bounded(tonumber(ARGV[5]), 100000, 'trim batch')
local now = now_ms()
if ARGV[7] == '1' then use_results(1, nil, KEYS[5], KEYS[7]) end

local function trim(set, keep, max_age)
  local removed = 0
  if max_age >= 0 then removed = trim_by_age(set, jobs, now - max_age, batch) end
  if removed < batch then removed = removed + trim_by_count(set, jobs, keep, batch - removed) end
  return bounded(removed, batch, 'trim')
end

local window = tonumber(ARGV[6])
if window > 0 then
  local old = redis.call('ZRANGEBYSCORE', dedup, '-inf', '(' .. (now - window), 'LIMIT', 0, batch)
  call_chunked('ZREM', dedup, old)
end
sweep_results(KEYS[5], KEYS[7], now, batch)  -- (read_results.lua already hides expired records)
local keep_failed, failed_age = tonumber(ARGV[3]), tonumber(ARGV[4])
return {trim(completed, tonumber(ARGV[1]), tonumber(ARGV[2])), trim(failed, keep_failed, failed_age),
        trim(cancelled, keep_failed, failed_age)}
