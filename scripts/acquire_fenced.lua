-- acquire_fenced: acquire.lua, and read this node's fencing counter in the same
-- atomic step, so the counter read is ordered after the previous holder's key
-- left this node (see docs/fencing.md).
-- KEYS[1]  the lock key
-- KEYS[2]  the key's fencing counter (same hash slot as KEYS[1])
-- ARGV[1]  this attempt's value: the holder's prefix followed by ARGV[4]
-- ARGV[2]  time to live in milliseconds
-- ARGV[3]  the holder's prefix (its token and a dot)
-- ARGV[4]  this attempt's generation
-- Returns  {1, counter} when the key now holds ARGV[1],
--          {0, counter} when another holder's value is there,
--          {2, counter} when a later generation of ours is there (stale call).
--          counter is 0 when the node has never committed a fence for the key.
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
local v = redis.call('GET', KEYS[1])
if v then
  if string.sub(v, 1, #ARGV[3]) ~= ARGV[3] then
    return {0, c}
  end
  local gen = tonumber(string.sub(v, #ARGV[3] + 1))
  if gen and gen > tonumber(ARGV[4]) then
    return {2, c}
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, c}
