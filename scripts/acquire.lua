-- acquire: take the lock on this node, or take over a value an earlier attempt
-- of the same holder left here (take.lua, prepended, decides; take_fair.lua
-- lets the shared Locks that waited through an exclusive hold go first).
-- KEYS[1]  the lock key
-- ARGV[1..4] as for take.lua: the value, the time to live in milliseconds,
--          the holder's prefix and the generation
-- Returns  1 when the key now holds ARGV[1] with the new expiry,
--          6 the same, the value keeping what it took over (a chain, see
--            take.lua): the Lock settles it once it holds,
--          -(pttl + 1), 0 or less, when another holder's value is there,
--            or shared Locks that go first are to come in (nothing is
--            changed),
--          2 when this call is stale and changes nothing (see take.lua),
--          7 when permits hold the key (see take.lua).
local code, value, ttl, chained = take_fair(KEYS[1], redis.call('GET', KEYS[1]))
if code ~= 1 then
  return code
end
redis.call('SET', KEYS[1], value, 'PX', ttl)
take_taken(KEYS[1])
if chained then
  return 6
end
return 1
