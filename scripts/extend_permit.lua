-- extend_permit: extend.lua for a permit: renew this Lock's entry
-- (permits.lua) only where it holds the Lock's slot. It never adds one.
-- KEYS[1]  the key
-- ARGV[1..4] as for extend.lua
-- ARGV[5]  the Lock's slot
-- Returns  1 when the entry now holds ARGV[1] in the slot and lives ARGV[2]
--            more milliseconds, 0 when it is absent from the slot (expired,
--            released, never here, or in another slot: the Lock does not
--            hold this node), -1 when another kind of Lock holds the key,
--            2 when a later generation of the entry is there; nothing is
--            changed but on 1.
local K = KEYS[1]
local v = redis.call('GET', K)
if not v or string.sub(v, 1, 1) == '!' then
  return 0
end
local n = permit_count(v)
if not n then
  return -1
end
local now = now_ms()
local els = shared_live(v, now)
local mine, slot, g = permit_find(els, ARGV[3], now)
if not mine then
  return 0
end
if g and g > tonumber(ARGV[4]) then
  return 2
end
if slot ~= tonumber(ARGV[5]) then
  return 0
end
els[mine] = permit_entry(slot, ARGV[1], ARGV[2], now)
shared_write(K, els, now, permit_head(n))
return 1
