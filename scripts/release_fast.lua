-- release_fast: the prologue of release.lua for a Lock of one key, after
-- late.lua and before lib.lua. The common cases are decided here as
-- release_key decides them, before lib.lua defines its functions: an
-- absent key is left as it is, and a value whose head is this Lock's with
-- no chain ("|") is deleted (a rollback whose limit is below the value's
-- generation changes nothing, 2). Either way the Lock's writes that may
-- still land are refused (late_leave). A Release (limit 0) that finds its
-- value announces it on the key's release channel, as release_key does.
-- Anything else (another holder, a chain) goes on to the whole script.
-- KEYS[1], ARGV[1..3] as for release.lua.
local fast_v = redis.call('GET', KEYS[1])
if not fast_v then
  late_leave(late_key, ARGV[3], late_at)
  return 0
end
if string.sub(fast_v, 1, #ARGV[1]) == ARGV[1] and not string.find(fast_v, '|', 1, true) then
  local limit = tonumber(ARGV[2])
  if limit > 0 then
    local gen = tonumber(string.match(fast_v, '^%d+', #ARGV[1] + 1))
    if gen and gen > limit then
      late_leave(late_key, ARGV[3], late_at)
      return 2
    end
  end
  redis.call('DEL', KEYS[1])
  late_leave(late_key, ARGV[3], late_at)
  if limit == 0 then
    -- The key's release channel: ChannelPrefix in internal/waiting.
    pcall(redis.call, 'PUBLISH', 'redlock:released:' .. KEYS[1], '')
  end
  return 1
end
