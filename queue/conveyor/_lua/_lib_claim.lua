-- _lib_claim.lua: claiming jobs, and the outcomes a claim or settle writes (cancelled, timed out)
-- (part of the shared library: see _lib.lua; may use any definition of the files before it).
-- Used by claim.lua and ack.lua (which claims the next jobs), and the settling scripts.

local function has_ready(waiting)
  return redis.call('LLEN', waiting) > 0 or redis.call('ZCARD', levels_of(waiting)) > 0
end

-- What a job cancelled before an attempt of it started says (`attempts`: those that ran).
local function cancelled_unstarted(attempts)
  if (tonumber(attempts) or 0) > 0 then return 'cancelled while waiting for its next attempt' end
  return 'cancelled before it ran'
end

-- A job whose cancel was requested while it was held ends here instead of being retried or
-- failed. `unstarted`: its attempt never started (claimed, then given back or stopped before a
-- handler took it), so its result says so instead of 'cancelled while running'. `why`: the
-- result's text when neither is known (lease recovery cannot tell whether a dead worker had
-- started the job).
local function finish_cancelled(cancelled, key, id, now, unstarted, why)
  redis.call('HDEL', key, 'k', 'l', 'h', 'q')
  redis.call('HSET', key, 's', 'C', 't', now)
  redis.call('ZADD', cancelled, now, id)
  if RESULTS.ttl > 0 then
    local attempts = redis.call('HGET', key, 'a') or ''
    why = why or (unstarted and cancelled_unstarted(attempts)) or 'cancelled while running'
    store_result(id, 'C', attempts, why, now)
  end
end

-- The error text of an attempt that ran past its time limit (x, in ms).
local function timed_out(limit_ms)
  return 'timed out: the attempt exceeded its time limit of ' .. (tonumber(limit_ms) / 1000) .. ' s'
end

-- A claimed job in a reply: two values appended to `out` (CLAIM_FIELDS in _replies.py), a header
-- 'id{token{attempts{max attempts{enqueued at (ms){time limit (ms, 0 = none){task' and the
-- payload. One string instead of seven elements: each reply element costs the server about 1.2k
-- instructions and a concatenation far less (claim and ack replies carry up to 1,000 jobs). Ids,
-- tokens, task names and numbers never hold '{' (names refuse hash-tag characters), and the task
-- goes last all the same; the payload stays apart (any bytes).
local function claimed_entry(out, id, token, task, payload, attempts, max, enqueued, limit)
  local o = #out
  out[o + 1] = id .. '{' .. token .. '{' .. (attempts or '0') .. '{' .. (max or '1')
    .. '{' .. (enqueued or '0') .. '{' .. (limit or '0') .. '{' .. task
  out[o + 2] = payload
end

-- Claim up to `count` waiting jobs with fresh tokens, appending each to `out` (claimed_entry), and
-- its id and token to `claimed` when given (the ack's request record). A job with a time limit
-- gets its hard deadline h = now + limit. Returns the number claimed, and whether jobs are still
-- ready (a claim that popped only held-back jobs claimed none, yet work may wait behind them).
local function claim_jobs(out, claimed, meta, waiting, delayed, active, marker, jobs, now, count, lease_ms)
  if count <= 0 then return 0, false end
  local ids = pop_ready(waiting, count)
  if #ids == 0 then return 0, false end
  local last_token = redis.call('HINCRBY', meta, 'tok', #ids)
  local first_token = last_token - #ids
  local deadline = now + lease_ms
  local zargs, limits = {}, {}
  for i = 1, #ids do
    local id = ids[i]
    local key = jobs .. id
    -- A limit key's three settings are read only for a job that has one (most have none).
    local f = redis.call('HMGET', key, 'n', 'd', 'a', 'm', 'e', 'x', 'g')
    if f[7] then
      f[8], f[9], f[10], f[11], f[12] = unpack(redis.call('HMGET', key, 'gc', 'gr', 'rs', 'gt', 'p'))
    end
    if f[1] and not (f[7] and held_back(limits, waiting, delayed, jobs, id, f, now)) then
      local attempts = (tonumber(f[3]) or 0) + 1
      local token = tostring(first_token + i)
      if f[6] then
        redis.call('HSET', key, 's', 'a', 'a', attempts, 'k', token, 'l', deadline, 'h', now + tonumber(f[6]))
      else
        redis.call('HSET', key, 's', 'a', 'a', attempts, 'k', token, 'l', deadline)
      end
      zargs[#zargs + 1] = deadline
      zargs[#zargs + 1] = id
      claimed_entry(out, id, token, f[1], f[2], attempts, f[4], f[5], f[6])
      if claimed then
        claimed[#claimed + 1] = id
        claimed[#claimed + 1] = token
      end
    end
  end
  flush_limits(limits, waiting, now)
  if #zargs > 0 then redis.call('ZADD', active, unpack(zargs)) end  -- count <= 1000: fits
  -- Chain the wake-up: while work remains, the next idle worker must wake too. A claim that
  -- filled its count carries no due time in its reply, and no other worker was told: an idle one
  -- would start a delayed job due soon only at its block timeout or a maintenance promotion.
  local ready, got = has_ready(waiting), #zargs / 2
  if ready or got == count and due_soon(delayed, now) then wake(marker) end
  return got, ready
end

-- Ids an operation on finished jobs acts on. ARGV: 1 n (<= 1000), 2 batch (1..1000), then n ids;
-- n = 0 chooses the oldest `batch` members of `set` instead.
local function chosen_ids(set, argv)
  local n = bounded(tonumber(argv[1]), 1000, 'ids')
  local batch = bounded(tonumber(argv[2]), 1000, 'batch')
  if n == 0 then return redis.call('ZRANGE', set, 0, batch - 1) end
  local ids = {}
  for i = 1, n do ids[i] = argv[2 + i] end
  return ids
end
