-- acquire_fast: the prologue of acquire.lua, before lib.lua. Where the key
-- is absent, take.lua's answer is always the same (write ARGV[1] with PX
-- ARGV[2], return 1), so the prologue does just that with SET NX and
-- returns before lib.lua defines its functions: an uncontended acquire
-- costs the node one SET. A key that holds anything (another holder, a
-- tombstone, our earlier attempt, shares or permits) goes on to the whole
-- script, which reads it again in the same atomic step.
-- KEYS[1], ARGV[1], ARGV[2] as for acquire.lua.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
