-- take: the step the acquire scripts share (acquire.lua, acquire_fenced.lua,
-- and handover.lua for the waiter), prepended to each: whether this attempt
-- may write the key, and what it writes.
-- KEYS[1]  the lock key
-- ARGV[1]  this attempt's value: the Lock's prefix followed by ARGV[4]
-- ARGV[2]  time to live in milliseconds
-- ARGV[3]  the holder's prefix: the Lock's prefix (its token and a dot), or
--          for a Lock of an owner (WithOwner) the owner's part of it, so
--          that any Lock of the owner takes the key over
-- ARGV[4]  this attempt's generation
-- take(v), v the key's value or false, returns
--          1, value, ttl when this attempt may write: value with PX ttl,
--          -(pttl + 1), 0 or less, when another holder's value is there:
--            pttl is its remaining time to live in milliseconds, -1 when
--            unknown (a waiter sleeps at most that),
--          2 when this call is stale and must change nothing: a later
--            generation of the same Lock is there, or the tombstone that a
--            delete of the Lock left for this generation or a later one
--            (the tombstone then expires within a second).
-- Taking over our own earlier value is what makes a retry after a lost reply
-- succeed instead of locking its own holder out for the whole TTL. A value
-- that starts with "!" is a tombstone (see release.lua): the key is absent
-- for everyone but the writes it was left against.
-- Taking over another Lock of the same owner keeps what it replaces: the
-- new value ends with "|" and the replaced value, and its expiry is at least
-- the replaced one's. The attempt may still fail; its rollback (release.lua)
-- then puts the replaced value back, so a Lock of the owner that another
-- Client holds keeps this node for as long as it counted on. A retry of the
-- same attempt keeps what its earlier value had replaced.
local function take(v)
  if not v then
    return 1, ARGV[1], ARGV[2]
  end
  local mine = string.sub(ARGV[1], 1, #ARGV[1] - #ARGV[4])
  if string.sub(v, 1, 1) == '!' then
    local tag, gen = string.match(v, '^!(%x+):(%d+)$')
    if tag == string.sub(redis.sha1hex(mine), 1, 16) and tonumber(gen) >= tonumber(ARGV[4]) then
      redis.call('PEXPIRE', KEYS[1], 1000)
      return 2
    end
    return 1, ARGV[1], ARGV[2]
  end
  local ok, pttl = pcall(redis.call, 'PTTL', KEYS[1])
  if not ok then
    pttl = -1 -- an ACL without PTTL: a waiter falls back to its backoff
  end
  if string.sub(v, 1, #ARGV[3]) ~= ARGV[3] then
    return -pttl - 1
  end
  local replaced = '|' .. v
  if string.sub(v, 1, #mine) == mine then
    local gen = tonumber(string.match(v, '^%d+', #mine + 1))
    if gen and gen > tonumber(ARGV[4]) then
      return 2
    end
    replaced = string.match(v, '|.*$', #mine + 1)
    if not replaced then
      return 1, ARGV[1], ARGV[2]
    end
  end
  if not ok then
    return 0 -- the replaced value's expiry cannot be kept: not taken
  end
  return 1, ARGV[1] .. replaced, math.max(tonumber(ARGV[2]), pttl)
end
