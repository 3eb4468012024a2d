-- handover: a Release that takes the key away from the leaving holder and
-- gives it to the next waiter of the same client in the same step, so that
-- a handoff under contention costs one round instead of a release and an
-- acquire. It only does so while no other client waits for the key (no
-- other subscriber of its release channel): then it releases as
-- release.lua does, announces it, and the waiters contend as usual.
-- KEYS[1]  the lock key
-- ARGV[1]  the waiter's value: its prefix followed by ARGV[4]
-- ARGV[2]  the waiter's time to live in milliseconds
-- ARGV[3]  the waiter's prefix (its token and a dot)
-- ARGV[4]  the waiter's generation
-- ARGV[5]  the leaving holder's prefix
-- ARGV[6]  the subscribers of the key's release channel that are the
--          waiter's own client: 1 when it watches the channel, else 0
-- Returns  3 when the leaving holder's value was there and the key now
--            holds ARGV[1] with the waiter's expiry,
--          4 when the leaving holder's value was there and was deleted
--            (other clients wait, or PUBSUB is refused): the waiter gets
--            nothing here,
--          and otherwise what acquire.lua returns for the waiter: 1 when
--          the key was absent or held an earlier value of the waiter's and
--          now holds ARGV[1], -(pttl + 1) when another holder's value is
--          there, 2 when a later generation of the waiter's is there.
local v = redis.call('GET', KEYS[1])
if v then
  if string.sub(v, 1, #ARGV[5]) == ARGV[5] then
    local channel = 'redlock:released:' .. KEYS[1]
    local ok, subs = pcall(redis.call, 'PUBSUB', 'NUMSUB', channel)
    if not ok or subs[2] > tonumber(ARGV[6]) then
      redis.call('DEL', KEYS[1])
      pcall(redis.call, 'PUBLISH', channel, '')
      return 4
    end
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    return 3
  end
  if string.sub(v, 1, #ARGV[3]) ~= ARGV[3] then
    local ok, pttl = pcall(redis.call, 'PTTL', KEYS[1])
    if not ok then
      pttl = -1
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
