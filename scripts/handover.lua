-- handover: a Release that takes the key away from the leaving holder and
-- gives it to the next waiter of the same client in the same step, so that
-- a handoff under contention costs one round instead of a release and an
-- acquire. While other clients wait for the key (other subscribers of its
-- release channel) it does so only within a short streak (ARGV[6]); then it
-- releases as release.lua does, announces it, and the waiters contend.
-- KEYS[1]  the lock key
-- ARGV[1]  the waiter's value: its prefix followed by ARGV[4]
-- ARGV[2]  the waiter's time to live in milliseconds
-- ARGV[3]  the waiter's holder prefix (as for acquire.lua)
-- ARGV[4]  the waiter's generation
-- ARGV[5]  the leaving Lock's prefix (as for extend.lua)
-- ARGV[6]  the subscribers of the key's release channel that are the
--          waiter's own client, m: 1 when it watches the channel, else 0;
--          sent as -1 - m when the key may be handed over even though
--          other clients wait (a short streak of handovers in the client)
-- Returns  3 when the leaving holder's value was there and the key now
--            holds ARGV[1] with the waiter's expiry,
--          5 the same, while other clients wait (ARGV[6] allowed it),
--          4 when the leaving holder's value was there and was deleted
--            (other clients wait, or PUBSUB is refused): the waiter gets
--            nothing here,
--          and otherwise what acquire.lua returns for the waiter (take.lua,
--          prepended, decides): 1 when the key now holds ARGV[1] (6 when
--          it keeps what it took over),
--          -(pttl + 1) when another holder's value is there, 2 when this
--          call is stale.
local v = redis.call('GET', KEYS[1])
if v then
  if string.sub(v, 1, #ARGV[5]) == ARGV[5] then
    -- The key's release channel: releaseChannelPrefix in waiters.go.
    local channel = 'redlock:released:' .. KEYS[1]
    local ok, subs = pcall(redis.call, 'PUBSUB', 'NUMSUB', channel)
    local mine, streak = tonumber(ARGV[6]), false
    if mine < 0 then
      mine, streak = -1 - mine, true
    end
    if ok and subs[2] > mine and streak then
      redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
      return 5
    end
    if not ok or subs[2] > mine then
      redis.call('DEL', KEYS[1])
      pcall(redis.call, 'PUBLISH', channel, '')
      return 4
    end
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    return 3
  end
end
local code, value, ttl, chained = take(KEYS[1], v)
if code ~= 1 then
  return code
end
redis.call('SET', KEYS[1], value, 'PX', ttl)
if chained then
  return 6
end
return 1
