-- take_fair: take.lua made phase-fair, for the exclusive acquires
-- (acquire.lua, acquire_fenced.lua, take_all.lua, handover.lua), prepended
-- after lib.lua, take.lua and wait.lua. Nothing here runs on its own.
-- Shared Locks that waited while an exclusive Lock held the key (R
-- entries of its waiting room, wait.lua) go before the next exclusive
-- Lock: until they are in, or their entries expired, or wait_grace passed
-- since an exclusive Lock was first refused for them, an exclusive Lock
-- does not take the key, not even a free one. A reader that cannot come in
-- within wait_grace (a quorum of nodes is not there for it) holds writers
-- back no longer, until the next writer's turn ends. Once an exclusive Lock took
-- the key, the shared Locks that waited behind a waiting exclusive one (r)
-- have waited through a writer's turn, and go first when it ends (R), and
-- its own entry, if it waited, is taken out.

-- wait_grace: how long, in node-clock milliseconds from the first
-- exclusive acquire refused for them, the readers that go first have to
-- come in.
local wait_grace = 1000

-- wait_first: the milliseconds for which the R entries of K's room els,
-- read at now, still hold an exclusive Lock back (0: none does). An R
-- entry's due is set at the first refusal it causes.
local function wait_first(K, els, now)
  local left, stamped = 0, false
  for _, e in ipairs(els) do
    if e[2] == 'R' then
      if not e[4] then
        e[4], stamped = now + wait_grace, true
      end
      if e[4] > now then
        left = math.max(left, math.min(e[1], e[4]) - now)
      end
    end
  end
  if stamped then
    wait_write(K, els, now)
  end
  return left
end

-- take_fair(K, v) returns what take(K, v) returns, but where that is 1
-- while R entries hold exclusive Locks back: then -(left + 1), as for
-- another holder, left the milliseconds for which they still do (a waiter
-- sleeps at most that, and is woken sooner by their Release).
local function take_fair(K, v)
  local code, value, ttl, chained = take(K, v)
  if code ~= 1 then
    return code
  end
  local ok, now = pcall(now_ms)
  local els = ok and wait_read(K, now)
  if els then
    local left = wait_first(K, els, now)
    if left > 0 then
      return -left - 1
    end
  end
  return 1, value, ttl, chained
end

-- take_taken: after the exclusive Lock whose write is ARGV[1] (its prefix
-- and generation ARGV[4]) took key K, the shared Locks that waited behind a
-- waiting exclusive one (r) go first when it ends (R), as do the R ones
-- with a new grace, and its own entry is taken out: it waits no more here.
local function take_taken(K)
  local ok, now = pcall(now_ms)
  local els = ok and wait_read(K, now)
  if not els or #els == 0 then
    return
  end
  local own = string.sub(ARGV[1], 1, #ARGV[1] - #ARGV[4])
  local changed = false
  for i = #els, 1, -1 do
    local e = els[i]
    if e[2] == 'r' or e[2] == 'R' and e[4] then
      e[2], e[4], changed = 'R', nil, true
    elseif e[2] == 'w' and e[3] == own then
      table.remove(els, i)
      changed = true
    end
  end
  if changed then
    wait_write(K, els, now)
  end
end
