-- restore: put our key back on a node that lost it, after a quorum of other
-- nodes confirmed in the same Extend that we still hold the lock. Never
-- touches a key that is there, whoever holds it, nor a tombstone our own
-- delete left (lib.lua): once Release has started, nothing puts the key back.
-- Runs after lib.lua.
-- KEYS[1]  the lock key
-- ARGV[1]  the extension's value: the Lock's prefix followed by ARGV[4]
-- ARGV[2]  time to live in milliseconds
-- ARGV[3]  the Lock's prefix
-- ARGV[4]  the extension's generation
-- Returns  1 when the key was absent (or another Lock's tombstone) and now
--            holds ARGV[1],
--          0 when the key is there (nothing is changed),
--          2 when a tombstone of ours refuses this generation (nothing is
--            changed): the Lock's delete ran after this call was sent.
local v = redis.call('GET', KEYS[1])
if v then
  if string.sub(v, 1, 1) ~= '!' then
    return 0
  end
  if tomb_refuses(v, ARGV[3], ARGV[4]) then
    return 2
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
