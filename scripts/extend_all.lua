-- extend_all: extend.lua for a Lock of several keys, all or none: the node
-- extends every key only when every key holds our value, and otherwise
-- changes nothing, so it counts toward a quorum only for all of them. Runs
-- after counter.lua and extend.lua.
-- KEYS[1..n]     the lock's keys
-- KEYS[n+1..2n]  with fencing only: their fencing counters, as for
--                extend_one.lua
-- ARGV[1..4]     as for extend.lua
-- ARGV[5]        n
-- ARGV[6]        with fencing only: the lock's fence
-- ARGV[7]        with fencing only: the counters' horizon in milliseconds
-- Returns  1 when every key now holds ARGV[1] with the new expiry;
--          otherwise, of what extend_check says of the keys, 2 (stale)
--          before -1 (another holder) before 0 (absent).
local n = tonumber(ARGV[5])
local worst = 1
local rank = {[1] = 0, [0] = 1, [-1] = 2, [2] = 3}
local vals = {}
for i = 1, n do
  local code, v = extend_check(KEYS[i])
  vals[i] = v
  if rank[code] > rank[worst] then
    worst = code
  end
end
if worst ~= 1 then
  return worst
end
for i = 1, n do
  extend_write(KEYS[i], vals[i])
  if KEYS[n + i] then
    counter_raise(KEYS[n + i], ARGV[6], ARGV[7])
  end
end
return 1
