-- acquire_shared: take the key shared on this node: add this Lock's entry
-- (shared.lua), or renew the entry an earlier attempt of the same Lock left.
-- Any number of shared Locks hold a key together; none while an exclusive
-- Lock does, and an exclusive Lock none while a shared entry is live
-- (take.lua).
-- New shared Locks wait behind an exclusive Lock that waits for the key
-- (a w entry in its waiting room, wait.lua), but for those that waited
-- through an exclusive Lock's turn (R, or a, once admitted here): they go
-- first. A refused Lock that waits (ARGV[6] above 0) is entered in the
-- room, R when an exclusive Lock holds the key, r behind a waiting one,
-- for ARGV[6] milliseconds; its waiting call renews the entry
-- (announce.lua).
-- KEYS[1]  the lock key
-- ARGV[1..4] as for take.lua; the holder's prefix is the Lock's own
-- ARGV[5]  the most shared Locks a key holds on a node
-- ARGV[6]  how long the entry of a refused Lock that waits lives in the
--          room, in milliseconds; 0 for one that does not wait
--          (TryAcquire)
-- Returns  1 when the key now holds this Lock's entry, living ARGV[2]
--            milliseconds,
--          -(pttl + 1), 0 or less, when an exclusive Lock holds the key (pttl
--            its remaining time to live),
--          8 when ARGV[5] shared Locks hold it: nothing is changed,
--          {9, left} when an exclusive Lock waits for the key: left is the
--            time until its entry in the room expires, in milliseconds,
--          2 when this call is stale and changes nothing (as for take.lua:
--            a later generation of the entry, or the Lock's refusals key),
--          7 when permits hold the key (Permits): nothing is changed.
local K = KEYS[1]
local gen = tonumber(ARGV[4])
local waits = tonumber(ARGV[6]) or 0
local now = now_ms()
local v = redis.call('GET', K)
local els, left = shared_from(K, v, ARGV[3], gen, now)
if not els then
  if left == 2 or left == 7 then
    return left
  end
  if waits > 0 then
    local room = wait_read(K, now)
    if room and wait_put(room, ARGV[3], 'R', waits, now) then
      wait_write(K, room, now)
    end
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
  if #els >= tonumber(ARGV[5]) then
    return 8
  end
  local room = wait_read(K, now)
  if room then
    local j = wait_find(room, ARGV[3])
    local kind = j and room[j][2]
    local writer = wait_left(room, 'w', now)
    if writer > 0 and kind ~= 'R' and kind ~= 'a' then
      if waits > 0 and wait_put(room, ARGV[3], kind or 'r', waits, now) then
        wait_write(K, room, now)
      end
      return {9, writer}
    end
    if kind == 'R' or kind == 'r' then
      room[j][2] = 'a'
      wait_write(K, room, now)
    end
  end
  i = #els + 1
end
els[i] = {now + tonumber(ARGV[2]), ARGV[1]}
shared_write(K, els, now, '^')
return 1
