-- settle: record an elected leadership's term, once its Lock is granted, in
-- the key's record of elected terms, which observers read (Election.Leader):
-- a value a quorum holds may be a failed attempt's, a term in the record
-- never is. Only while this node still holds the Lock's value, as
-- fence_commit checks, so that a copy that lands after the Lock's release,
-- or after another Lock took the key, records nothing; a late copy that
-- lands while the Lock holds records what the first did.
-- KEYS[1]  the lock key
-- KEYS[2]  its record of elected terms (in the key's hash slot)
-- ARGV[1]  the Lock's prefix (as for extend.lua), its token and a dot
-- ARGV[2]  the Lock's term (its fence), a decimal integer below 2^53
-- ARGV[3]  how long the record is kept, in milliseconds
-- Returns  1 when the record holds the term, 0 when the node does not hold
--          the Lock's value (nothing changed).
-- The record is "term=token" entries joined by ";", the four highest terms,
-- highest first.
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1]) ~= ARGV[1] then
  return 0
end
local mine = ARGV[2] .. '=' .. string.sub(ARGV[1], 1, #ARGV[1] - 1)
local entries = {mine}
local rec = redis.call('GET', KEYS[2])
if rec then
  for e in string.gmatch(rec, '[^;]+') do
    if e ~= mine and string.match(e, '^%d+=') then
      entries[#entries + 1] = e
    end
  end
end
local function term(e) return tonumber(string.match(e, '^(%d+)=')) end
table.sort(entries, function(a, b) return term(a) > term(b) end)
while #entries > 4 do
  table.remove(entries)
end
redis.call('SET', KEYS[2], table.concat(entries, ';'), 'PX', ARGV[3])
return 1
