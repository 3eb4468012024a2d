-- acquire_fast: the prologue of acquire.lua, after late.lua and
-- late_write.lua and before lib.lua. Where the key is absent, nobody waits
-- for it (no waiting room, wait.lua) and the Lock's refusals key (late.lua)
-- is absent, take_fair.lua's answer is always the same (write ARGV[1] with
-- PX ARGV[2], return 1), so the prologue does just that, and returns before
-- lib.lua defines its functions: an uncontended acquire costs the node a
-- TIME, an MGET of the room, the refusals key and the key, and one SET.
-- Anything else (another holder, our earlier attempt, shares or permits, a
-- refusal, a waiting room, an ACL without MGET) goes on to the whole script,
-- which reads them again in the same atomic step.
-- KEYS[1], ARGV[1..4] as for acquire.lua.
local fast_ok, fast_read = pcall(redis.call, 'MGET', KEYS[1] .. ':redlock:wait', late_key, KEYS[1])
if fast_ok and not (fast_read[1] or fast_read[2] or fast_read[3]) then
  if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return 1
  end
end
