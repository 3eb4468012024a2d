-- acquire_fast: the prologue of acquire.lua, before lib.lua. Where the key
-- is absent, nobody waits for it (no waiting room, wait.lua) and no side
-- tombstone keeps refusals that outlived their value (lib.lua),
-- take_fair.lua's answer is always the same (write ARGV[1] with PX
-- ARGV[2], return 1), so the prologue does just that, and returns before
-- lib.lua defines its functions: an uncontended acquire costs the node an
-- MGET of the room, the side tombstone and the key, and one SET.
-- A key taken again within a tombstone's life holds the tombstone of its
-- last Lock: where none of its entries refuses this write, the prologue
-- takes it over as take.lua does, carrying its entries. They must refuse
-- until a deadline no later than tombBoundMs from now, whatever their
-- deletes were (lib.lua; tombstoneTTL in clock.go): with a TTL of that
-- or more the value outlives them, and the prologue writes that bound as
-- their deadline, which costs one TIME instead of take.lua's PTTL and
-- TIME. Anything else (another holder, a tombstone that refuses, our
-- earlier attempt, shares or permits, an ACL without MGET or TIME, a
-- waiting room, a side tombstone, a shorter TTL) goes on to the whole
-- script, which reads the key and the room again in the same atomic step.
-- KEYS[1], ARGV[1..4] as for acquire.lua.
local tombBoundMs = 2000
local fast_ok, fast_read = pcall(redis.call, 'MGET', KEYS[1] .. ':redlock:wait', KEYS[1] .. ':redlock:tomb', KEYS[1])
if fast_ok and not (fast_read[1] or fast_read[2]) then
  local fast_v = fast_read[3]
  if not fast_v then
    if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
      return 1
    end
  elseif string.sub(fast_v, 1, 1) == '!' and string.find(fast_v, ':', 1, true) and tonumber(ARGV[2]) >= tombBoundMs then
    local tag = string.sub(redis.sha1hex(string.sub(ARGV[1], 1, #ARGV[1] - #ARGV[4])), 1, 16)
    local at = string.find(fast_v, tag .. ':', 1, true)
    local okt, t = pcall(redis.call, 'TIME')
    if okt and (not at or tonumber(string.match(fast_v, '^%d+', at + 17)) < tonumber(ARGV[4])) then
      local dl = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tombBoundMs
      redis.call('SET', KEYS[1], ARGV[1] .. ',' .. string.format('%d', dl) .. fast_v, 'PX', ARGV[2])
      return 1
    end
  end
end
