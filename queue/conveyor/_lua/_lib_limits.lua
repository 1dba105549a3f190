-- _lib_limits.lua: per-key limits (concurrency, rate): counts, parked jobs, reserved starts
-- (part of the shared library: see _lib.lua; may use any definition of the files before it).
-- Used by the scripts that claim, settle, release, recover or cancel jobs of a limit key.

-- Per-key limits. A job may carry a limit key g with gc (at most gc jobs of the key active at
-- once) and/or gr (at least gr ms between two starts of the key: 1000 / rate). Derived keys, all
-- under the queue's hash tag: <waiting>:g hash key -> active jobs of the key, <waiting>:t hash
-- key -> earliest start of its next job (ms), <waiting>:p:<key> list of level-0 jobs parked
-- because the key was at its concurrency limit, <waiting>:p<L>:<key> those of level L > 0 (the
-- sorted set <waiting>:pl:<key> names these levels, as <waiting>:l names the ready ones),
-- <waiting>:pn how many jobs are parked (counted as waiting), <waiting>:pk hash of the limit keys
-- that may have parked jobs (key -> 1: set when a job is parked, dropped by the release or cancel
-- that takes the key's last parked job; jobs('waiting') finds parked jobs through it, see
-- waiting_page.lua), <waiting>:gh:<key> hash of the key's jobs holding a turn (gt, below;
-- id -> 1; cancel.lua reads it). A parked job is never polled: each freed slot (ack, fail,
-- release, lease recovery) moves one parked job of its key, the oldest of its highest level, back
-- to the claim end of its level. A rate-limited job reserves the next
-- start of its key and waits in the delayed set until then (with a concurrency too, holding a
-- turn, counted by the key's claims with its running jobs: reserving_of); a job starts only at or
-- after a start it reserved, and reservations of a key are gr ms apart (a parked job reserves
-- again).

-- How long past its reserved start a rate-limited job may still start on that reservation (ms).
local RESERVATION_GRACE_MS = 1000

-- The hash (id -> 1) of limit key g's jobs that hold a turn (gt): released from parked, not yet
-- started or parked again. An entry may be stale (a job started by a worker of c70ab76, whose
-- claim clears no turn): readers check the job (unowed_slots). A hash, not a set: the ACL rules of
-- earlier releases grant HSET, HDEL and HGETALL, and no set command.
local function turns_of(waiting, g)
  return waiting .. ':gh:' .. g
end

-- A popped job that starts or is held back gives up its rate reservation (rs) and its turn (gt).
local function clear_hold(waiting, key, id, f)
  if f[10] or f[11] then redis.call('HDEL', key, 'rs', 'gt') end
  if f[11] then redis.call('HDEL', turns_of(waiting, f[7]), id) end
end

-- The jobs of limit key g (with both limits) holding a turn and a start they reserved (rs):
-- delayed until it, or waiting once it came (id -> true), and how many. Each takes a slot at its
-- start, so a claim counts them with the running jobs: a job claimed meanwhile is parked (in
-- order) instead of reserving a later start, to be parked, once it came, behind the jobs parked
-- since. O(turns held).
local function reserving_of(waiting, jobs, g)
  local ids, n = {}, 0
  local holders = redis.call('HGETALL', turns_of(waiting, g))
  for i = 1, #holders, 2 do
    local h = redis.call('HMGET', jobs .. holders[i], 's', 'gt', 'rs')
    if h[2] and h[3] and (h[1] == 'w' or h[1] == 'd') then ids[holders[i]], n = true, n + 1 end
  end
  return ids, n
end

-- One claim call's view of its limit keys, batched: a key's running count, its jobs reserving a
-- start and its next start are read once per call, then counted here, and written once at its
-- end (flush_limits), however many of its jobs the call handles (a script is atomic: nobody sees
-- the counts in between).
local function limit_state(limits, waiting, jobs, f)
  local g, s = f[7], limits[f[7]]
  if not s then
    s = {started = 0, parked = {}, returned = {}, nparked = 0}
    limits[g] = s
  end
  if f[8] and not s.running then
    s.running = tonumber(redis.call('HGET', waiting .. ':g', g)) or 0
    s.reserving, s.nreserving = {}, 0
    if f[9] then s.reserving, s.nreserving = reserving_of(waiting, jobs, g) end
  end
  return s
end

-- Count job `id` among its key's jobs reserving a start (true) or no longer (false).
local function set_reserving(s, id, on)
  if not s.reserving or (s.reserving[id] or false) == on then return end
  s.reserving[id] = on or nil
  s.nreserving = s.nreserving + (on and 1 or -1)
end

-- Hold back a popped job that may not start now; true when it was held back (parked at the
-- concurrency limit, or delayed until the reserved start of a rate-limited key). f: the claim's
-- HMGET (7 limit key, 8 concurrency, 9 ms between starts, 10 reserved start (ms), 11 holds a turn:
-- gt, cleared when the job starts or is parked again; kept while it waits for its reserved start;
-- 12 priority level).
-- A job parked with a reserved start gives the reservation up: its time passes while it is
-- parked, and when a freed slot releases it, it reserves a start again like any job (had it kept
-- its reservation, it would start unchecked, recorded nowhere, and the key's next job could start
-- right after it).
local function held_back(limits, waiting, delayed, jobs, id, f, now)
  local key, s = jobs .. id, limit_state(limits, waiting, jobs, f)
  local ahead = (s.nreserving or 0) - (s.reserving and s.reserving[id] and 1 or 0)
  if f[8] and s.running + s.started + ahead >= tonumber(f[8]) then
    -- A job that held its key's turn (released from parked, then beaten to the slot: say by the
    -- recovered job put back in front of it) goes back to the old end of the parked, keeping its
    -- place; had it joined the young end, the jobs parked after it would start before it.
    local side, level = f[11] and s.returned or s.parked, f[12] or '0'
    side[level] = side[level] or {}
    table.insert(side[level], id)
    s.nparked = s.nparked + 1
    set_reserving(s, id, false)
    clear_hold(waiting, key, id, f)
    return true
  end
  -- A reservation counts until RESERVATION_GRACE_MS (or one interval, if longer) past it: a job
  -- claimed later (every worker was busy) takes a start again, as the jobs that reserved the
  -- key's next starts may be claimed as late, and all would start at once. A shorter grace would
  -- cost throughput: an idle worker sleeps at least 10 ms, and due jobs nobody was woken for wait
  -- for the maintenance tick. rs = 1 is a start reserved by the scripts of c70ab76 (a flag, its
  -- time unknown): kept, as they kept it; read as long past, it reserved again behind every start
  -- reserved since, and each job an old worker had delayed waited its turn twice.
  local reserved = f[10] and (f[10] == '1'
    or now < tonumber(f[10]) + math.max(tonumber(f[9] or 0), RESERVATION_GRACE_MS))
  if f[9] and not reserved then
    if not s.next_start then s.next_start = tonumber(redis.call('GET', waiting .. ':t:' .. f[7])) or 0 end
    local start = math.max(s.next_start, now)
    s.next_start = start + tonumber(f[9])
    if start > now then
      if f[8] and not f[11] then  -- with a concurrency, it holds a turn until then (reserving_of)
        redis.call('HSET', key, 's', 'd', 'rs', start, 'gt', 1)
        redis.call('HSET', turns_of(waiting, f[7]), id, 1)
      else
        redis.call('HSET', key, 's', 'd', 'rs', start)
      end
      set_reserving(s, id, true)
      redis.call('ZADD', delayed, start, id)
      return true
    end
  end
  s.started = s.started + 1
  set_reserving(s, id, false)
  clear_hold(waiting, key, id, f)
  return false
