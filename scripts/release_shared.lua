-- release_shared: release.lua for a shared Lock: take this Lock's entry
-- (shared.lua) out of the key, whichever of its generations it holds, up to
-- a limit; the other shared Locks keep theirs. The last one out deletes the
-- key. The Lock's writes that may still land are refused, as release.lua's
-- are (late.lua).
-- KEYS[1]  the lock key
-- ARGV[1..3] as for release.lua
-- Returns  1 when our entry was taken out, 0 when it was absent, -1 when an
--            exclusive Lock holds the key, 2 when a later generation of our
--            entry is there (nothing is changed on -1 and 2).
-- A Release (limit 0) that takes out the last shared Lock's entry is
-- announced on the key's release channel, as release.lua's delete is.
local code = shared_release(KEYS[1], '^', function(els) return shared_find(els, ARGV[1]) end, false)
late_leave(late_key, ARGV[3], late_at)
return code
