-- acquire_all: take every key of a Lock of several keys on this node, or
-- none (take_all.lua decides). Returns what
-- acquire.lua returns: 1 (6 with a chain) when every key now holds ARGV[1],
-- and otherwise, for the first key that may not be written, a refusal
-- -(pttl + 1) or 2 (stale), nothing changed.
local code, vals, ttls, chained = all_take()
if code ~= 1 then
  return code
end
all_write(vals, ttls)
if chained then
  return 6
end
return 1
