-- release_permit: release.lua for a permit: take this Lock's entry
-- (permits.lua) out of the key, whichever slot and generation it holds, up
-- to a limit; the other permits keep theirs. The last one out deletes the
-- key, count and all, or leaves the tombstone of its tombstone entries.
-- KEYS[1]  the key
-- ARGV[1..4] as for release.lua; where permits hold the key, the tombstone
--          against ARGV[3] is an entry of its value, as for
--          release_shared.lua
-- Returns  1 when our entry was taken out, 0 when it was absent, -1 when
--            another kind of Lock holds the key, 2 when a later generation
--            of our entry is there (nothing is changed on -1 and 2).
-- A Release (limit 0) that frees a slot is announced on the key's release
-- channel: a waiter for a permit may take it.
local K = KEYS[1]
local P, limit = ARGV[1], tonumber(ARGV[2])
local v = redis.call('GET', K)
if not v or string.sub(v, 1, 1) == '!' then
  if ARGV[3] then
    tomb_leave(K, v, P, ARGV[3], ARGV[4])
  end
  return 0
end
local n = permit_count(v)
if not n then
  return -1
end
local now = now_ms()
local els = shared_live(v, now)
local mine, _, g = permit_find(els, P, now)
if mine and limit > 0 and g and g > limit then
  return 2
end
if not mine and not ARGV[3] then
  return 0
end
if mine then
  table.remove(els, mine)
end
if ARGV[3] then
  shared_tomb(els, P, ARGV[3], ARGV[4], now)
end
shared_write(K, els, now, permit_head(n))
if not mine then
  return 0
end
if limit == 0 then
  -- The key's release channel: releaseChannelPrefix in waiters.go.
  pcall(redis.call, 'PUBLISH', 'redlock:released:' .. K, '')
end
return 1
