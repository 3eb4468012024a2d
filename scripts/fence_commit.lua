-- fence_commit: record a fence issued to the current holder, only while this
-- node still holds the holder's key, so any later holder's acquire on this node
-- (which needs the key gone) reads a counter at least this high. The counter
-- expires after the horizon unless a later acquire, extend or commit
-- refreshes it: by then the nodes' clocks have passed every fence issued.
-- KEYS[1]  the lock key
-- KEYS[2]  the key's fencing counter (same hash slot as KEYS[1])
-- ARGV[1]  the Lock's prefix (as for extend.lua)
-- ARGV[2]  the fence being issued, a decimal integer below 2^53
-- ARGV[3]  the counter's horizon in milliseconds
-- Returns  1 when the counter is now at least ARGV[2] under our key,
--          0 when the key is absent or held by another holder (nothing changed).
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1]) ~= ARGV[1] then
  return 0
end
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
if c < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
else
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
return 1
