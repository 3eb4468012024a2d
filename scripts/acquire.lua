-- acquire: take the lock on this node, or refresh it if we already hold it.
-- KEYS[1]  the lock key
-- ARGV[1]  the holder's token
-- ARGV[2]  time to live in milliseconds
-- Returns  1 when the key now holds ARGV[1] with the new expiry,
--          0 when another token holds it (nothing is changed).
-- Setting again under our own token is what makes a retry after a lost reply
-- succeed instead of locking its own holder out for the whole TTL.
local v = redis.call('GET', KEYS[1])
if v == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
