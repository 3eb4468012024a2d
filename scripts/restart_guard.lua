-- restart_guard: the prologue of a guarded acquire (WithRestartGuard), run
-- in the same atomic step as the acquire script that follows it. It keeps a
-- node that may have lost lock keys from voting until the guard has passed,
-- timed by the node's own clock so every client agrees on when that is.
-- The node's boot marker holds the server's run_id and the moment (node
-- clock, milliseconds) a guarded acquire first saw the node with its current
-- data. The marker is missing after FLUSHALL, a restart without persistence
-- or a failover to a replica that lacks it, and names another run_id after
-- any restart or failover: then the node is new from now. Anything else
-- under the marker's name (a value some other writer put there: a Client
-- refuses to lock that name) is never written over: the node then counts as
-- within its guard until that value is gone.
-- guard_fenced  a local set before the prologue (scripts.go): whether the
--               acquire that follows is fenced, which shapes the reply
-- KEYS[#KEYS]  the boot marker (redlock:boot)
-- ARGV[#ARGV]  the guard in milliseconds
-- Returns (only when the node is within its guard, nothing else runs)
--          3, or {3, "0", seconds, microseconds} for the fenced acquire.
local guard_marker = KEYS[#KEYS]
local guard_ms = tonumber(ARGV[#ARGV])
local guard_t = redis.call('TIME')
local guard_now = tonumber(guard_t[1]) * 1000 + math.floor(tonumber(guard_t[2]) / 1000)
local guard_run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') or '?'
local guard_since
local guard_m = redis.call('GET', guard_marker)
if guard_m then
  local run, since = string.match(guard_m, '^(%x+):(%d+)$')
  if not run then
    guard_since = guard_now -- not a marker: left alone, the guard holds
  elseif run == guard_run then
    guard_since = tonumber(since)
  end
end
if not guard_since then
  guard_since = guard_now
  redis.call('SET', guard_marker, guard_run .. ':' .. string.format('%d', guard_now))
end
if guard_now - guard_since < guard_ms then
  if guard_fenced then
    return {3, '0', guard_t[1], guard_t[2]}
  end
  return 3
end
