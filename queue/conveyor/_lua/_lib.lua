-- _lib.lua: helpers prepended to every Conveyor script (not a transition on its own).
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

-- Results (QueueSettings.store_results): a script that finishes jobs sets RESULTS (use_results)
-- from its KEYS and ARGV; ttl 0 (the default) means off, and then nothing below writes anything.
-- A finished job's record is its expiry time (finish + ttl, ms, digits), its state letter, its
-- attempts ('' after success), ':', then the serialised return value or the error text. Records
-- live in ONE hash per queue (job id -> record), and a call that stores records appends ONE
-- entry to the queue's result index (a list, oldest first): '<expiry>{<id>{<id>...'. A call
-- that finishes n jobs then writes all their records with one HSET and one RPUSH, where a
-- string key per result cost one command (the fixed cost of a command called from Lua) per job,
-- and a sorted set of expiry times one skiplist insert per job. A record is readable only while
-- its expiry is in the future (read_results.lua checks at read time); trim.lua walks the index
-- from its head, deleting expired records in bounded batches (sweep_results); retention
-- deletes a record with its job. Each call that finishes jobs adds one entry to the events
-- stream, capped at about EVENTS_MAXLEN entries: clients block on it instead of polling. Its one
-- field is '{' .. state letter, its value the ids joined by '{' (no job id holds a '{', so the
-- field cannot be an id: readers also accept entries whose fields are ids, as written before),
-- so an ack batch costs XADD a fixed number of arguments, not two per job.
local RESULTS = {ttl = 0}
local EVENTS_MAXLEN = 1000

local function use_results(ttl, events, records, index)
  if ttl > 0 then RESULTS = {ttl = ttl, events = events, records = records, index = index} end
end

-- Store records and announce them: `records` holds id, record pairs (records already start with
-- `expires`, state `state`), `joined` their ids joined by '{' (<= 1000 jobs: one ack batch). The
-- index entry goes first: a failure in between leaves an entry naming missing records (swept as
-- usual), never a record that no entry names (never swept).
local function keep_results(expires, state, joined, records)
  redis.call('RPUSH', RESULTS.index, expires .. '{' .. joined)
  redis.call('HSET', RESULTS.records, unpack(records))
  redis.call('XADD', RESULTS.events, 'MAXLEN', '~', EVENTS_MAXLEN, '*', '{' .. state, joined)
end

local function store_result(id, state, attempts, body, now)
  local expires = tostring(now + RESULTS.ttl)
  keep_results(expires, state, id, {id, expires .. state .. attempts .. ':' .. body})
end

-- The expiry (ms) a record starts with (0 if none: such a record counts as expired).
local function expiry_of(record)
  return tonumber(string.match(record, '^%d+') or '0')
end

-- Delete the records of `ids` (their index entries stay until swept: deleting a missing field is
-- a no-op).
local function drop_results_of(ids)
  if RESULTS.records then call_chunked('HDEL', RESULTS.records, ids) end
end

-- Delete expired records, walking the index from its head while its entries have expired, until
-- at least `limit` ids were looked at (an entry names at most 1000). A record is deleted only if
-- it has expired itself: a job that finished again later (retried, or its id reused) has a newer
-- record, named again by a later entry. Entries are appended in finish order, so with one
-- result_ttl they are in expiry order; clients with different TTLs delay (never advance) the
-- deletion of the shorter ones, whose records read_results.lua already hides.
local function sweep_results(records, index, now, limit)
  local looked = 0
  while looked < limit do
    local head = redis.call('LINDEX', index, 0)
    if not head then break end
    local parts = split_braces(head)
    if tonumber(parts[1]) > now then break end
    table.remove(parts, 1)
    local stored = redis.call('HMGET', records, unpack(parts))  -- <= 1000 ids per entry
    local old = {}
    for i = 1, #parts do
      if stored[i] and expiry_of(stored[i]) <= now then old[#old + 1] = parts[i] end
    end
    call_chunked('HDEL', records, old)
    redis.call('LPOP', index)  -- after the records: a failure in between sweeps the entry again
    looked = looked + #parts
  end
  return looked
end

-- Keep at most `keep` members of a finished set (-1 keeps all), removing at most `limit` per call.
-- keep = 0 keeps no job but leaves its result record to expire (result_ttl), as an ack with
-- keep_completed = 0 does: a failed or cancelled job is trimmed by the very call that stored its
-- record, and dropping it there left its waiters told it had no result, the failure seen nowhere.
local function trim_by_count(set, jobs, keep, limit)
  if keep < 0 or limit <= 0 then return 0 end
  local excess = redis.call('ZCARD', set) - keep
  if excess <= 0 then return 0 end
  if excess > limit then excess = limit end
  local ids = redis.call('ZRANGE', set, 0, excess - 1)
  -- Index first, then hashes: a failure in between leaves unindexed hashes, never ids without one.
  redis.call('ZREMRANGEBYRANK', set, 0, #ids - 1)
  for i = 1, #ids do redis.call('DEL', jobs .. ids[i]) end
  if keep > 0 then drop_results_of(ids) end
  return #ids
end

local function trim_by_age(set, jobs, cutoff, limit)
  local ids = redis.call('ZRANGEBYSCORE', set, '-inf', '(' .. cutoff, 'LIMIT', 0, limit)
  bounded(#ids, limit, 'trim')
  if #ids == 0 then return 0 end
  call_chunked('ZREM', set, ids)
  for i = 1, #ids do redis.call('DEL', jobs .. ids[i]) end
  drop_results_of(ids)
  return #ids
end

-- Deduplication window: a caller-given id (generated ids are all digits) is remembered for
-- `window` ms after its job finished, in the dedup set (id -> finish time). window <= 0: off.
local function remember(dedup, window, id, now)
  if window > 0 and not string.find(id, '^%d+$') then redis.call('ZADD', dedup, now, id) end
end

local function finish_failed(failed, meta, key, id, err, now)
  redis.call('HDEL', key, 'k', 'l', 'h')
  redis.call('HSET', key, 's', 'f', 'r', err, 't', now)
  redis.call('ZADD', failed, now, id)
  redis.call('HINCRBY', meta, 'failed', 1)
  if RESULTS.ttl > 0 then
    store_result(id, 'f', redis.call('HGET', key, 'a') or '', err, now)
  end
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

-- Per-key limits. A job may carry a limit key g with gc (at most gc jobs of the key active at
-- once) and/or gr (at least gr ms between two starts of the key: 1000 / rate). Derived keys, all
-- under the queue's hash tag: <waiting>:g hash key -> active jobs of the key, <waiting>:t hash
-- key -> earliest start of its next job (ms), <waiting>:p:<key> list of level-0 jobs parked
-- because the key was at its concurrency limit, <waiting>:p<L>:<key> those of level L > 0 (the
-- sorted set <waiting>:pl:<key> names these levels, as <waiting>:l names the ready ones),
-- <waiting>:pn how many jobs are parked (counted as waiting), <waiting>:gh:<key> hash of the key's
-- jobs holding a turn (gt, below; id -> 1; cancel.lua reads it). A parked job is never polled: each
-- freed slot (ack, fail, release, lease recovery) moves one parked job of its key, the oldest of
-- its highest level, back to the claim end of its level. A rate-limited job reserves the next
-- start of its key and waits in the delayed set until then; a job starts only at or after a start
-- it reserved, and reservations of a key are gr ms apart (a parked job reserves again).

-- How long past its reserved start a rate-limited job may still start on that reservation (ms).
local RESERVATION_GRACE_MS = 1000

-- One claim call's view of its limit keys, batched: a key's running count and next start are
-- read once per call, then counted here, and written once at its end (flush_limits), however
-- many of its jobs the call handles (a script is atomic: nobody sees the counts in between).
local function limit_state(limits, waiting, g, gc)
  local s = limits[g]
  if not s then
    s = {started = 0, parked = {}, returned = {}, nparked = 0}
    limits[g] = s
  end
  if gc and not s.running then s.running = tonumber(redis.call('HGET', waiting .. ':g', g)) or 0 end
  return s
end

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

-- Hold back a popped job that may not start now; true when it was held back (parked at the
-- concurrency limit, or delayed until the reserved start of a rate-limited key). f: the claim's
-- HMGET (7 limit key, 8 concurrency, 9 ms between starts, 10 reserved start (ms), 11 holds a turn:
-- gt, cleared when the job starts or is parked again; kept while it waits for its reserved start;
-- 12 priority level).
-- A job parked with a reserved start gives the reservation up: its time passes while it is
-- parked, and when a freed slot releases it, it reserves a start again like any job (had it kept
-- its reservation, it would start unchecked, recorded nowhere, and the key's next job could start
-- right after it).
local function held_back(limits, waiting, delayed, key, id, f, now)
  local s = limit_state(limits, waiting, f[7], f[8])
  if f[8] and s.running + s.started >= tonumber(f[8]) then
    -- A job that held its key's turn (released from parked, then beaten to the slot: say by the
    -- recovered job put back in front of it) goes back to the old end of the parked, keeping its
    -- place; had it joined the young end, the jobs parked after it would start before it.
    local side, level = f[11] and s.returned or s.parked, f[12] or '0'
    side[level] = side[level] or {}
    table.insert(side[level], id)
    s.nparked = s.nparked + 1
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
      redis.call('HSET', key, 's', 'd', 'rs', start)
      redis.call('ZADD', delayed, start, id)
      return true
    end
  end
  s.started = s.started + 1
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
  local live, levels = {}, {}
  while #live < n do  -- each round pops at least one id, each id once: bounded by the parked
    local ids = pop_levels(waiting .. ':pl:' .. g, waiting .. ':p', ':' .. g, waiting .. ':p:' .. g, n - #live)
    if #ids == 0 then break end
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

-- Store a new job's limit ('<concurrency>:<ms between starts>:<limit key>', '' for a part unset);
-- written before its state, so a claim sees both.
local function limit_job(key, keyed)
  local gc, gr, g = string.match(keyed, '^([^:]*):([^:]*):(.*)$')
  redis.call('HSET', key, 'g', g)
  if gc ~= '' then redis.call('HSET', key, 'gc', gc) end
  if gr ~= '' then redis.call('HSET', key, 'gr', gr) end
end

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
-- handler took it), so its result says so instead of 'cancelled while running'.
local function finish_cancelled(cancelled, key, id, now, unstarted)
  redis.call('HDEL', key, 'k', 'l', 'h', 'q')
  redis.call('HSET', key, 's', 'C', 't', now)
  redis.call('ZADD', cancelled, now, id)
  if RESULTS.ttl > 0 then
    local attempts = redis.call('HGET', key, 'a') or ''
    local why = unstarted and cancelled_unstarted(attempts) or 'cancelled while running'
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
  out[o + 1] = id .. '{' .. token .. '{' .. (attempts or '0') .. '{' .. (max or '1') .. '{' .. (enqueued or '0')
    .. '{' .. (limit or '0') .. '{' .. task
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
    if f[1] and not (f[7] and held_back(limits, waiting, delayed, key, id, f, now)) then
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
