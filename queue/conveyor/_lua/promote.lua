-- promote: move due delayed jobs to the waiting list, at most `batch` per call.
-- KEYS: 1 delayed, 2 waiting, 3 marker, 4 jobs
-- ARGV: 1 batch (1..100000)
-- Returns: {moved, next due (ms, -1 when no delayed job remains)}
-- Errors: CONVEYOR_BOUND if more than `batch` jobs were processed (asserted, never expected).
local delayed, waiting, marker, jobs = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local batch = bounded(tonumber(ARGV[1]), 100000, 'promote batch')
local now = now_ms()
local moved = promote_due(delayed, waiting, jobs, now, batch)
if moved > 0 then wake(marker) end
return {moved, next_due(delayed)}
