-- announce: keep a waiting Lock's entry in the waiting room of each of its
-- keys (wait.lua), renewed while the Lock waits (announce.go), or end it
-- when it stops waiting. Prepended with lib.lua and wait.lua.
-- KEYS     the Lock's keys
-- ARGV[1]  the waiting Lock's prefix
-- ARGV[2]  what waits: "w" an exclusive Lock of one key (Acquire), whose
--          entry holds new shared Locks back; "W" an exclusive Lock of
--          several keys (AcquireAll), entered only on the keys where shared
--          Locks refuse it (they hold the key, and no other Lock holds any
--          of its keys exclusively), and taken out of the others; "r" a
--          shared Lock,
--          entered as R where an exclusive Lock holds the key, and
--          otherwise renewed as it is (acquire_shared.lua entered it) or
--          as r where an exclusive Lock waits; "R" a shared Lock that
--          waited through an exclusive Lock's turn on some node: R (or a,
--          where it was admitted) on every node, so that no node makes it
--          wait behind a writer whom another makes wait behind it
-- ARGV[3]  how long the entry lives from now, in milliseconds
-- ARGV[4]  "x" to end the wait: the entry is taken out; absent otherwise
-- Returns  1; 0 when a key's room cannot be used (nothing is entered
--          there).
-- A renewal that lands after the entry was taken out (a copy go-redis sent
-- again, a segment the network delivered late) enters the Lock again for
-- ARGV[3] milliseconds at most, by the node's clock; one whose call the
-- Lock's lanes still wait for is followed by the removal again
-- (announce.go).
local P, what, ms = ARGV[1], ARGV[2], tonumber(ARGV[3])
local ok, now = pcall(now_ms)
if not ok then
  return 0
end
-- held: whether another Lock holds a key of KEYS exclusively here (an
-- AcquireAll waits for it, not for the readers of its other keys).
local held = false
if what == 'W' then
  for _, K in ipairs(KEYS) do
    local v = redis.call('GET', K)
    local c = v and string.sub(v, 1, 1)
    if v and c ~= '^' and c ~= '#' and c ~= '!' and string.sub(v, 1, #P) ~= P then
      held = true
    end
  end
end
local code = 1
for _, K in ipairs(KEYS) do
  local room = wait_read(K, now)
  if not room then
    code = 0
  elseif ARGV[4] == 'x' then
    local i = wait_find(room, P)
    if i then
      table.remove(room, i)
      wait_write(K, room, now)
    end
  else
    local i = wait_find(room, P)
    local kind = i and room[i][2]
    local v = redis.call('GET', K)
    local c = v and string.sub(v, 1, 1)
    local put
    if what == 'w' then
      put = 'w'
    elseif what == 'W' then
      if not held and c == '^' and select(2, shared_live(v, now)) > 0 then
        put = 'w'
      elseif i then
        table.remove(room, i)
        wait_write(K, room, now)
      end
    elseif what == 'R' then
      put = kind == 'a' and 'a' or 'R'
    elseif v and c ~= '^' and c ~= '#' and c ~= '!' then
      put = 'R' -- an exclusive Lock holds the key
    elseif kind then
      put = kind
    elseif wait_left(room, 'w', now) > 0 then
      put = 'r'
    end
    if put and wait_put(room, P, put, ms, now) then
      wait_write(K, room, now)
    end
  end
end
return code
