-- lib: what the scripts that write a lock key share, prepended to each
-- after late.lua (acquire, acquire_fenced, handover, release, restore, and
-- the shared and permit scripts). Nothing here runs on its own.
--
-- A chained value (take.lua, after an owner's takeover that may still be
-- rolled back) is the head, the taking Lock's own value, followed by
-- elements "|deadline:value": the value it replaced and the node-clock
-- millisecond at which that value (with what follows it) would have
-- expired. Deadlines never rise along the chain.
--
-- A value an earlier version of this library left may be a tombstone,
-- "!" and entries, which every script reads as an absent key, or a
-- holder's value followed by "," and entries, read as the value before
-- the ",". Neither is written any more.

local function now_ms()
  if late_now then
    return late_now
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- drop deletes key K.
local function drop(K)
  redis.call('DEL', K)
end

-- chain_split: the head of value v and its chain ('' when none), which
-- starts with "|". What an earlier version carried after a "," is cut.
local function chain_split(v)
  local c = string.find(v, ',', 1, true)
  if c then
    v = string.sub(v, 1, c - 1)
  end
  local i = string.find(v, '|', 1, true)
  if not i then
    return v, ''
  end
  return string.sub(v, 1, i - 1), string.sub(v, i)
end

-- chain_elements: the elements of chain c, each {deadline, value}; a
-- chain written by an earlier version, without deadlines, has deadline
-- false.
local function chain_elements(c)
  local out = {}
  for e in string.gmatch(c, '|([^|]+)') do
    local dl, rest = string.match(e, '^(%d+):(.*)$')
    if dl then
      out[#out + 1] = {tonumber(dl), rest}
    else
      out[#out + 1] = {false, e}
    end
  end
  return out
end

-- chain_join: elements back into a chain, from index i on.
local function chain_join(els, i)
  local parts = {}
  for k = i, #els do
    local e = els[k]
    if e[1] then
      parts[#parts + 1] = '|' .. string.format('%d', e[1]) .. ':' .. e[2]
    else
      parts[#parts + 1] = '|' .. e[2]
    end
  end
  return table.concat(parts)
end

-- chain_restore: put back under key K what the chain's first element
-- replaced, with its own expiry. Returns whether a value was put back:
-- nothing is changed when what was replaced has expired since.
local function chain_restore(K, els)
  local v = els[1][2] .. chain_join(els, 2)
  if not els[1][1] then
    redis.call('SET', K, v, 'KEEPTTL')
    return true
  end
  local left = els[1][1] - now_ms()
  if left <= 0 then
    return false
  end
  redis.call('SET', K, v, 'PX', left)
  return true
end

-- A key taken shared (shared.lua) holds "^" and entries "deadline=item"
-- joined by ",": item is a shared Lock's value; deadline is the
-- node-clock millisecond at which the entry expires. The key lives as long
-- as its last entry. A key taken by permits (permits.lua) holds "#", the
-- count, "," and the same entries, a permit's item being its slot, "/"
-- and its Lock's value. An entry an earlier version left, "!" and a
-- tombstone's entry, is no Lock's.

-- shared_live: the Locks' entries of shared value v (or a permits' value)
-- still live at node-clock millisecond now, each {deadline, item, text}
-- (text as v spells the entry, for shared_write to copy), and the
-- milliseconds until the last of them expires (0 when none is live: then
-- the key is absent to any Lock).
local function shared_live(v, now)
  local out, left = {}, 0
  for text, dl, item in string.gmatch(v, '((%d+)=([^,]+))') do
    dl = tonumber(dl)
    if dl > now and string.sub(item, 1, 1) ~= '!' then
      out[#out + 1] = {dl, item, text}
      left = math.max(left, dl - now)
    end
  end
  return out, left
end
