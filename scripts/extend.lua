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
-- what follows, see take.lua): the Lock holds, the takeover is final. It
-- keeps the tombstone entries the value carries (lib.lua).
-- Writing the generation into the value orders our own calls on the node:
-- a call that lands late, on a connection given up on, cannot undo a later
-- one's expiry.
local function extend_check(K)
  local v = redis.call('GET', K)
  if not v or string.sub(v, 1, 1) == '!' then
    return 0, v -- absent, or a tombstone (release.lua), which is absent
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

-- extend_write extends key K, whose value extend_check found to be v. A
-- value that carries tombstone entries lives at least until their deadline
-- (lib.lua), whatever ARGV[2]: it must refuse their writes until then, and
-- the entries were at most 2 s from their deletes when carried. (This
-- script runs without lib.lua, whose side tombstone keeps what outlives a
-- value that others' deletes found: here the holder itself renews.)
local function extend_write(K, v)
  local at = string.find(v, ',', 1, true)
  if at then
    local carried, ttl = string.sub(v, at), tonumber(ARGV[2])
    local dl = tonumber(string.match(carried, '^,(%d+)!'))
    if dl then
      local ok, t = pcall(redis.call, 'TIME')
      if ok then
        ttl = math.max(ttl, dl - (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)))
      end
    end
    redis.call('SET', K, ARGV[1] .. carried, 'PX', ttl)
  else
    redis.call('SET', K, ARGV[1], 'PX', ARGV[2])
  end
end
