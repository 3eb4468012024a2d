-- extend: push back the expiry of our key, only where our value is still
-- there. It never creates the key: a node that lost it (restart, eviction,
-- FLUSHALL) may since have served another holder, and a key deleted by our
-- own Release must stay deleted.
-- KEYS[1]  the lock key
-- KEYS[2]  with fencing only: the key's fencing counter, raised to ARGV[5]
--          and kept for ARGV[6] more milliseconds, so a counter that missed
--          the acquire's commit catches up
-- ARGV[1]  this extension's value: the holder's prefix followed by ARGV[4]
-- ARGV[2]  new time to live in milliseconds
-- ARGV[3]  the Lock's prefix (its token and a dot; for a Lock of an owner,
--          the owner's token, a tilde, the Lock's own id and a dot): another
--          Lock's value, even the same owner's, is another holder's
-- ARGV[4]  this extension's generation
-- ARGV[5]  with fencing only: the lock's fence
-- ARGV[6]  with fencing only: the counter's horizon in milliseconds
-- Returns  1 when our key now holds ARGV[1] with the new expiry,
--          0 when the key is absent (nothing is changed),
--         -1 when another holder's value is there (nothing is changed),
--          2 when a later generation of ours is there: this call is stale
--            (it landed after a later extension) and changes nothing.
-- The value written drops what an acquire attempt took over (the "|" and
-- what follows, see take.lua): the Lock holds, the takeover is final.
-- Writing the generation into the value orders our own calls on the node:
-- a call that lands late, on a connection given up on, cannot undo a later
-- one's expiry.
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, 1) == '!' then
  return 0 -- absent, or a tombstone (release.lua), which is absent
end
if string.sub(v, 1, #ARGV[3]) ~= ARGV[3] then
  return -1
end
local gen = tonumber(string.match(v, '^%d+', #ARGV[3] + 1))
if gen and gen > tonumber(ARGV[4]) then
  return 2
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if KEYS[2] then
  local c = tonumber(redis.call('GET', KEYS[2]) or '0')
  if c < tonumber(ARGV[5]) then
    redis.call('SET', KEYS[2], ARGV[5], 'PX', ARGV[6])
  else
    redis.call('PEXPIRE', KEYS[2], ARGV[6])
  end
end
return 1
