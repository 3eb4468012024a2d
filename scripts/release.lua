-- release: delete our key, whichever of our generations it holds, up to a
-- limit: a rollback deletes only its own attempt's value or an earlier one,
-- never the value of a later attempt that may since have been counted. A
-- rollback of an attempt that took over another Lock of the same owner puts
-- that Lock's value back instead, with the expiry that the attempt kept for
-- it (take.lua): that Lock may still be valid.
-- KEYS[1]  the lock key
-- ARGV[1]  the Lock's prefix (as for extend.lua): another Lock's value, even
--          the same owner's, is never deleted
-- ARGV[2]  the highest generation to delete; 0 deletes any of ours
-- ARGV[3]  optional: a generation to leave a tombstone for when the key is
--          absent, and ARGV[4] the tombstone's time to live in milliseconds
-- Returns  1 when our key was deleted (or, by a rollback, replaced by what
--            our attempt had taken over: see take.lua),
--          0 when the key was absent (expired, never set on this node, or a
--            tombstone),
--         -1 when another holder's value is there (nothing is changed),
--          2 when a later generation of ours is there (nothing is changed).
-- A tombstone is "!", the first 16 hex digits of the SHA1 of ARGV[1], ":"
-- and ARGV[3]. Every script reads it as an absent key, except that the
-- acquire scripts refuse a write of this Lock's generation ARGV[3] or an
-- earlier one: a write of ours whose reply never came may still be in the
-- network, and without it would land after this delete and keep the key
-- for its whole TTL.
-- A Release (limit 0) is announced on the key's release channel, to wake
-- the clients waiting for the key; a rollback is not, so that the heads of
-- several processes do not all wake to split the next vote. A node that
-- refuses PUBLISH (an ACL without channel rights) still deletes, and its
-- waiters fall back to polling.
local v = redis.call('GET', KEYS[1])
if not v then
  if ARGV[3] then
    redis.call('SET', KEYS[1], '!' .. string.sub(redis.sha1hex(ARGV[1]), 1, 16) .. ':' .. ARGV[3], 'PX', ARGV[4])
  end
  return 0
end
if string.sub(v, 1, 1) == '!' then
  return 0
end
if string.sub(v, 1, #ARGV[1]) ~= ARGV[1] then
  return -1
end
local limit = tonumber(ARGV[2])
if limit > 0 then
  local gen = tonumber(string.match(v, '^%d+', #ARGV[1] + 1))
  if gen and gen > limit then
    return 2
  end
  local replaced = string.match(v, '|(.*)$', #ARGV[1] + 1)
  if replaced then
    redis.call('SET', KEYS[1], replaced, 'KEEPTTL')
    return 1
  end
end
redis.call('DEL', KEYS[1])
if limit == 0 then
  -- The key's release channel: releaseChannelPrefix in waiters.go.
  pcall(redis.call, 'PUBLISH', 'redlock:released:' .. KEYS[1], '')
end
return 1
