-- hold: renew, or end, the limit-key slots held for stopped handlers that still run (a thread
-- cannot be interrupted: fail.lua settles its job and holds its slot, see hold_slot in
-- _lib_limits.lua). A worker renews each while the handler runs and ends it once it returned,
-- freeing the slot (and releasing one parked job of the key, as a settled job's slot would).
-- KEYS: 1 held_slots, 2 waiting, 3 jobs, 4 marker
-- ARGV: 1 hold ms (a renewed hold's deadline is now + this), 2 n renewed (<= 1000), then the n
--       members to renew, then the members to end (<= 1000)
-- Returns: {status per member, in ARGV's order: 1 renewed or ended, 0 gone (past its deadline,
--          recover.lua freed its slot: not held again)}
-- Errors: CONVEYOR_BOUND when more than 1000 members of either kind are sent.
local held, waiting, jobs, marker = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local hold_ms, n = tonumber(ARGV[1]), tonumber(ARGV[2])
bounded(n, 1000, 'hold renew')
bounded(#ARGV - 2 - n, 1000, 'hold end')
local until_ms = now_ms() + hold_ms
local out, released = {}, false
for i = 3, #ARGV do
  local member = ARGV[i]
  if not redis.call('ZSCORE', held, member) then
    out[#out + 1] = 0
  elseif i <= 2 + n then
    redis.call('ZADD', held, 'XX', until_ms, member)
    out[#out + 1] = 1
  else
    redis.call('ZREM', held, member)
    released = free_slot(waiting, jobs, held_key_of(member)) or released
    out[#out + 1] = 1
  end
end
if released then wake(marker) end
return out
