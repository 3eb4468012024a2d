-- release_one: release.lua for a Lock of one key (KEYS[1]), and the
-- refusal of its writes that may still land (late.lua).
local code = release_key(KEYS[1])
late_leave(late_key, ARGV[3], late_at)
return code
