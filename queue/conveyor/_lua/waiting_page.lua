-- waiting_page: a page of waiting job ids in claim order (read only): the highest priority level
-- first, FIFO within a level, level 0 (the waiting list itself) last; then the jobs parked at
-- their limit key's concurrency limit (counted as waiting: counts(), metrics), which a freed slot
-- of their key releases: by limit key (in byte order), each key's highest level first and its
-- oldest first within a level, the order its releases follow.
-- KEYS: 1 waiting
-- ARGV: 1 offset (>= 0), 2 limit (1..1000)
-- Returns: the ids, in that order
-- Errors: CONVEYOR_BOUND when limit exceeds 1000.
-- Parked lists are found through <waiting>:pk (the limit keys that may have parked jobs, see
-- _lib_limits.lua) and <waiting>:g (the keys with running jobs: a job parked by an earlier release,
-- which kept no :pk, waits behind them). HGETALL, not HKEYS: the ACL rules of earlier releases
-- grant it (see _acl.py).
local waiting = KEYS[1]
local skip, limit = tonumber(ARGV[1]), bounded(tonumber(ARGV[2]), 1000, 'page')

-- A level's lists, highest level first: lists[i] = prefix .. level .. suffix, then `base`.
local function level_lists(lists, levels, prefix, suffix, base)
  local found = redis.call('ZREVRANGE', levels, 0, -1)
  for i = 1, #found do lists[#lists + 1] = prefix .. found[i] .. suffix end
  lists[#lists + 1] = base
end

local lists = {}
level_lists(lists, levels_of(waiting), waiting .. ':', '', waiting)
local keys, seen = {}, {}
for _, hash in ipairs({':pk', ':g'}) do
  local fields = redis.call('HGETALL', waiting .. hash)  -- limit key, value, ...
  for i = 1, #fields, 2 do
    local g = fields[i]
    if not seen[g] then seen[g], keys[#keys + 1] = true, g end
  end
end
table.sort(keys)
for i = 1, #keys do
  local g = keys[i]
  level_lists(lists, waiting .. ':pl:' .. g, waiting .. ':p', ':' .. g, waiting .. ':p:' .. g)
end

local out = {}
for i = 1, #lists do
  local size = redis.call('LLEN', lists[i])
  if skip >= size then
    skip = skip - size
  else
    -- The claim (and release) end is the right: read from the right, reverse into that order.
    local take = math.min(limit - #out, size - skip)
    local ids = redis.call('LRANGE', lists[i], -(skip + take), -(skip + 1))
    for j = #ids, 1, -1 do out[#out + 1] = ids[j] end
    skip = 0
    if #out >= limit then return out end
  end
end
return out
