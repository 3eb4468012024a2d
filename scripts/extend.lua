-- extend: push back the expiry of our key; re-seed the key where the node has
-- lost it (restart, eviction, expiry), but never take it from another owner.
-- KEYS[1]  the lock key
-- ARGV[1]  the holder's token
-- ARGV[2]  new time to live in milliseconds
-- Returns  1 when our key's expiry was reset,
--          2 when the key was absent and is now set to our token,
--         -1 when another token holds it (nothing is changed).
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if v == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 2
end
return -1