end

-- A job that reserved the start `start` of limit key g (interval ms between starts) will not
-- start (cancelled): if no later start of g was reserved, the key's next start goes back to
-- `start` (or to now, once it passed). A later reservation keeps it: the jobs behind it already
-- wait for their own reserved times. (Stored times are rounded to 14 digits: compare within 1 ms.)
local function give_back_start(waiting, g, start, interval)
  local next_key = waiting .. ':t:' .. g
  local reserved = tonumber(redis.call('GET', next_key))
  if not reserved or math.abs(reserved - (start + interval)) >= 1 then return end
  local now = now_ms()
  if start > now then
    redis.call('SET', next_key, start, 'PX', math.ceil(start - now))
  else
    redis.call('DEL', next_key)
  end
end

-- The list of the jobs of limit key g parked at priority `level` (a string or false).
local function parked_list(waiting, g, level)
  if not level or level == '0' then return waiting .. ':p:' .. g end
  return waiting .. ':p' .. level .. ':' .. g
end

-- Park `ids` (<= 1000: one claim) at `level` of limit key g: LPUSH at the young end, RPUSH at the
-- old end (the release end).
local function push_parked(waiting, g, level, command, ids)
  if level ~= '0' then redis.call('ZADD', waiting .. ':pl:' .. g, level, level) end
  redis.call(command, parked_list(waiting, g, level), unpack(ids))
  redis.call('HSET', waiting .. ':pk', g, 1)
