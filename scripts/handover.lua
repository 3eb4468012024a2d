-- handover: a Release that takes the key away from the leaving holder and
-- gives it to the next waiter of the same client in the same step, so that
-- a handoff under contention costs one round instead of a release and an
-- acquire. While other clients wait for the key (other subscribers of its
-- release channel) it does so only within a short streak (ARGV[6]); then it
-- releases as release.lua does, announces it, and the waiters contend. It
-- never hands the key over while shared Locks that waited through the
-- leaving holder's turn are to come in (take_fair.lua): they go first.
-- It is the waiter's write: late.lua and late_write.lua take the waiter's
-- pair (its refusals key and this write's deadline) first, and a handover
-- that lands past its deadline changes nothing, the leaving holder's value
-- included. Then comes the leaving Lock's pair, as a delete of that Lock
-- sends it (late.lua), taken off here:
-- KEYS[1]  the leaving Lock's refusals key
-- ARGV[1]  the latest deadline of the leaving Lock's writes sent here
-- and then:
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
-- ARGV[7]  the leaving Lock's highest generation: its refusal refuses its
--          writes up to it, as its Release's would (release.lua)
-- Returns  3 when the leaving holder's value was there and the key now
--            holds ARGV[1] with the waiter's expiry,
--          5 the same, while other clients wait (ARGV[6] allowed it),
--          4 when the leaving holder's value was there and was deleted
--            (other clients wait, or PUBSUB is refused, or shared Locks
--            go first, or the waiter's own refusals key refuses it: its
--            delete ran first): the waiter gets nothing here,
--          and otherwise what acquire.lua returns for the waiter (take.lua
--          and take_fair.lua, prepended, decide): 1 when the key now holds
--          ARGV[1] (6 when it keeps what it took over),
--          -(pttl + 1) when another holder's value is there, 2 when this
--          call is stale.
-- Every reply but the late one leaves what refuses the leaving Lock's
-- writes still in the network, as its Release would: they must not land on
-- the waiter's key, nor after the waiter's own delete.
local leaving_key = table.remove(KEYS, 1)
local leaving_at = tonumber(table.remove(ARGV, 1))
local v = redis.call('GET', KEYS[1])
late_leave(leaving_key, ARGV[7], leaving_at)
if v and string.sub(v, 1, #ARGV[5]) == ARGV[5] then
  -- The key's release channel: ChannelPrefix in internal/waiting.
  local channel = 'redlock:released:' .. KEYS[1]
  if take_refused() then
    drop(KEYS[1])
    pcall(redis.call, 'PUBLISH', channel, '')
    return 4
  end
  local ok, subs = pcall(redis.call, 'PUBSUB', 'NUMSUB', channel)
  local mine, streak = tonumber(ARGV[6]), false
  if mine < 0 then
    mine, streak = -1 - mine, true
  end
  local now = now_ms()
  local room = wait_read(KEYS[1], now)
  local readers = room and wait_first(KEYS[1], room, now) > 0
  if ok and subs[2] > mine and streak and not readers then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    take_taken(KEYS[1])
    return 5
  end
  if not ok or subs[2] > mine or readers then
    drop(KEYS[1])
    pcall(redis.call, 'PUBLISH', channel, '')
    return 4
  end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  take_taken(KEYS[1])
  return 3
end
local code, value, ttl, chained = take_fair(KEYS[1], v)
if code ~= 1 then
  return code
end
redis.call('SET', KEYS[1], value, 'PX', ttl)
take_taken(KEYS[1])
if chained then
  return 6
end
return 1
