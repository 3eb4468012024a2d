-- lib: what the scripts that write a lock key share, prepended to each
-- (acquire, acquire_fenced, handover, release, restore). Nothing here runs
-- on its own.
--
-- A tombstone (left by release.lua) is "!" and up to eight entries
-- "tag:gen" joined by ",": tag is the first 16 hex digits of the SHA1 of a
-- Lock's prefix, gen the highest generation of that Lock's writes it
-- refuses. Every script reads it as an absent key, except for the writes it
-- names.
--
-- A chained value (take.lua, after an owner's takeover that may still be
-- rolled back) is the head, the taking Lock's own value, followed by
-- elements "|deadline:value": the value it replaced and the node-clock
-- millisecond at which that value (with what follows it) would have
-- expired. Deadlines never rise along the chain.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function tomb_tag(prefix)
  return string.sub(redis.sha1hex(prefix), 1, 16)
end

-- tomb_refuses: whether tombstone v refuses a write of prefix's Lock of
-- generation gen (its own or an earlier one's).
local function tomb_refuses(v, prefix, gen)
  if not string.find(v, ':', 1, true) then
    return false -- no tombstone entry: spare the hash
  end
  local tag = tomb_tag(prefix)
  for t, g in string.gmatch(v, '(%x+):(%d+)') do
    if t == tag and tonumber(g) >= tonumber(gen) then
      return true
    end
  end
  return false
end

-- tomb_leave: put under key K a tombstone against prefix's writes up to
-- generation gen, living at least ms milliseconds. old is the tombstone
-- there (false otherwise): its entries are kept, the Lock's own raised,
-- never lowered, and its life never shortened.
local function tomb_leave(K, old, prefix, gen, ms)
  local tag = tomb_tag(prefix)
  local top, life = tonumber(gen), tonumber(ms)
  local others = {}
  if old then
    for t, g in string.gmatch(old, '(%x+):(%d+)') do
      if t == tag then
        top = math.max(top, tonumber(g))
      elseif #others < 7 then
        others[#others + 1] = t .. ':' .. g
      end
    end
    local ok, pttl = pcall(redis.call, 'PTTL', K)
    if ok and pttl > life then
      life = pttl
    end
  end
  table.insert(others, 1, tag .. ':' .. string.format('%d', top))
  redis.call('SET', K, '!' .. table.concat(others, ','), 'PX', life)
end

-- chain_split: the head of value v and its chain ('' when none), which
-- starts with "|".
local function chain_split(v)
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
-- replaced, with its own expiry; delete the key when that has passed.
-- Returns whether a value was put back.
local function chain_restore(K, els)
  local dl = els[1][1]
  local v = els[1][2] .. chain_join(els, 2)
  if not dl then
    redis.call('SET', K, v, 'KEEPTTL')
    return true
  end
  local left = dl - now_ms()
  if left <= 0 then
    redis.call('DEL', K)
    return false
  end
  redis.call('SET', K, v, 'PX', left)
  return true
end

-- A key taken shared (shared.lua) holds "^" and entries "deadline=item"
-- joined by ",": item is a shared Lock's value, or "!tag:gen", a
-- tombstone's entry (above) kept while shared Locks hold the key; deadline
-- is the node-clock millisecond at which the entry expires. The key lives
-- as long as its last entry. A key taken by permits (permits.lua) holds
-- "#", the count, "," and the same entries, a permit's item being its slot,
-- "/" and its Lock's value. A Lock's value never holds ":", so tomb_refuses
-- reads the tombstone entries alone.

-- shared_live: the entries of shared value v (or a permits' value) still
-- live at node-clock millisecond now, each {deadline, item, text} (text as
-- v spells the entry, for shared_write to copy), and the milliseconds until
-- the last Lock's entry expires (0 when none is live: then the key is
-- absent to any Lock, as a tombstone is).
local function shared_live(v, now)
  local out, left = {}, 0
  for text, dl, item in string.gmatch(v, '((%d+)=([^,]+))') do
    dl = tonumber(dl)
    if dl > now then
      out[#out + 1] = {dl, item, text}
      if string.sub(item, 1, 1) ~= '!' then
        left = math.max(left, dl - now)
      end
    end
  end
  return out, left
end