end

-- Drop limit key g from <waiting>:pk once none of its jobs is parked: its level-0 list and its
-- set of levels are gone (pop_levels drops a level it emptied, and so does cancel.lua).
local function unregister_parked(waiting, g)
  if redis.call('EXISTS', waiting .. ':p:' .. g, waiting .. ':pl:' .. g) == 0 then
    redis.call('HDEL', waiting .. ':pk', g)
  end
end

-- Write what a claim counted in `limits`: slots taken, next starts reserved, jobs parked. A key's
-- next start expires when it passes (a past one means "now"): one key per limit key ever used
-- would otherwise stay forever. Its PX is rounded up to whole ms: a rate's interval need not be
-- whole (3/s: 333.33 ms), and the server refuses a fractional PX, failing the claim midway.
local function flush_limits(limits, waiting, now)
  for g, s in pairs(limits) do
    if s.started > 0 then redis.call('HINCRBY', waiting .. ':g', g, s.started) end
    if s.next_start and s.next_start > now then
      redis.call('SET', waiting .. ':t:' .. g, s.next_start, 'PX', math.ceil(s.next_start - now))
    end
    for level, ids in pairs(s.parked) do push_parked(waiting, g, level, 'LPUSH', ids) end
    for level, ids in pairs(s.returned) do
      local back = {}  -- RPUSH the last popped first: the first popped ends at the release end
      for i = #ids, 1, -1 do back[#back + 1] = ids[i] end
      push_parked(waiting, g, level, 'RPUSH', back)
    end
    if s.nparked > 0 then redis.call('INCRBY', waiting .. ':pn', s.nparked) end
  end
end

