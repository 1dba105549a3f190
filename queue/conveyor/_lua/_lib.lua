-- _lib.lua: helpers prepended to every Conveyor script (not a transition on its own); with
-- _lib_results.lua, _lib_limits.lua and _lib_claim.lua, read in that order (_scripts.py), it is
-- the shared library: each script carries only the definitions it uses. This file: time, bounds,
-- leases, wake-ups, priority levels and due delayed jobs.
--
-- Time comes from the server (TIME), never from the client: leases, delays and retention are then
-- immune to clock skew between worker machines. Redis 7+, Valkey and Dragonfly replicate script
-- effects, so reading TIME inside a script is safe.
--
-- Job hash fields: s state (w waiting, d delayed, a active, c completed, f failed, C cancelled),
-- n task name, d payload, m max attempts, e enqueued at (ms), a attempts, k lease token and l lease
-- deadline (ms) (both only while active), r last error, t finished (ms), p priority level (1..9;
-- absent = 0), x time limit of an attempt (ms; absent: none), h hard deadline of the running
-- attempt (ms; claim time + x), q cancel requested (set by cancel.lua on an active job; the holder
-- learns at its next heartbeat), g limit key, gc its concurrency limit, gr its rate interval (ms
-- between starts), rs the start (ms) of a rate slot reserved for this job, gt set while a job
-- released from parked holds its key's turn (not yet started or parked again; see the per-key
-- limits below), o the last fail ('<token>{<outcome>{<time>', so a re-sent fail is answered, not
-- refused: fail.lua).
-- Job keys are <jobs prefix><id>; the prefix is a declared KEY sharing the queue's hash tag.
--
-- Priorities: level 0 (the default) is the waiting list itself, so a queue that never uses
-- priorities runs exactly as before. Level L > 0 is the list <waiting>:<L>, and <waiting>:l is a
-- sorted set of the levels that may hold jobs (member = score = L). Both are derived from the
-- declared waiting key (same hash tag), as job keys are from the jobs prefix (_keys.py documents
-- them). Claims serve the highest non-empty level first, FIFO within a level.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function bounded(n, limit, what)
  if n > limit then
    error('CONVEYOR_BOUND ' .. what .. ' processed ' .. n .. ' > batch ' .. limit)
  end
  return n
end

-- Lease check for ack/fail/extend/release: 1 ok, 0 token does not hold the lease, -2 no such job;
-- second value: the job's limit key (false when it has none), whose slot a settled job frees.
-- A matching token is accepted even past the lease deadline: recovery clears the token (k) when it
-- redelivers, so a token that still matches proves nobody else holds the job (a late ack after a
-- GC pause or a blocked event loop then settles the job instead of causing a second run).
-- (-1, "lease expired", is no longer returned; callers still name it for older servers' scripts.)
local function check_lease(key, token)
  local held = redis.call('HMGET', key, 'k', 'g')
  if held[1] == token then return 1, held[2] end
  if not held[1] and redis.call('EXISTS', key) == 0 then return -2, false end
  return 0, false
end

-- Lua's unpack fails past a few thousand values: every variadic write goes in chunks of CHUNK
-- (even, so ZADD score/member pairs never split).
local CHUNK = 1000

local function call_chunked(command, key, items)
  for i = 1, #items, CHUNK do
    redis.call(command, key, unpack(items, i, math.min(i + CHUNK - 1, #items)))
  end
end

-- Split a record on '{' (never part of an id: hash-tag characters are refused in names).
local function split_braces(text)
  local parts, start = {}, 1
  while true do
    local at = string.find(text, '{', start, true)
    if not at then
      parts[#parts + 1] = string.sub(text, start)
      return parts
    end
    parts[#parts + 1] = string.sub(text, start, at - 1)
    start = at + 1
  end
end

local function wake(marker)
  redis.call('ZADD', marker, 0, '0')
end

local function levels_of(waiting)
  return waiting .. ':l'
end

-- The ready list of priority `level` (a string or false): registers a level above 0 as non-empty
-- before anything is pushed (a push that fails leaves a stale level, which claims drop).
local function ready_list(waiting, level)
  if not level or level == '0' then return waiting end
  redis.call('ZADD', levels_of(waiting), level, level)
  return waiting .. ':' .. level
end

-- Put one job back into its level's list: RPUSH = claim end (first out), LPUSH = back.
local function requeue(command, waiting, jobs, id)
  redis.call(command, ready_list(waiting, redis.call('HGET', jobs .. id, 'p')), id)
end

-- Move up to `limit` due delayed jobs to the back of their levels' lists (due order kept).
local function promote_due(delayed, waiting, jobs, now, limit)
  if limit <= 0 then return 0 end
  local ids = redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, limit)
  local n = bounded(#ids, limit, 'promote')
  if n == 0 then return 0 end
  -- Add before removing: should a write fail midway, a job is in both places (it may run twice),
  -- never in neither (lost).
  local plain, leveled = {}, {}
  for i = 1, n do
    local key = jobs .. ids[i]
    redis.call('HSET', key, 's', 'w')
    local level = redis.call('HGET', key, 'p')
    if level then
      leveled[level] = leveled[level] or {}
      table.insert(leveled[level], ids[i])
    else
      plain[#plain + 1] = ids[i]
    end
  end
  call_chunked('LPUSH', waiting, plain)
  for level, list in pairs(leveled) do call_chunked('LPUSH', ready_list(waiting, level), list) end
  call_chunked('ZREM', delayed, ids)
  return n
end

local function next_due(delayed)
  local first = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
  if first[2] then return tonumber(first[2]) end
  return -1
end

-- Whether a delayed job is due within DUE_WAKE_MS: an idle worker claims at least once per block
-- timeout (default 2 s) and learns of a later one from that claim's reply.
local DUE_WAKE_MS = 2000
local function due_soon(delayed, now)
  local due = next_due(delayed)
  return due >= 0 and due <= now + DUE_WAKE_MS
end

-- Pop up to `count` ids from lists split by priority level, highest level first: level L > 0
-- is the list prefix .. L .. suffix, named in the sorted set `levels`, level 0 is `base`. Without
-- priorities this costs one ZREVRANGE of a missing key. A level found empty is dropped from
-- `levels`, so the set names exactly the non-empty levels after every pop.
local function pop_levels(levels, prefix, suffix, base, count)
  local ids = {}
  local found = redis.call('ZREVRANGE', levels, 0, -1)
  for i = 1, #found do
    local list = prefix .. found[i] .. suffix
    local got = redis.call('RPOP', list, count - #ids)
    if got then
      for j = 1, #got do ids[#ids + 1] = got[j] end
    end
    if #ids < count or redis.call('LLEN', list) == 0 then redis.call('ZREM', levels, found[i]) end
    if #ids >= count then return ids end
  end
  local got = redis.call('RPOP', base, count - #ids)
  if not got then return ids end
  if #ids == 0 then return got end
  for j = 1, #got do ids[#ids + 1] = got[j] end
  return ids
end

-- Pop up to `count` ready ids, highest priority level first, then the waiting list (level 0).
local function pop_ready(waiting, count)
  return pop_levels(levels_of(waiting), waiting .. ':', '', waiting, count)
end
