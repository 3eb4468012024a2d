-- acquire_fast: the prologue of acquire.lua, before lib.lua. Where the key
-- is absent, nobody waits for it (no waiting room, wait.lua) and no side
-- tombstone keeps refusals that outlived their value (lib.lua),
-- take_fair.lua's answer is always the same (write ARGV[1] with PX
-- ARGV[2], return 1), so the prologue does just that with SET NX, which
-- gives back what the key holds otherwise (GET), and returns before lib.lua
-- defines its functions: an uncontended acquire costs the node an MGET of
-- the room and the side tombstone, and one SET. A key taken again within a tombstone's life holds the
-- tombstone of its last Lock: where none of its entries refuses this write,
-- the prologue takes it over as take.lua does, carrying its entries and
-- living at least as long as the tombstone would have (lib.lua). Anything
-- else (another holder, a tombstone that refuses, our earlier attempt,
-- shares or permits, an ACL without PTTL or TIME, a waiting room, a side
-- tombstone) goes on
-- to the whole script, which reads the key and the room again in the same
-- atomic step.
-- KEYS[1], ARGV[1..4] as for acquire.lua.
local fast_room, fast_side = KEYS[1] .. ':redlock:wait', KEYS[1] .. ':redlock:tomb'
local fast_ok, fast_read = pcall(redis.call, 'MGET', fast_room, fast_side)
if not fast_ok then -- an ACL without MGET: one GET each, as the whole script reads them
  local ok_r, r = pcall(redis.call, 'GET', fast_room)
  local ok_s, s = pcall(redis.call, 'GET', fast_side)
  fast_read = {ok_r and r, ok_s and s}
end
if not (fast_read[1] or fast_read[2]) then
  local fast_v = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'GET', 'PX', ARGV[2])
  if not fast_v then
    return 1
  end
  if string.sub(fast_v, 1, 1) == '!' and string.find(fast_v, ':', 1, true) then
    local tag = string.sub(redis.sha1hex(string.sub(ARGV[1], 1, #ARGV[1] - #ARGV[4])), 1, 16)
    local at = string.find(fast_v, tag .. ':', 1, true)
    local okp, pttl = pcall(redis.call, 'PTTL', KEYS[1])
    local okt, t = pcall(redis.call, 'TIME')
    if okp and okt and pttl > 0 and (not at or tonumber(string.match(fast_v, '^%d+', at + 17)) < tonumber(ARGV[4])) then
      local dl = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + pttl
      redis.call('SET', KEYS[1], ARGV[1] .. ',' .. string.format('%d', dl) .. fast_v, 'PX', math.max(tonumber(ARGV[2]), pttl))
      return 1
    end
  end
end
