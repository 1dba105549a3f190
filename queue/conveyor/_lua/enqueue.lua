-- enqueue: create jobs (one or a batch) in the waiting list or the delayed set.
-- KEYS: 1 meta, 2 waiting, 3 delayed, 4 marker, 5 jobs, 6 completed, 7 failed, 8 dedup, 9 cancelled,
--       10 results
--       (10, a hash, is sent only with a caller-given id: a new job with a finished job's id drops
--       that job's result record, whatever the caller's store_results, or a worker storing no
--       result would leave the old job's record as the new job's result)
-- ARGV: 1 deduplication window ms (-1: a finished job dedups while retained; >= 0: for that long
--       after it finished), then n groups of 5 (n = (#ARGV - 1) / 5 <= 1000): id ('' = generate),
--       task, payload, max attempts, options: '' for the common job (ready now, priority 0, no
--       time limit, no key limit), else '<delay ms>:<priority level 0..9>:<time limit ms of each
--       attempt, 0 = none>:<key limit>', the key limit being '' (none) or
--       '<concurrency>:<ms between starts>:<limit key>' ('' for a part unset). All checked by the
--       client. (Each ARGV costs the server about 1k instructions: the common job sends 5.)
-- Returns: when every job was created, one string: now, then per job its id and state, joined
--          by '{' (never part of an id); else {now, then per job: id, created (1/0), state, then
--          for each job that already existed: task, payload, attempts, max attempts, enqueued at,
--          finished at, priority level, time limit ms, last error ('' for each one it has not)}.
--          (A table reply costs the server about 1.2k instructions per element, a string ~0.)
-- Wake-up: the marker gets a member only when a ready list was empty before this call (or a
--          delayed or prioritised job was added). A non-empty list already has a wake-up pending:
--          every claim that leaves work behind re-adds it (claim_jobs), and a worker that pops it
--          but cannot use it passes it on (_waiter.py), so re-adding it per job only cost a command.
-- Errors: CONVEYOR_BOUND when n exceeds 1000. An existing id is not an error: the existing job is
--         returned and nothing is created (idempotent enqueue).
local meta, waiting, delayed, marker, jobs = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
bounded((#ARGV - 1) / 5, 1000, 'enqueue')
local now = now_ms()

-- The common call, one new job with a generated id and no options (a lone enqueue), skips the
-- general path below: building its closures and tables cost about a quarter of this script's
-- time (5 us of 20 on Valkey 9.1, INFO commandstats). Same effects and reply as the general path.
if #ARGV == 6 and ARGV[2] == '' and ARGV[6] == '' then
  local id = string.format('%d', redis.call('HINCRBY', meta, 'id', 1))
  redis.call('HSET', jobs .. id, 's', 'w', 'n', ARGV[3], 'd', ARGV[4], 'm', ARGV[5], 'e', now)
  if redis.call('LPUSH', waiting, id) == 1 then wake(marker) end
  return string.format('%d', now) .. '{' .. id .. '{w'
end

local generated = 0
for base = 2, #ARGV, 5 do
  if ARGV[base] == '' then generated = generated + 1 end
end
local next_id = 0
if generated > 0 then next_id = redis.call('HINCRBY', meta, 'id', generated) - generated end

-- Turning a number into a string costs about 2k instructions (printf): consecutive generated ids
-- reuse the string of their tens and only append the last digit.
local digits, tens, tens_text = nil, 0, ''
local function id_text(id)
  if generated == 1 then return string.format('%d', id) end
  digits = digits or {[0] = '0', '1', '2', '3', '4', '5', '6', '7', '8', '9'}
  local t = math.floor(id / 10)
  if t ~= tens then tens, tens_text = t, string.format('%d', t) end
  return tens_text .. digits[id - t * 10]
end

-- The existing job of a caller-given id (HMGET fields s n d a m e t p x r: its state, then what the
-- reply returns of it, EXISTING_FIELDS in _replies.py), or false. With a window
-- (>= 0), a finished job dedups only until window ms after it finished (then the new job replaces
-- it); a job whose record is gone still dedups while its id is in the dedup set.
local function existing_job(id, window)
  local old = redis.call('HMGET', jobs .. id, 's', 'n', 'd', 'a', 'm', 'e', 't', 'p', 'x', 'r')
  if window < 0 then return old[1] and old end
  local completed, failed, dedup, cancelled = KEYS[6], KEYS[7], KEYS[8], KEYS[9]
  if (old[1] == 'c' or old[1] == 'f' or old[1] == 'C') and now - (tonumber(old[7]) or 0) >= window then
    redis.call('ZREM', completed, id)
    redis.call('ZREM', failed, id)
    -- else the cancelled set's retention would later delete the new job's hash (lost unseen)
    redis.call('ZREM', cancelled, id)
    redis.call('ZREM', dedup, id)
    redis.call('DEL', jobs .. id)
    return false
  end
  if not old[1] and window > 0 then
    local finished = redis.call('ZSCORE', dedup, id)
    if finished and now - tonumber(finished) < window then return {'x', '', '', 0, 0, 0, '', '', '', ''} end
  end
  return old[1] and old
end

-- out: now, then per job its id and state; existed: the index of each job that already existed.
local out, ready, later, leveled, existed, existing = {string.format('%d', now)}, {}, {}, {}, nil, nil

-- A job with options: one HSET with its optional fields, then where it waits (level 0 ready jobs
-- share the waiting list's one LPUSH with the common jobs, in ARGV order).
local function create_with(key, id, task, payload, max, options)
  local delay, level, limit, keyed = string.match(options, '^(%d+):(%d):(%d+):(.*)$')
  if keyed ~= '' then limit_job(key, keyed) end
  delay = tonumber(delay)
  local fields = {'s', delay > 0 and 'd' or 'w', 'n', task, 'd', payload, 'm', max, 'e', now}
  if level ~= '0' then fields[#fields + 1] = 'p'; fields[#fields + 1] = level end
  if limit ~= '0' then fields[#fields + 1] = 'x'; fields[#fields + 1] = limit end
  redis.call('HSET', key, unpack(fields))
  if delay > 0 then
    later[#later + 1] = now + delay
    later[#later + 1] = id
  elseif level == '0' then
    ready[#ready + 1] = id
  else
    leveled[#leveled + 1] = level
    leveled[#leveled + 1] = id
  end
  out[#out + 1] = id; out[#out + 1] = fields[2]
end

local window -- read once, and only when a caller gave an id
local reused = {} -- caller-given ids of jobs created here: any result record of theirs is stale
for base = 2, #ARGV, 5 do
  local id, options = ARGV[base], ARGV[base + 4]
  local old = false
  if id == '' then
    -- Generated ids are digits only and callers may not use such ids: no existence check needed.
    next_id = next_id + 1
    id = id_text(next_id)
  else
    window = window or tonumber(ARGV[1])
    old = existing_job(id, window)
    if not old then reused[#reused + 1] = id end
  end
  if old then
    existed, existing = existed or {}, existing or {}
    existed[#out] = true
    out[#out + 1] = id; out[#out + 1] = old[1]
    for j = 2, 10 do existing[#existing + 1] = old[j] or '' end
  elseif options == '' then
    redis.call('HSET', jobs .. id, 's', 'w', 'n', ARGV[base + 1], 'd', ARGV[base + 2], 'm', ARGV[base + 3],
      'e', now)
    ready[#ready + 1] = id
    out[#out + 1] = id; out[#out + 1] = 'w'
  else
    create_with(jobs .. id, id, ARGV[base + 1], ARGV[base + 2], ARGV[base + 3], options)
  end
end
if #reused > 0 then redis.call('HDEL', KEYS[10], unpack(reused)) end
-- At most 1000 ids / 2000 values (bounded above): within Lua's unpack limit, no chunks needed.
local pushed = 0
if #ready > 0 then pushed = redis.call('LPUSH', waiting, unpack(ready)) end
for i = 1, #leveled, 2 do redis.call('LPUSH', ready_list(waiting, leveled[i]), leveled[i + 1]) end
if #later > 0 then redis.call('ZADD', delayed, unpack(later)) end
if pushed == #ready and #ready > 0 or #later > 0 or #leveled > 0 then wake(marker) end
if not existed then return table.concat(out, '{') end
local reply = {now}
for i = 2, #out, 2 do
  reply[#reply + 1] = out[i]; reply[#reply + 1] = existed[i - 1] and 0 or 1; reply[#reply + 1] = out[i + 1]
end
for i = 1, #existing do reply[#reply + 1] = existing[i] end
return reply
