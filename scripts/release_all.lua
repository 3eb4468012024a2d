-- release_all: release.lua for every key of a Lock of several keys (KEYS),
-- in one step; each key is deleted or put back as release_key says for it,
-- and the Lock's writes that may still land are refused once (late.lua:
-- one refusals key serves all its keys). The writes of such a Lock are
-- atomic on each node, so its keys there hold the same generation: they
-- differ only where a key was lost (evicted, deleted by hand) and another
-- holder took it since.
-- Returns  1 when our value was deleted (or put back, as for release.lua)
--            under any key; otherwise 2 when a later generation of ours is
--            there, -1 when another holder's value is, 0 when every key
--            was absent.
-- A Release (ARGV[2] 0) that finds every key holding our value without a
-- chain deletes them all, as release_key would each: the common case,
-- which costs a call per key less.
local best = 0
if tonumber(ARGV[2]) == 0 then
  local plain = true
  for i = 1, #KEYS do
    local v = redis.call('GET', KEYS[i])
    if not v or string.sub(v, 1, #ARGV[1]) ~= ARGV[1] or string.find(v, '[|,]') then
      plain = false
      break
    end
  end
  if plain then
    for i = 1, #KEYS do
      drop(KEYS[i])
    end
    for i = 1, #KEYS do
      -- The key's release channel: ChannelPrefix in internal/waiting.
      pcall(redis.call, 'PUBLISH', 'redlock:released:' .. KEYS[i], '')
    end
    best = 1
  end
end
if best == 0 then
  local rank = {[0] = 0, [-1] = 1, [2] = 2, [1] = 3}
  for i = 1, #KEYS do
    local code = release_key(KEYS[i])
    if rank[code] > rank[best] then
      best = code
    end
  end
end
late_leave(late_key, ARGV[3], late_at)
return best
