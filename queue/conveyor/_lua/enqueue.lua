-- enqueue: create jobs (one or a batch) in the waiting list or the delayed set.
-- KEYS: 1 meta, 2 waiting, 3 delayed, 4 marker, 5 jobs, 6 completed, 7 failed, 8 dedup
-- ARGV: 1 n (<= 1000), 2 deduplication window ms (-1: a finished job dedups while retained;
--       >= 0: for that long after it finished), then n groups of 8: id ('' = generate), task,
--       payload, max attempts, delay ms (0 = ready now), priority level (0..9, checked by the client),
--       time limit ms of each attempt (0 = none)
--       key limit ('' = none, else '<concurrency>:<ms between starts>:<limit key>', '' for a part unset)
-- Returns: {now, then per job: id, created (1/0), state, then for each job that already existed:
--          task, payload, attempts, max attempts, enqueued at}
-- Errors: CONVEYOR_BOUND when n exceeds 1000. An existing id is not an error: the existing job is
--         returned and nothing is created (idempotent enqueue).
local meta, waiting, delayed, marker, jobs, completed, failed, dedup =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local n, window = tonumber(ARGV[1]), tonumber(ARGV[2])
bounded(n, 1000, 'enqueue')
local now = now_ms()

local generated = 0
for i = 0, n - 1 do
  if ARGV[3 + i * 8] == '' then generated = generated + 1 end
end
local next_id = 0
if generated > 0 then next_id = redis.call('HINCRBY', meta, 'id', generated) - generated end

-- With a window: a finished job dedups only until window ms after it finished (then the new job
-- replaces it); a job whose record is gone still dedups while its id is in the dedup set.
local function within_window(old, id, now)
  if (old[1] == 'c' or old[1] == 'f' or old[1] == 'C') and now - (tonumber(old[7]) or 0) >= window then
    redis.call('ZREM', completed, id)
    redis.call('ZREM', failed, id)
    redis.call('ZREM', dedup, id)
    redis.call('DEL', jobs .. id)
    return {false}
  end
  if not old[1] and window > 0 then
    local finished = redis.call('ZSCORE', dedup, id)
    if finished and now - tonumber(finished) < window then return {'x', '', '', 0, 0, 0} end
  end
  return old
end

local out, existing, ready, later, leveled = {now}, {}, {}, {}, {}
for i = 0, n - 1 do
  local base = 3 + i * 8
  local id, task, payload, max, delay = ARGV[base], ARGV[base + 1], ARGV[base + 2], ARGV[base + 3], tonumber(ARGV[base + 4])
  local level, limit, keyed = ARGV[base + 5], ARGV[base + 6], ARGV[base + 7]
  local old = {false}
  if id == '' then
    -- Generated ids are digits only and callers may not use such ids: no existence check needed.
    next_id = next_id + 1
    id = tostring(next_id)
  else
    old = redis.call('HMGET', jobs .. id, 's', 'n', 'd', 'a', 'm', 'e', 't')
    if window >= 0 then old = within_window(old, id, now) end
  end
  local key = jobs .. id
  if not old[1] and keyed ~= '' then limit_job(key, keyed) end
  if old[1] then
    out[#out + 1] = id; out[#out + 1] = 0; out[#out + 1] = old[1]
    for j = 2, 6 do existing[#existing + 1] = old[j] or '' end
  elseif delay > 0 then
    redis.call('HSET', key, 's', 'd', 'n', task, 'd', payload, 'm', max, 'e', now)
    if level ~= '0' then redis.call('HSET', key, 'p', level) end
    if limit ~= '0' then redis.call('HSET', key, 'x', limit) end
    later[#later + 1] = now + delay
    later[#later + 1] = id
    out[#out + 1] = id; out[#out + 1] = 1; out[#out + 1] = 'd'
  elseif level ~= '0' then
    redis.call('HSET', key, 's', 'w', 'n', task, 'd', payload, 'm', max, 'e', now, 'p', level)
    if limit ~= '0' then redis.call('HSET', key, 'x', limit) end
    leveled[#leveled + 1] = level
    leveled[#leveled + 1] = id
    out[#out + 1] = id; out[#out + 1] = 1; out[#out + 1] = 'w'
  else
    redis.call('HSET', key, 's', 'w', 'n', task, 'd', payload, 'm', max, 'e', now)
    if limit ~= '0' then redis.call('HSET', key, 'x', limit) end
    ready[#ready + 1] = id
    out[#out + 1] = id; out[#out + 1] = 1; out[#out + 1] = 'w'
  end
end
-- At most 1000 ids / 2000 values (bounded above): within Lua's unpack limit, no chunks needed.
if #ready > 0 then redis.call('LPUSH', waiting, unpack(ready)) end
for i = 1, #leveled, 2 do redis.call('LPUSH', ready_list(waiting, leveled[i]), leveled[i + 1]) end
if #later > 0 then redis.call('ZADD', delayed, unpack(later)) end
if #ready > 0 or #later > 0 or #leveled > 0 then wake(marker) end
for i = 1, #existing do out[#out + 1] = existing[i] end
return out
