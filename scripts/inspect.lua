-- inspect: read a lock's key, and its fencing counter, without changing
-- anything: what Client.Inspect and Lock.TTL report.
-- KEYS[1]  the lock key
-- KEYS[2]  optional: the key's fencing counter (with WithFencing only, so
--          that a user limited by ACL to lock keys can still inspect)
-- Returns  {value, pttl, counter}: the key's value or false when absent,
--          its remaining time to live in milliseconds as PTTL gives it
--          (-2 absent, -1 without expiry), and the counter or false.
local v = redis.call('GET', KEYS[1])
local pttl = redis.call('PTTL', KEYS[1])
local counter = false
if #KEYS > 1 then
  counter = redis.call('GET', KEYS[2])
end
return {v, pttl, counter}
