-- claim: lease up to `count` waiting jobs, promoting due delayed jobs first.
-- KEYS: 1 meta, 2 waiting, 3 delayed, 4 active, 5 marker, 6 jobs
-- ARGV: 1 count (<= 1000), 2 lease ms, 3 promote batch
-- Returns: {now, next due (ms, -1 when no delayed job, now when jobs are still ready),
--          then 2 (CLAIM_FIELDS in _replies.py) per claimed job:
--          'id{token{attempts{max attempts{enqueued at{time limit ms (0 none){task', payload}
--          (a job with a time limit gets its hard deadline, claim time + limit, in field h)
-- Errors: CONVEYOR_BOUND when count exceeds 1000 or a promotion exceeds its batch.
local meta, waiting, delayed, active, marker, jobs = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local count = bounded(tonumber(ARGV[1]), 1000, 'claim')
local now = now_ms()
promote_due(delayed, waiting, jobs, now, tonumber(ARGV[3]))
local out = {now, -1}
local got, ready = claim_jobs(out, nil, meta, waiting, delayed, active, marker, jobs, now, count,
  tonumber(ARGV[2]))
if got < count then out[2] = ready and now or next_due(delayed) end
return out
