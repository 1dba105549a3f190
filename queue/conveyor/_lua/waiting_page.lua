-- waiting_page: one step of reading a page of waiting job ids in claim order (read only).
-- Called without limit keys: the ready lists, the highest priority level first, FIFO within a
-- level, level 0 (the waiting list itself) last. Called with limit keys (the client's next chunk
-- of the keys that may have parked jobs, in byte order): the jobs those keys parked at their
-- concurrency limit (counted as waiting: counts(), metrics), each key's highest level first and
-- its oldest first within a level, the order a freed slot of the key releases them.
-- KEYS: 1 waiting
-- ARGV: 1 offset (>= 0), 2 limit (1..1000), then 0..100 limit keys
-- Returns: {offset left (the part of the offset these lists did not cover), a count, then the ids}:
--          without keys the count is how many jobs are parked (<waiting>:pn), with keys how many
--          jobs these keys hold parked (the client stops once it has passed all of them).
-- Errors: CONVEYOR_BOUND when limit exceeds 1000 or more than 100 keys are given.
-- Why steps: one call listing every key's parked lists (and sorting the keys) kept the server
-- busy for about 4 us per limit key: 200 ms with 50,000 keys running jobs, during which no
-- worker or producer was served. A step now costs at most 100 keys' reads.
local waiting = KEYS[1]
local skip, limit = tonumber(ARGV[1]), bounded(tonumber(ARGV[2]), 1000, 'page')
bounded(#ARGV - 2, 100, 'limit keys')

-- A level's lists, highest level first: lists[i] = prefix .. level .. suffix, then `base`.
local function level_lists(lists, levels, prefix, suffix, base)
  local found = redis.call('ZREVRANGE', levels, 0, -1)
  for i = 1, #found do lists[#lists + 1] = prefix .. found[i] .. suffix end
  lists[#lists + 1] = base
end

local lists = {}
if #ARGV == 2 then
  level_lists(lists, levels_of(waiting), waiting .. ':', '', waiting)
else
  for i = 3, #ARGV do
    local g = ARGV[i]
    level_lists(lists, waiting .. ':pl:' .. g, waiting .. ':p', ':' .. g, waiting .. ':p:' .. g)
  end
end

local out, seen = {skip, 0}, 0
for i = 1, #lists do
  local size = redis.call('LLEN', lists[i])
  seen = seen + size
  if #out - 2 < limit then
    if skip >= size then
      skip = skip - size
    else
      -- The claim (and release) end is the right: read from the right, reverse into that order.
      local take = math.min(limit - (#out - 2), size - skip)
      local ids = redis.call('LRANGE', lists[i], -(skip + take), -(skip + 1))
      for j = #ids, 1, -1 do out[#out + 1] = ids[j] end
      skip = 0
    end
  end
end
out[1] = skip
if #ARGV == 2 then
  out[2] = tonumber(redis.call('GET', waiting .. ':pn') or 0)
else
  out[2] = seen
end
return out
