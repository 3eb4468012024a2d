-- extend_shared: extend.lua for a shared Lock: renew this Lock's entry
-- (shared.lua) only where it is still live. It never adds one.
-- KEYS[1]  the lock key
-- ARGV[1..4] as for extend.lua
-- Returns  1 when the entry now holds ARGV[1] and lives ARGV[2] more
--            milliseconds, 0 when it is absent (expired, released, never
--            here), -1 when an exclusive Lock holds the key, 2 when a
--            later generation of the entry is there; nothing is changed but
--            on 1.
local K = KEYS[1]
local v = redis.call('GET', K)
if not v or string.sub(v, 1, 1) == '!' then
  return 0
end
if string.sub(v, 1, 1) ~= '^' then
  return -1
end
local now = now_ms()
local els = shared_live(v, now)
local i, g = shared_find(els, ARGV[3])
if not i then
  return 0
end
if g and g > tonumber(ARGV[4]) then
  return 2
end
els[i] = {now + tonumber(ARGV[2]), ARGV[1]}
shared_write(K, els, now, '^')
return 1
