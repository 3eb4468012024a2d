-- handover: a Release that takes the key away from the leaving holder and
-- gives it to the next waiter of the same client in the same step, so that
-- a handoff under contention costs one round instead of a release and an
-- acquire. While other clients wait for the key (other subscribers of its
-- release channel) it does so only within a short streak (ARGV[6]); then it
-- releases as release.lua does, announces it, and the waiters contend. It
-- never hands the key over while shared Locks that waited through the
-- leaving holder's turn are to come in (take_fair.lua): they go first.
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
-- ARGV[7]  the leaving Lock's highest generation, and ARGV[8] how long,
--          in milliseconds, its tombstone lives (as release.lua's ARGV[3]
--          and ARGV[4]): the waiter's value carries its entry (lib.lua), or
--          the key is left its tombstone
-- Returns  3 when the leaving holder's value was there and the key now
--            holds ARGV[1] with the waiter's expiry,
--          5 the same, while other clients wait (ARGV[6] allowed it),
--          4 when the leaving holder's value was there and was deleted
--            (other clients wait, or PUBSUB is refused, or shared Locks
--            go first): the waiter gets nothing here,
--          and otherwise what acquire.lua returns for the waiter (take.lua
--          and take_fair.lua, prepended, decide): 1 when the key now holds ARGV[1] (6 when
--          it keeps what it took over),
--          -(pttl + 1) when another holder's value is there, 2 when this
--          call is stale.
-- Every reply leaves what refuses the leaving Lock's writes still in the
-- network, as its Release would: they must not land on the waiter's key,
-- nor after the waiter's own delete.
local v = redis.call('GET', KEYS[1])
local leaving = tomb_tag(ARGV[5])
local now = now_ms()
local due = now + tonumber(ARGV[8]) -- the leaving Lock's entry's deadline
if v then
  if string.sub(v, 1, #ARGV[5]) == ARGV[5] then
    local dl, entries = carry_read(select(2, carry_split(v)))
    local old = {}
    for i, e in ipairs(entries) do
      old[i] = {e[1], e[2]}
    end
    carry_add(entries, leaving, ARGV[7])
    dl = math.max(dl, due)
    local value, ttl = ARGV[1] .. carry_text(dl, entries), math.max(tonumber(ARGV[2]), dl - now)
    -- The key's release channel: ChannelPrefix in internal/waiting.
    local channel = 'redlock:released:' .. KEYS[1]
    local ok, subs = pcall(redis.call, 'PUBSUB', 'NUMSUB', channel)
    local mine, streak = tonumber(ARGV[6]), false
    if mine < 0 then
      mine, streak = -1 - mine, true
    end
    local room = wait_read(KEYS[1], now)
    local readers = room and wait_first(KEYS[1], room, now) > 0
    if ok and subs[2] > mine and streak and not readers then
      redis.call('SET', KEYS[1], value, 'PX', ttl)
      take_taken(KEYS[1])
      return 5
    end
    if not ok or subs[2] > mine or readers then
      tomb_leave(KEYS[1], false, ARGV[5], ARGV[7], ARGV[8], old, dl, now)
      pcall(redis.call, 'PUBLISH', channel, '')
      return 4
    end
    redis.call('SET', KEYS[1], value, 'PX', ttl)
    take_taken(KEYS[1])
    return 3
  end
end
local code, value, ttl, chained = take_fair(KEYS[1], v)
if code ~= 1 then
  if not v or string.sub(v, 1, 1) == '!' then
    tomb_leave(KEYS[1], v, ARGV[5], ARGV[7], ARGV[8])
  elseif v then
    carry_into(KEYS[1], v, ARGV[5], ARGV[7], ARGV[8])
  end
  return code
end
local body, carried = carry_split(value)
local dl, entries = carry_read(carried)
carry_add(entries, leaving, ARGV[7])
dl = math.max(dl, due)
redis.call('SET', KEYS[1], body .. carry_text(dl, entries), 'PX', math.max(tonumber(ttl), dl - now))
take_taken(KEYS[1])
if chained then
  return 6
end
return 1
