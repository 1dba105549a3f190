-- waiting_page: a page of waiting job ids in claim order (read only): the highest priority level
-- first, FIFO within a level, level 0 (the waiting list itself) last.
-- KEYS: 1 waiting
-- ARGV: 1 offset (>= 0), 2 limit (1..1000)
-- Returns: the ids, claim order
-- Errors: CONVEYOR_BOUND when limit exceeds 1000.
local waiting = KEYS[1]
local skip, limit = tonumber(ARGV[1]), bounded(tonumber(ARGV[2]), 1000, 'page')
local lists = {}
local found = redis.call('ZREVRANGE', levels_of(waiting), 0, -1)
for i = 1, #found do lists[i] = waiting .. ':' .. found[i] end
lists[#lists + 1] = waiting
local out = {}
for i = 1, #lists do
  local size = redis.call('LLEN', lists[i])
  if skip >= size then
    skip = skip - size
  else
    -- The claim end is the right: read from the right, reverse into claim order.
    local take = math.min(limit - #out, size - skip)
    local ids = redis.call('LRANGE', lists[i], -(skip + take), -(skip + 1))
    for j = #ids, 1, -1 do out[#out + 1] = ids[j] end
    skip = 0
    if #out >= limit then return out end
  end
end
return out
