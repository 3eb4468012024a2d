-- restore: put our keys back on a node that lost them, after a quorum of
-- other nodes confirmed in the same Extend that we still hold the lock.
-- Never touches a key that is there, whoever holds it, nor writes once our
-- own delete ran here (the Lock's refusals key, late.lua): once Release has
-- started, nothing puts the key back. For a Lock of several keys, all or
-- none: the node writes only when no key is another holder's, and then
-- refreshes the keys of ours that are there too, so that it holds all of
-- them. Runs after late.lua, late_write.lua and lib.lua.
-- KEYS     the lock's keys
-- ARGV[1]  the extension's value: the Lock's prefix followed by ARGV[4]
-- ARGV[2]  time to live in milliseconds
-- ARGV[3]  the Lock's prefix
-- ARGV[4]  the extension's generation
-- Returns  1 when a key was absent and now every key holds ARGV[1],
--          0 when every key is there, or one is another holder's or holds
--            a later generation of ours (nothing is changed),
--          2 when the Lock's refusals key refuses this generation (nothing
--            is changed): the Lock's delete ran after this call was sent.
if late_refused(redis.call('GET', late_key), ARGV[4]) then
  return 2
end
local absent = false
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if not v or string.sub(v, 1, 1) == '!' then
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
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
return 1
