-- inspect: read a lock's key, and its fencing counter, without changing
-- anything: what Client.Inspect and Lock.TTL report.
-- KEYS[1]  the lock key
-- KEYS[2]  optional: the key's fencing counter (with WithFencing only, so
--          that a user limited by ACL to lock keys can still inspect)
-- Returns  {value, pttl, counter}: the key's value or false when absent,
--          its remaining time to live in milliseconds as PTTL gives it
--          (-2 absent, -1 without expiry), and the counter or false; for a
--          key taken shared or by permits (lib.lua), {value, pttl, counter,
--          now}, now the node's clock in milliseconds, against which its
--          entries expire.
local v = redis.call('GET', KEYS[1])
local pttl = redis.call('PTTL', KEYS[1])
local counter = false
if #KEYS > 1 then
  counter = redis.call('GET', KEYS[2])
end
if v and (string.sub(v, 1, 1) == '^' or string.sub(v, 1, 1) == '#') then
  local t = redis.call('TIME')
  return {v, pttl, counter, tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)}
end
return {v, pttl, counter}
