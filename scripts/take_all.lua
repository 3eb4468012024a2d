-- take_all: take.lua over every key of a Lock of several keys, shared by
-- acquire_all.lua and acquire_all_fenced.lua (prepended to each, after
-- lib.lua, take.lua, wait.lua and take_fair.lua): take them all on this
-- node, or none: each key is decided as take_fair.lua decides it for
-- acquire.lua, and only when every key may be written are they all
-- written, in the same atomic step. A node thus never holds part of the set, and its vote is for
-- all of them.
-- KEYS[1..n]     the lock's keys, distinct and sorted
-- KEYS[n+1..2n]  acquire_all_fenced.lua only: their fencing counters
-- ARGV[1..4]     as for take.lua
-- ARGV[5]        n
-- all_take() returns what acquire.lua would for the first key that may
-- not be written (nothing is changed then), or 1, with the values, time
-- to live and chain flag for each key, when every key may be.
local function all_take()
  local n = tonumber(ARGV[5])
  local vals, ttls, chained = {}, {}, false
  for i = 1, n do
    local code, value, ttl, ch = take_fair(KEYS[i], redis.call('GET', KEYS[i]))
    if code ~= 1 then
      return code
    end
    vals[i], ttls[i], chained = value, ttl, chained or ch
  end
  return 1, vals, ttls, chained
end

-- all_write writes what all_take decided.
local function all_write(vals, ttls)
  for i = 1, #vals do
    redis.call('SET', KEYS[i], vals[i], 'PX', ttls[i])
    take_taken(KEYS[i])
  end
end
