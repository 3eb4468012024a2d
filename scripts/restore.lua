-- restore: put our key back on a node that lost it, after a quorum of other
-- nodes confirmed in the same Extend that we still hold the lock. Never
-- touches a key that is there, whoever holds it.
-- KEYS[1]  the lock key
-- ARGV[1]  the extension's value
-- ARGV[2]  time to live in milliseconds
-- Returns  1 when the key was absent (or a tombstone, see release.lua) and
--            now holds ARGV[1],
--          0 when the key is there (nothing is changed).
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 1) ~= '!' then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
