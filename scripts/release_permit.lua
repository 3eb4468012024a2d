-- release_permit: release.lua for a permit: take this Lock's entry
-- (permits.lua) out of the key, whichever slot and generation it holds, up
-- to a limit; the other permits keep theirs. The last one out deletes the
-- key, count and all. The Lock's writes that may still land are refused,
-- as release.lua's are (late.lua).
-- KEYS[1]  the key
-- ARGV[1..3] as for release.lua
-- Returns  1 when our entry was taken out, 0 when it was absent, -1 when
--            another kind of Lock holds the key, 2 when a later generation
--            of our entry is there (nothing is changed on -1 and 2).
-- A Release (limit 0) that frees a slot is announced on the key's release
-- channel: a waiter for a permit may take it.
local code = shared_release(KEYS[1], '#', function(els)
  local i, _, g = permit_find(els, ARGV[1], 0)
  return i, g
end, true)
late_leave(late_key, ARGV[3], late_at)
return code
