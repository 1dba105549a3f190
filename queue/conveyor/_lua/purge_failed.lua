-- purge_failed: delete failed jobs (their hashes, their place in the failed set and their result
-- records, as retention does).
-- KEYS: 1 failed, 2 jobs, 3 results (hash)
-- ARGV: 1 n (<= 1000; 0 = the oldest `batch` failed jobs), 2 batch (1..1000), then n ids
-- Returns: number of jobs deleted
-- Errors: CONVEYOR_BOUND when n or batch exceeds 1000. Ids that are not failed are skipped.
local failed, jobs = KEYS[1], KEYS[2]
local ids = chosen_ids(failed, ARGV)
local gone = {}
for i = 1, #ids do
  if redis.call('HGET', jobs .. ids[i], 's') == 'f' then gone[#gone + 1] = ids[i] end
end
-- Index first, then hashes (as in trim).
call_chunked('ZREM', failed, gone)
for i = 1, #gone do redis.call('DEL', jobs .. gone[i]) end
call_chunked('HDEL', KEYS[3], gone)  -- their index entries stay until swept (trim.lua)
return #gone
