-- _lib_results.lua: result records and their events, retention of finished jobs, deduplication, final fails
-- (part of the shared library: see _lib.lua; may use any definition of the files before it).
-- Used by the scripts that finish, retry or trim jobs and read results.

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
