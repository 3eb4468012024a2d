-- release: delete our key, whichever of our generations it holds, up to a
-- limit: a rollback deletes only its own attempt's value or an earlier one,
-- never the value of a later attempt that may since have been counted.
-- KEYS[1]  the lock key
-- ARGV[1]  the holder's prefix (its token and a dot)
-- ARGV[2]  the highest generation to delete; 0 deletes any of ours
-- Returns  1 when our key was deleted,
--          0 when the key was absent (expired, or never set on this node),
--         -1 when another holder's value is there (nothing is changed),
--          2 when a later generation of ours is there (nothing is changed).
-- A Release (limit 0) is announced on the key's release channel, to wake
-- the clients waiting for the key; a rollback is not, so that the heads of
-- several processes do not all wake to split the next vote. A node that
-- refuses PUBLISH (an ACL without channel rights) still deletes, and its
-- waiters fall back to polling.
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
if string.sub(v, 1, #ARGV[1]) ~= ARGV[1] then
  return -1
end
local limit = tonumber(ARGV[2])
if limit > 0 then
  local gen = tonumber(string.sub(v, #ARGV[1] + 1))
  if gen and gen > limit then
    return 2
  end
end
redis.call('DEL', KEYS[1])
if limit == 0 then
  pcall(redis.call, 'PUBLISH', 'redlock:released:' .. KEYS[1], '')
end
return 1
