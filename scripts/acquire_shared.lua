-- acquire_shared: take the key shared on this node: add this Lock's entry
-- (shared.lua), or renew the entry an earlier attempt of the same Lock left.
-- Any number of shared Locks hold a key together; none while an exclusive
-- Lock does, and an exclusive Lock none while a shared entry is live
-- (take.lua). A tombstone's entries are kept in the shared value, and are a
-- tombstone again once the last shared Lock leaves.
-- KEYS[1]  the lock key
-- ARGV[1..4] as for take.lua; the holder's prefix is the Lock's own
-- ARGV[5]  the most shared Locks a key holds on a node
-- Returns  1 when the key now holds this Lock's entry, living ARGV[2]
--            milliseconds,
--          -(pttl + 1), 0 or less, when an exclusive Lock holds the key (pttl
--            its remaining time to live), or when an exclusive Acquire
--            waits for it, or ARGV[5] shared Locks hold it (pttl the time
--            until the last of them expires, -1 when none does): a new
--            shared Lock waits behind a waiting exclusive one,
--          2 when this call is stale and changes nothing (as for take.lua),
--          7 when permits hold the key (Permits): nothing is changed.
-- An exclusive Acquire waits for the key subscribed to its writer channel
-- (writerChannelPrefix in waiters.go), from its first refusal until it
-- gives up or holds: the subscription ends with its connection, so a
-- waiter that died or gave up holds no shared Lock back.
local K = KEYS[1]
local gen = tonumber(ARGV[4])
local now = now_ms()
local v = redis.call('GET', K)
local els, left = shared_from(K, v, ARGV[3], gen, now)
if not els then
  if left == 2 or left == 7 then
    return left
  end
  local ok, pttl = pcall(redis.call, 'PTTL', K)
  if not ok then
    pttl = -1
  end
  return -pttl - 1
end
left = tonumber(left) or 0
local i, g = shared_find(els, ARGV[3])
if i then
  if g and g > gen then
    return 2
  end
else
  local readers = 0
  for _, e in ipairs(els) do
    if string.sub(e[2], 1, 1) ~= '!' then
      readers = readers + 1
    end
  end
  local ok, subs = pcall(redis.call, 'PUBSUB', 'NUMSUB', 'redlock:writer:' .. K)
  if (ok and subs[2] > 0) or readers >= tonumber(ARGV[5]) then
    if left > 0 then
      return -left - 1
    end
    return 0
  end
  i = #els + 1
end
els[i] = {now + tonumber(ARGV[2]), ARGV[1]}
shared_write(K, els, now, '^')
return 1
