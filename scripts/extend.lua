-- extend: push back the expiry of our key, only where our value is still
-- there. It never creates the key: a node that lost it (restart, eviction,
-- FLUSHALL) may since have served another holder, and a key deleted by our
-- own Release must stay deleted. extend_check(K) says whether key K may be
-- extended, extend_write(K) does it; extend_one.lua runs them for one key,
-- extend_all.lua for every key of a Lock of several keys.
-- ARGV[1]  this extension's value: the holder's prefix followed by ARGV[4]
-- ARGV[2]  new time to live in milliseconds
-- ARGV[3]  the Lock's prefix (its token and a dot; for a Lock of an owner,
--          the owner's token, a tilde, the Lock's own id and a dot): another
--          Lock's value, even the same owner's, is another holder's
-- ARGV[4]  this extension's generation
-- extend_check(K) returns, with the value found,
--          1 when our value is there and may be extended,
--          0 when the key is absent,
--         -1 when another holder's value is there,
--          2 when a later generation of ours is there: this call is stale
--            (it landed after a later extension).
-- The value written drops what an acquire attempt took over (the "|" and
-- what follows, see take.lua): the Lock holds, the takeover is final.
-- Runs after late.lua and late_write.lua: a copy that lands past its
-- deadline changes nothing, one that lands before it and after a later
-- extension is stale (2), and one after the Lock's delete finds no value
-- of ours (0).
-- Writing the generation into the value orders our own calls on the node:
-- a call that lands late, on a connection given up on, cannot undo a later
-- one's expiry.
local function extend_check(K)
  local v = redis.call('GET', K)
  if not v or string.sub(v, 1, 1) == '!' then
    return 0, v -- absent, or an earlier version's tombstone, which is absent
  end
  if string.sub(v, 1, #ARGV[3]) ~= ARGV[3] then
    return -1, v
  end
  local gen = tonumber(string.match(v, '^%d+', #ARGV[3] + 1))
  if gen and gen > tonumber(ARGV[4]) then
    return 2, v
  end
  return 1, v
end

-- extend_write extends key K, whose value extend_check found to be v:
-- the Lock's value of this extension, without what an acquire attempt
-- took over or an earlier version carried.
local function extend_write(K, v)
  redis.call('SET', K, ARGV[1], 'PX', ARGV[2])
end
