-- acquire_fenced: acquire.lua, and read this node's fencing counter and clock
-- in the same atomic step, so both readings are ordered after the previous
-- holder's key left this node (see docs/fencing.md).
-- KEYS[1]  the lock key
-- KEYS[2]  the key's fencing counter (same hash slot as KEYS[1])
-- ARGV[1]  this attempt's value: the Lock's prefix followed by ARGV[4]
-- ARGV[2]  time to live in milliseconds
-- ARGV[3]  the holder's prefix, as for acquire.lua
-- ARGV[4]  this attempt's generation
-- ARGV[5]  the counter's horizon in milliseconds: how long an idle counter
--          is kept
-- Returns  {1, counter, seconds, microseconds} when the key now holds ARGV[1],
--          {0, counter, seconds, microseconds, pttl} when another holder's
--          value is there (pttl: its remaining time to live in
--          milliseconds, -1 when unknown), {2, ...} when this call is stale
--          (as for acquire.lua). counter is the stored string, "0" when the
--          node has no counter for the key; seconds and microseconds are the
--          node's TIME.
local c = redis.call('GET', KEYS[2]) or '0'
local t = redis.call('TIME')
local v = redis.call('GET', KEYS[1])
if v then
  local mine = string.sub(ARGV[1], 1, #ARGV[1] - #ARGV[4])
  if string.sub(v, 1, 1) == '!' then
    local tag, gen = string.match(v, '^!(%x+):(%d+)$')
    if tag == string.sub(redis.sha1hex(mine), 1, 16) and tonumber(gen) >= tonumber(ARGV[4]) then
      redis.call('PEXPIRE', KEYS[1], 1000)
      return {2, c, t[1], t[2]}
    end
  elseif string.sub(v, 1, #ARGV[3]) ~= ARGV[3] then
    local ok, pttl = pcall(redis.call, 'PTTL', KEYS[1])
    if not ok then
      pttl = -1
    end
    return {0, c, t[1], t[2], pttl}
  elseif string.sub(v, 1, #mine) == mine then
    local gen = tonumber(string.sub(v, #mine + 1))
    if gen and gen > tonumber(ARGV[4]) then
      return {2, c, t[1], t[2]}
    end
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if c ~= '0' then
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
end
return {1, c, t[1], t[2]}
