-- acquire_fenced: acquire.lua (take_fair.lua decides), and read this node's fencing counter and clock
-- in the same atomic step, so both readings are ordered after the previous
-- holder's key left this node (see docs/fencing.md).
-- KEYS[1]  the lock key
-- KEYS[2]  the key's fencing counter (same hash slot as KEYS[1])
-- ARGV[1..4] as for take.lua
-- ARGV[5]  the counter's horizon in milliseconds: how long an idle counter
--          is kept
-- Returns  {1, counter, seconds, microseconds} when the key now holds ARGV[1]
--          ({6, ...} when it keeps what it took over, as for acquire.lua),
--          {0, counter, seconds, microseconds, pttl} when another holder's
--          value is there (pttl: its remaining time to live in
--          milliseconds, -1 when unknown), {2, ...} when this call is stale
--          (as for acquire.lua). counter is the stored string, "0" when the
--          node has no counter for the key; seconds and microseconds are the
--          node's TIME.
local c = redis.call('GET', KEYS[2]) or '0'
local t = redis.call('TIME')
local code, value, ttl, chained = take_fair(KEYS[1], redis.call('GET', KEYS[1]))
if code == 2 or code == 7 then
  return {code, c, t[1], t[2]}
elseif code ~= 1 then
  return {0, c, t[1], t[2], -code - 1}
end
redis.call('SET', KEYS[1], value, 'PX', ttl)
take_taken(KEYS[1])
if c ~= '0' then
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
end
if chained then
  return {6, c, t[1], t[2]}
end
return {1, c, t[1], t[2]}
