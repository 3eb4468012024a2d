-- acquire_all_fenced: acquire_all.lua, and read this node's fencing
-- counters of all the keys and its clock in the same atomic step, as
-- acquire_fenced.lua does for one key: the highest counter, so the Lock's
-- fence is above every earlier holder's of each key.
-- KEYS[1..n]     the lock's keys
-- KEYS[n+1..2n]  their fencing counters (each in its key's hash slot)
-- ARGV[1..5]     as for acquire_all.lua
-- ARGV[6]        the counters' horizon in milliseconds
-- Returns  what acquire_fenced.lua returns, with the highest of the
--          counters (the stored string, "0" when the node has none).
local n = tonumber(ARGV[5])
local c, cn, had = '0', 0, {}
for i = 1, n do
  local x = redis.call('GET', KEYS[n + i])
  had[i] = x
  if x and tonumber(x) > cn then
    c, cn = x, tonumber(x)
  end
end
local t = redis.call('TIME')
local code, vals, ttls, chained = all_take()
if code == 2 or code == 7 then
  return {code, c, t[1], t[2]}
elseif code ~= 1 then
  return {0, c, t[1], t[2], -code - 1}
end
all_write(vals, ttls)
for i = 1, n do
  if had[i] then
    redis.call('PEXPIRE', KEYS[n + i], ARGV[6])
  end
end
if chained then
  return {6, c, t[1], t[2]}
end
return {1, c, t[1], t[2]}
