-- release_one: release.lua for a Lock of one key (KEYS[1]).
return release_key(KEYS[1])
