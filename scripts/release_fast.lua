-- release_fast: the prologue of release.lua for a Lock of one key, before
-- lib.lua. The common cases are decided here as release_key decides them,
-- before lib.lua defines its functions: an absent key, or a value whose
-- head is this Lock's with no chain ("|"), is left the tombstone of this
-- Lock's writes up to ARGV[3] and of the entries the value carries (","),
-- living until their deadline at least, as tomb_leave leaves it (a
-- rollback whose limit is below the value's generation changes nothing,
-- 2). Their deadline is never more than tombBoundMs past now (lib.lua;
-- tombstoneTTL in clock.go): a tombstone that lives that long (ARGV[4])
-- outlives it without a TIME to read it. A Release (limit 0) that finds
-- its value announces it on the key's release channel, as release_key
-- does. Anything else (a tombstone, another holder, a chain) goes on to
-- the whole script.
-- KEYS[1], ARGV[1..4] as for release.lua.
local tombBoundMs = 2000
local fast_v = redis.call('GET', KEYS[1])
if not fast_v or (string.sub(fast_v, 1, #ARGV[1]) == ARGV[1] and not string.find(fast_v, '|', 1, true)) then
  local limit = tonumber(ARGV[2])
  if fast_v and limit > 0 then
    local gen = tonumber(string.match(fast_v, '^%d+', #ARGV[1] + 1))
    if gen and gen > limit then
      return 2
    end
  end
  local tag = string.sub(redis.sha1hex(ARGV[1]), 1, 16)
  local tomb, life = '!' .. tag .. ':' .. string.format('%d', tonumber(ARGV[3])), tonumber(ARGV[4])
  local at = fast_v and string.find(fast_v, ',', 1, true)
  if at then
    -- What the value carries: ",deadline!entries" (lib.lua). Its entries
    -- follow this Lock's, seven of them at most, and the tombstone lives
    -- until their deadline at least.
    local bang = string.find(fast_v, '!', at, true)
    local okt, t = true, nil
    if life < tombBoundMs then
      okt, t = pcall(redis.call, 'TIME')
    end
    if okt and bang and not string.find(fast_v, tag .. ':', bang, true) then
      if t then
        local dl = tonumber(string.sub(fast_v, at + 1, bang - 1))
        life = math.max(life, dl - (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)))
      end
      -- The first seven entries, cut from the value in one piece.
      local stop, n = bang, 0
      repeat
        stop = string.find(fast_v, ',', stop + 1, true)
        n = n + 1
      until not stop or n == 7
      tomb = tomb .. ',' .. string.sub(fast_v, bang + 1, stop and stop - 1 or -1)
      at = nil
    end
  end
  if not at then
    redis.call('SET', KEYS[1], tomb, 'PX', life)
    if not fast_v then
      return 0
    end
    if limit == 0 then
      pcall(redis.call, 'PUBLISH', 'redlock:released:' .. KEYS[1], '')
    end
    return 1
  end
end
