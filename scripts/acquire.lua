-- acquire: take the lock on this node, or take over a value an earlier attempt
-- of the same holder left here.
-- KEYS[1]  the lock key
-- ARGV[1]  this attempt's value: the Lock's prefix followed by ARGV[4]
-- ARGV[2]  time to live in milliseconds
-- ARGV[3]  the holder's prefix: the Lock's prefix (its token and a dot), or
--          for a Lock of an owner (WithOwner) the owner's part of it, so
--          that any Lock of the owner takes the key over
-- ARGV[4]  this attempt's generation
-- Returns  1 when the key now holds ARGV[1] with the new expiry,
--          -(pttl + 1), 0 or less, when another holder's value is there
--            (nothing is changed): pttl is its remaining time to live in
--            milliseconds, -1 when unknown: a waiter sleeps at most that,
--          2 when this call is stale and changes nothing: a later
--            generation of the same Lock is there, or the tombstone that a
--            delete of the Lock left for this generation or a later one
--            (the tombstone then expires within a second).
-- Taking over our own earlier value is what makes a retry after a lost reply
-- succeed instead of locking its own holder out for the whole TTL. A value
-- that starts with "!" is a tombstone (see release.lua): the key is absent
-- for everyone but the writes it was left against.
local v = redis.call('GET', KEYS[1])
if v then
  local mine = string.sub(ARGV[1], 1, #ARGV[1] - #ARGV[4])
  if string.sub(v, 1, 1) == '!' then
    local tag, gen = string.match(v, '^!(%x+):(%d+)$')
    if tag == string.sub(redis.sha1hex(mine), 1, 16) and tonumber(gen) >= tonumber(ARGV[4]) then
      redis.call('PEXPIRE', KEYS[1], 1000)
      return 2
    end
  elseif string.sub(v, 1, #ARGV[3]) ~= ARGV[3] then
    local ok, pttl = pcall(redis.call, 'PTTL', KEYS[1])
    if not ok then
      pttl = -1 -- an ACL without PTTL: the waiter falls back to its backoff
    end
    return -pttl - 1
  elseif string.sub(v, 1, #mine) == mine then
    local gen = tonumber(string.sub(v, #mine + 1))
    if gen and gen > tonumber(ARGV[4]) then
      return 2
    end
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
