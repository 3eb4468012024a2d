-- extend_one: extend.lua for a Lock of one key. Runs after counter.lua and
-- extend.lua.
-- KEYS[1]  the lock key
-- KEYS[2]  with fencing only: the key's fencing counter, raised to ARGV[5]
--          and kept for ARGV[6] more milliseconds, so a counter that missed
--          the acquire's commit catches up
-- ARGV[1..4] as for extend.lua
-- ARGV[5]  with fencing only: the lock's fence
-- ARGV[6]  with fencing only: the counter's horizon in milliseconds
-- Returns  what extend_check returns; on 1 the key now holds ARGV[1] with
--          the new expiry, otherwise nothing is changed.
local code, v = extend_check(KEYS[1])
if code ~= 1 then
  return code
end
extend_write(KEYS[1], v)
if KEYS[2] then
  counter_raise(KEYS[2], ARGV[5], ARGV[6])
end
return 1