-- Up to n parked jobs of limit key g, highest level first and oldest first within a level (as
-- claims take ready jobs), to the claim end of their levels, its running count unchanged (cancel
-- hands on the turn of a released job it removed). Each is marked as holding a turn (gt): cancel
-- hands on only such a turn, as a second turn handed on for a job that held none let a younger
-- parked job start before the older one released first. Walks backwards, as release.lua does:
-- RPUSH puts each at the claim end, so the oldest, pushed last, is claimed first.
-- Returns how many moved.
local function release_parked(waiting, jobs, g, n)
  local live, levels, popped = {}, {}, false
  while #live < n do  -- each round pops at least one id, each id once: bounded by the parked
    local ids = pop_levels(waiting .. ':pl:' .. g, waiting .. ':p', ':' .. g, waiting .. ':p:' .. g,
      n - #live)
    if #ids == 0 then break end
    popped = true
    redis.call('DECRBY', waiting .. ':pn', #ids)
    for i = 1, #ids do
      -- An id whose job is gone is dropped, and another released in its place (a job parked at a
      -- level above 0 before levels had lists of their own sits in the level-0 list, where
      -- cancel.lua does not look: it deletes the job and leaves the id).
      local f = redis.call('HMGET', jobs .. ids[i], 'n', 'p')
      if f[1] then
        local at = #live + 1
        live[at], levels[at] = ids[i], f[2]
      end
    end
  end
  -- Only a release that took parked jobs can have taken the last: a settle of a key with none
  -- parked (the common case) sends no command for it.
  if popped then unregister_parked(waiting, g) end
  local turns = turns_of(waiting, g)
  for i = #live, 1, -1 do
    redis.call('HSET', jobs .. live[i], 'gt', 1)
    redis.call('HSET', turns, live[i], 1)
    redis.call('RPUSH', ready_list(waiting, levels[i]), live[i])
  end
  return #live
end

-- Of `free` (> 0) free slots of limit key g, how many no job holds a turn for. Each job of the
-- key's turn hash still waiting (or delayed) with gt owes one; the other entries are dropped. Scripts of
-- c70ab76 released parked jobs without a turn: once such a job is cancelled, a slot is free that
-- no job will take while jobs of the key stay parked. O(turns held).
local function unowed_slots(waiting, jobs, g, free)
  local turns = turns_of(waiting, g)
  local holders = redis.call('HGETALL', turns)
  for i = 1, #holders, 2 do
    local h = redis.call('HMGET', jobs .. holders[i], 's', 'gt')
    if h[2] and (h[1] == 'w' or h[1] == 'd') then
      free = free - 1
    else
      redis.call('HDEL', turns, holders[i])
    end
  end
  return math.max(free, 0)
end

-- n jobs of limit key g left the active set: free their slots and release up to n parked jobs of
-- the key (highest level first, then oldest), to the claim end of their levels (as n single frees
-- would). Returns how many were released (the caller wakes a worker when any was).
local function free_slots(waiting, jobs, g, n)
  local running = waiting .. ':g'
  if redis.call('HINCRBY', running, g, -n) <= 0 then redis.call('HDEL', running, g) end
  return release_parked(waiting, jobs, g, n)
end

local function free_slot(waiting, jobs, g)
  return free_slots(waiting, jobs, g, 1) > 0
end

-- Free the slots counted in `freed` (limit key -> how many of its jobs left the active set), a
-- call freeing several jobs at once: each key's parked jobs are released together, oldest first,
-- before the caller puts its own jobs back (in front of them). True when any was released.
local function free_counted(waiting, jobs, freed)
  local released = 0
  for g, k in pairs(freed) do released = released + free_slots(waiting, jobs, g, k) end
  return released > 0
end

-- Slots held by stopped handlers that run on. A thread cannot be interrupted: a handler stopped
-- by its time limit or a cancel is settled at once, yet runs until it returns. Its job's slot
-- stays taken meanwhile, held in the sorted set of held slots (KEYS, _keys.py: held_slots):
-- member '<token>{<limit key>' (tokens are digits and no name holds a '{'), score the hold's
-- deadline (ms). Its worker renews the hold while the handler runs and ends it when the handler
-- returns (hold.lua); recover.lua frees a hold past its deadline (its worker died or stalled), as
-- it frees an expired lease's slot. Taken by fail.lua, for a job of a key with a concurrency.
local function hold_slot(held, token, g, until_ms)
  local member = token .. '{' .. g
  redis.call('ZADD', held, until_ms, member)
  return member
end

-- The limit key of a held slot's member.
local function held_key_of(member)
  return string.match(member, '^[^{]*{(.*)$')
end

-- Store a new job's limit ('<concurrency>:<ms between starts>:<limit key>', '' for a part unset);
-- written before its state, so a claim sees both.
local function limit_job(key, keyed)
  local gc, gr, g = string.match(keyed, '^([^:]*):([^:]*):(.*)$')
  redis.call('HSET', key, 'g', g)
  if gc ~= '' then redis.call('HSET', key, 'gc', gc) end
  if gr ~= '' then redis.call('HSET', key, 'gr', gr) end
end
