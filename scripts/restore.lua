-- restore: put our keys back on a node that lost them, after a quorum of
-- other nodes confirmed in the same Extend that we still hold the lock.
-- Never touches a key that is there, whoever holds it, nor a tombstone our
-- own delete left (lib.lua): once Release has started, nothing puts the key
-- back. For a Lock of several keys, all or none: the node writes only when
-- no key is another holder's and no tombstone refuses, and then refreshes
-- the keys of ours that are there too, so that it holds all of them.
-- Runs after lib.lua.
-- KEYS     the lock's keys
-- ARGV[1]  the extension's value: the Lock's prefix followed by ARGV[4]
-- ARGV[2]  time to live in milliseconds
-- ARGV[3]  the Lock's prefix
-- ARGV[4]  the extension's generation
-- Returns  1 when a key was absent (or another Lock's tombstone) and now
--            every key holds ARGV[1],
--          0 when every key is there, or one is another holder's or holds
--            a later generation of ours (nothing is changed),
--          2 when a tombstone of ours refuses this generation (nothing is
--            changed): the Lock's delete ran after this call was sent.
local absent = false
local vals = {}
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  vals[i] = v
  if side_refuses(KEYS[i], ARGV[3], ARGV[4]) then
    return 2
  end
  if not v then
    absent = true
  elseif string.sub(v, 1, 1) == '!' then
    if tomb_refuses(v, ARGV[3], ARGV[4]) then
      return 2
    end
    absent = true
  elseif string.sub(v, 1, #ARGV[3]) ~= ARGV[3] then
    return 0
  else
    local gen = tonumber(string.match(v, '^%d+', #ARGV[3] + 1))
    if gen and gen > tonumber(ARGV[4]) then
      return 0
    end
  end
end
if not absent then
  return 0
end
-- What was there goes on refusing what it did: a tombstone's entries,
-- living at least as long as the tombstone would have, or those our value
-- carried (lib.lua).
for i = 1, #KEYS do
  local v, extra, ttl = vals[i], '', tonumber(ARGV[2])
  if v and string.sub(v, 1, 1) == '!' then
    local okt, now = pcall(now_ms)
    local okp, pttl = pcall(redis.call, 'PTTL', KEYS[i])
    if okt and okp and pttl > 0 then
      extra = carry_text(now + pttl, tomb_entries(v))
      ttl = math.max(ttl, pttl)
    end
  elseif v then
    extra = select(2, carry_split(v))
    local dl, entries = carry_read(extra)
    if #entries > 0 then
      local okt, now = pcall(now_ms)
      if okt then
        side_keep(KEYS[i], entries, dl, ttl, now)
      end
    end
  end
  redis.call('SET', KEYS[i], ARGV[1] .. extra, 'PX', ttl)
end
return 1
