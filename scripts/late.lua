-- late: the first part of every script by which a Lock writes or deletes
-- its keys (docs/late-writes.md), prepended to each before anything else.
-- The engine sends a pair before the script's own keys and arguments
-- (Op.Refusals in internal/engine), which this part takes off KEYS and
-- ARGV, so that what follows reads its own as before:
-- KEYS[1]  the Lock's refusals key (RefusalsKey in internal/script): "!",
--          the highest generation of the Lock's writes it refuses, ":" and
--          the node-clock millisecond at which it expires
-- ARGV[1]  a node-clock millisecond, this node's own: for a write, its
--          deadline, past which the write changes nothing
--          (late_write.lua); for a delete, the latest deadline of the
--          Lock's writes sent to this node, 0 when none: until then a copy
--          of one may still land, and the delete leaves what refuses it
--          (late_leave)
-- A write that reached the node after its deadline, however it was held
-- up (in the network, sent again, in a stopped node's socket, behind a hot
-- key), changes nothing. So a refusal has to live only until the deadline
-- of the writes it refuses, by the same clock, and a delete made after
-- that deadline is a plain delete.
local late_key = table.remove(KEYS, 1)
local late_at = tonumber(table.remove(ARGV, 1))
local late_now -- the node's clock in milliseconds, once late_write.lua read it

local function late_fmt(n)
  return string.format('%d', n)
end

-- late_refused: whether r, the Lock's refusals key's value (or false),
-- refuses the Lock's writes of generation gen: a delete of the Lock ran
-- on this node after they were sent.
local function late_refused(r, gen)
  local g = r and tonumber(string.match(r, '^!(%d+)'))
  return g and g >= tonumber(gen) or false
end

-- late_leave: a delete of the Lock whose refusals key is R, whose writes
-- up to generation gen were sent to this node, the latest with deadline
-- at: until at (by this node's clock, PXAT) a copy of one may still land,
-- and R refuses it; past at nothing is left, as no copy can land any more.
-- An earlier refusal is raised, never lowered nor shortened: a delete that
-- lands after a later one of the same Lock changes nothing of it.
local function late_leave(R, gen, at)
  -- One assignment a line: gopher-lua (the simulator's Lua) loses a
  -- parameter reassigned with another in one statement.
  at = tonumber(at)
  gen = tonumber(gen)
  if at <= 0 then
    return
  end
  local old = redis.call('SET', R, '!' .. late_fmt(gen) .. ':' .. late_fmt(at), 'PXAT', at, 'GET')
  if old then
    local g, a = string.match(old, '^!(%d+):(%d+)$')
    local og = tonumber(g)
    local oat = tonumber(a)
    if og and (og > gen or oat > at) then
      local ng = math.max(gen, og)
      local nat = math.max(at, oat)
      redis.call('SET', R, '!' .. late_fmt(ng) .. ':' .. late_fmt(nat), 'PXAT', nat)
    end
  end
end
