-- acquire: take the lock on this node, or take over a value an earlier attempt
-- of the same holder left here.
-- KEYS[1]  the lock key
-- ARGV[1]  this attempt's value: the holder's prefix followed by ARGV[4]
-- ARGV[2]  time to live in milliseconds
-- ARGV[3]  the holder's prefix (its token and a dot)
-- ARGV[4]  this attempt's generation
-- Returns  1 when the key now holds ARGV[1] with the new expiry,
--          -(pttl + 1), 0 or less, when another holder's value is there
--            (nothing is changed): pttl is its remaining time to live in
--            milliseconds, -1 when unknown: a waiter sleeps at most that,
--          2 when a later generation of ours is there: this call is stale
--            (it landed after a later one) and changes nothing.
-- Taking over our own earlier value is what makes a retry after a lost reply
-- succeed instead of locking its own holder out for the whole TTL.
local v = redis.call('GET', KEYS[1])
if v then
  if string.sub(v, 1, #ARGV[3]) ~= ARGV[3] then
    local ok, pttl = pcall(redis.call, 'PTTL', KEYS[1])
    if not ok then
      pttl = -1 -- an ACL without PTTL: the waiter falls back to its backoff
    end
    return -pttl - 1
  end
  local gen = tonumber(string.sub(v, #ARGV[3] + 1))
  if gen and gen > tonumber(ARGV[4]) then
    return 2
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
