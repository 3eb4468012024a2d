-- acquire_fenced: acquire.lua, and read this node's fencing counter in the same
-- atomic step, so the counter read is ordered after the previous holder's key
-- left this node (see docs/fencing.md).
-- KEYS[1]  the lock key
-- KEYS[2]  the key's fencing counter (same hash slot as KEYS[1])
-- ARGV[1]  the holder's token
-- ARGV[2]  time to live in milliseconds
-- Returns  {1, counter} when the key now holds ARGV[1],
--          {0, counter} when another token holds it.
--          counter is 0 when the node has never committed a fence for the key.
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
local v = redis.call('GET', KEYS[1])
if v == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, c}
end
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, c}
end
return {0, c}
