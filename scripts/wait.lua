-- wait: the waiting room of a lock key, prepended after lib.lua to the
-- scripts that read or write it: the exclusive acquires (with take.lua and
-- take_fair.lua), the shared acquire and announce.lua. Nothing here runs on
-- its own.
--
-- The waiting room of key K is the key K followed by waitSuffix
-- (announce.go; wait_key spells it). It starts with K, so an ACL that lets a client use K lets
-- it use the room, and on a Redis Cluster it lies in K's slot when K has a
-- {hash tag}. Its value is entries "deadline=kind id" joined by ",":
-- deadline is the node-clock millisecond at which the entry expires, id a
-- waiting Lock's prefix (an R entry's followed by "@" and the node-clock
-- millisecond until which it holds writers back, take_fair.lua), and kind
-- one of
--   w  an exclusive Lock waits for K: no new shared Lock is admitted;
--   r  a shared Lock waits behind a waiting exclusive one;
--   R  a shared Lock waited while an exclusive Lock held K (or took K
--      since it waited): it goes before the next exclusive Lock;
--   a  an r or R that was admitted here: it holds nobody back, and a
--      retry of the same Lock is admitted again.
-- A waiting Lock renews its entry while it waits and takes it out when it
-- stops (announce.lua); an exclusive Lock's own acquire takes it out where
-- it took the key. The entry of a waiter that was stopped, cut off or
-- killed expires by the node's clock. The key lives as long as its last entry. Every access is
-- under pcall: where the room cannot be used (an ACL that does not cover
-- it, a Cluster node where it lies in another slot than K), a script works
-- as if nobody waited.

-- wait_max is the most entries a room keeps: a waiter beyond them is not
-- recorded, and waits as if it were not there.
local wait_max = 1000

local function wait_key(K)
  return K .. ':redlock:wait'
end

-- wait_read: the entries of K's room live at node-clock millisecond now,
-- each {deadline, kind, id, due} (due: an R entry's, or nil); nil when the
-- room cannot be read.
local function wait_read(K, now)
  local ok, v = pcall(redis.call, 'GET', wait_key(K))
  if not ok then
    return nil
  end
  local out = {}
  if v then
    for dl, kind, id, due in string.gmatch(v, '(%d+)=(%a)([^,@]*)@?(%d*)') do
      dl = tonumber(dl)
      if dl > now then
        out[#out + 1] = {dl, kind, id, tonumber(due)}
      end
    end
  end
  return out
end

-- wait_write: put els, read at now, back as K's room, which lives as long
-- as its last entry; delete it when none is live.
local function wait_write(K, els, now)
  local parts, last = {}, 0
  for _, e in ipairs(els) do
    if e[1] > now then
      local due = ''
      if e[2] == 'R' and e[4] then
        due = '@' .. string.format('%d', e[4])
      end
      parts[#parts + 1] = string.format('%d', e[1]) .. '=' .. e[2] .. e[3] .. due
      last = math.max(last, e[1])
    end
  end
  if #parts == 0 then
    pcall(redis.call, 'DEL', wait_key(K))
  else
    pcall(redis.call, 'SET', wait_key(K), table.concat(parts, ','), 'PX', last - now)
  end
end

-- wait_find: the index in els of id's entry.
local function wait_find(els, id)
  for i, e in ipairs(els) do
    if e[3] == id then
      return i
    end
  end
end

-- wait_left: the milliseconds from now until the last entry of kind in
-- els expires, 0 when there is none.
local function wait_left(els, kind, now)
  local left = 0
  for _, e in ipairs(els) do
    if e[2] == kind then
      left = math.max(left, e[1] - now)
    end
  end
  return left
end

-- wait_put: give id's entry in els kind and a life of at least ms from
-- now, adding it unless the room is full; an R entry that stays R keeps
-- its due. Returns whether els changed.
local function wait_put(els, id, kind, ms, now)
  local i = wait_find(els, id)
  local dl = now + tonumber(ms)
  if i then
    local due
    if kind == 'R' and els[i][2] == 'R' then
      due = els[i][4]
    end
    els[i] = {math.max(els[i][1], dl), kind, id, due}
  elseif #els < wait_max then
    els[#els + 1] = {dl, kind, id}
  else
    return false
  end
  return true
end
