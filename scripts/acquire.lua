-- acquire: take the lock on this node, or take over a value an earlier attempt
-- of the same holder left here.
-- KEYS[1]  the lock key
-- ARGV[1]  this attempt's value: the holder's prefix followed by ARGV[4]
-- ARGV[2]  time to live in milliseconds
-- ARGV[3]  the holder's prefix (its token and a dot)
-- ARGV[4]  this attempt's generation
-- Returns  1 when the key now holds ARGV[1] with the new expiry,
--          0 when another holder's value is there (nothing is changed),
--          2 when a later generation of ours is there: this call is stale
--            (it landed after a later one) and changes nothing.
-- Taking over our own earlier value is what makes a retry after a lost reply
-- succeed instead of locking its own holder out for the whole TTL.
local v = redis.call('GET', KEYS[1])
if v then
  if string.sub(v, 1, #ARGV[3]) ~= ARGV[3] then
    return 0
  end
  local gen = tonumber(string.sub(v, #ARGV[3] + 1))
  if gen and gen > tonumber(ARGV[4]) then
    return 2
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
