-- release_shared: release.lua for a shared Lock: take this Lock's entry
-- (shared.lua) out of the key, whichever of its generations it holds, up to
-- a limit; the other shared Locks keep theirs. The last one out deletes the
-- key, or leaves the tombstone of its tombstone entries.
-- KEYS[1]  the lock key
-- ARGV[1..4] as for release.lua; where the key is shared, the tombstone
--          against ARGV[3] is an entry of the shared value (raised, never
--          lowered), a tombstone again once the last shared Lock leaves
-- Returns  1 when our entry was taken out, 0 when it was absent, -1 when an
--            exclusive Lock holds the key, 2 when a later generation of our
--            entry is there (nothing is changed on -1 and 2).
-- A Release (limit 0) that takes out the last shared Lock's entry is
-- announced on the key's release channel, as release.lua's delete is.
local K = KEYS[1]
local P, limit = ARGV[1], tonumber(ARGV[2])
local v = redis.call('GET', K)
if not v or string.sub(v, 1, 1) == '!' then
  if ARGV[3] then
    tomb_leave(K, v, P, ARGV[3], ARGV[4])
  end
  return 0
end
if string.sub(v, 1, 1) ~= '^' then
  return -1
end
local now = now_ms()
local els = shared_live(v, now)
local i, g = shared_find(els, P)
if i and limit > 0 and g and g > limit then
  return 2
end
if not i and not ARGV[3] then
  return 0
end
if i then
  table.remove(els, i)
end
if ARGV[3] then
  shared_tomb(els, P, ARGV[3], ARGV[4], now)
end
local readers = shared_write(K, els, now, '^')
if not i then
  return 0
end
if limit == 0 and not readers then
  -- The key's release channel: releaseChannelPrefix in waiters.go.
  pcall(redis.call, 'PUBLISH', 'redlock:released:' .. K, '')
end
return 1
