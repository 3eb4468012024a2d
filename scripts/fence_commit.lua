-- fence_commit: record a fence issued to the current holder, only while this
-- node still holds the holder's key, so any later holder's acquire on this node
-- (which needs the key gone) reads a counter at least this high. The counter
-- expires after the horizon unless a later acquire, extend or commit
-- refreshes it: by then the nodes' clocks have passed every fence issued.
-- Runs after counter.lua. For a Lock of several keys, all or none: the
-- node commits only when every key holds the holder's value.
-- KEYS[1..n]     the lock's keys
-- KEYS[n+1..2n]  their fencing counters (each in its key's hash slot)
-- ARGV[1]  the Lock's prefix (as for extend.lua)
-- ARGV[2]  the fence being issued, a decimal integer below 2^53
-- ARGV[3]  the counter's horizon in milliseconds
-- Returns  1 when every counter is now at least ARGV[2] under our keys,
--          0 when a key is absent or held by another holder (nothing changed).
local n = #KEYS / 2
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  if not v or string.sub(v, 1, #ARGV[1]) ~= ARGV[1] then
    return 0
  end
end
for i = 1, n do
  counter_raise(KEYS[n + i], ARGV[2], ARGV[3])
end
return 1
