-- release: delete the key only if it still holds our token.
-- KEYS[1]  the lock key
-- ARGV[1]  the holder's token
-- Returns  1 when our key was deleted,
--          0 when the key was absent (expired, or never set on this node),
--         -1 when another token holds it (nothing is changed).
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
if v == false then
  return 0
end
return -1
