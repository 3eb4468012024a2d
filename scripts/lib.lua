-- lib: what the scripts that write a lock key share, prepended to each
-- (acquire, acquire_fenced, handover, release, restore, and the shared and
-- permit scripts). Nothing here runs on its own.
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

-- A holder's value may carry tombstone entries after its own text (and its
-- chain): ",", the node-clock millisecond until which they must refuse
-- (the last of their deadlines), and a tombstone of them
-- ("!tag:gen,tag:gen"). An acquire that takes the key over a tombstone
-- carries its entries, and a delete that finds another holder's value adds
-- its own, so that a late write of a Lock whose delete ran is refused
-- whoever held the key since, until the holder's own delete leaves them in
-- its tombstone, which lives until that deadline at least. At most eight
-- are carried, the latest added first. A Lock's value never holds ",".
-- No deadline carried, and no tombstone's remaining life, is ever more
-- than tombstoneTTL (2 s, clock.go) past the node's now: a delete asks for
-- min(ttl, 2 s), and every deadline here is a delete's now plus that, or
-- the longest of such deadlines. The fast paths rely on it
-- (acquire_fast.lua, release_fast.lua, tombBoundMs): a value of a TTL of
-- 2 s or more written now outlives whatever it carries, and a tombstone of
-- 2 s left now outlives what it takes over, without reading the clock.

-- carry_split: the value v without what it carries, and the carried text
-- ('' when none), which starts with ",".
local function carry_split(v)
  local i = string.find(v, ',', 1, true)
  if not i then
    return v, ''
  end
  return string.sub(v, 1, i - 1), string.sub(v, i)
end

-- tomb_entries: the entries of tombstone v, or of carried text, each
-- {tag, gen}, in order.
local function tomb_entries(v)
  local out = {}
  for t, g in string.gmatch(v, '(%x+):(%d+)') do
    out[#out + 1] = {t, tonumber(g)}
  end
  return out
end

-- carry_read: the deadline and the entries of carried text c (0 and none
-- for '').
local function carry_read(c)
  local dl = tonumber(string.match(c, '^,(%d+)!'))
  if not dl then
    return 0, {}
  end
  local bang = string.find(c, '!', 1, true)
  return dl, tomb_entries(string.sub(c, bang))
end

-- carry_add: raise in entries the one against tag's writes up to gen, or
-- put it first; at most eight are kept, the latest put.
local function carry_add(entries, tag, gen)
  gen = tonumber(gen)
  for _, e in ipairs(entries) do
    if e[1] == tag then
      e[2] = math.max(e[2], gen)
      return
    end
  end
  table.insert(entries, 1, {tag, gen})
  entries[9] = nil
end

-- carry_text: entries that must refuse until node-clock millisecond dl, as
-- a value carries them.
local function carry_text(dl, entries)
  if #entries == 0 then
    return ''
  end
  local parts = {}
  for i, e in ipairs(entries) do
    parts[i] = e[1] .. ':' .. string.format('%d', e[2])
  end
  return ',' .. string.format('%d', dl) .. '!' .. table.concat(parts, ',')
end

-- carry_life: how long a value of the holder's own that carries text
-- carried lives when written for ttl milliseconds: until the carried
-- deadline at least, or the entries would go with the value before they
-- are due (an Extend for less, a retry for less). The holder's own acts
-- alone use it, and the deadline is at most 2 s from the delete it came
-- from: never others' deletes, which would keep a crashed holder's key.
local function carry_life(carried, ttl)
  local dl = tonumber(string.match(carried, '^,(%d+)!'))
  if not dl then
    return ttl
  end
  local ok, now = pcall(now_ms)
  if not ok then
    return ttl
  end
  return math.max(tonumber(ttl), dl - now)
end

-- carry_refuses: whether entries refuse a write of prefix's Lock of
-- generation gen.
local function carry_refuses(entries, prefix, gen)
  if #entries == 0 then
    return false
  end
  local tag = tomb_tag(prefix)
  for _, e in ipairs(entries) do
    if e[1] == tag and e[2] >= tonumber(gen) then
      return true
    end
  end
  return false
end

-- tomb_leave: put under key K a tombstone against prefix's writes up to
-- generation gen, living at least ms milliseconds, and against what
-- entries (tomb_entries'; may be nil) refuse, living until node-clock
-- millisecond dl at least (read at now). old is the tombstone there (false
-- otherwise): its entries are kept, the Lock's own raised, never lowered,
-- and its life never shortened. At most eight entries are kept: the
-- Lock's own, then old's, then entries'.
local function tomb_leave(K, old, prefix, gen, ms, entries, dl, now)
  local tag = tomb_tag(prefix)
  local life = tonumber(ms)
  local order, top = {tag}, {[tag] = tonumber(gen)}
  local function keep(t, g)
    g = tonumber(g)
    if top[t] then
      top[t] = math.max(top[t], g)
    elseif #order < 8 then
      order[#order + 1] = t
      top[t] = g
    end
  end
  if old then
    for t, g in string.gmatch(old, '(%x+):(%d+)') do
      keep(t, g)
    end
    local ok, pttl = pcall(redis.call, 'PTTL', K)
    if ok and pttl > life then
      life = pttl
    end
  end
  if entries and #entries > 0 then
    for _, e in ipairs(entries) do
      keep(e[1], e[2])
    end
    life = math.max(life, dl - now)
  end
  local parts = {}
  for i, t in ipairs(order) do
    parts[i] = t .. ':' .. string.format('%d', top[t])
  end
  redis.call('SET', K, '!' .. table.concat(parts, ','), 'PX', life)
end

-- A refusal must live until its own deadline, but a value carrying it
-- lives as long as its holder: a holder that stops renewing expires on
-- the node's clock with what it carried. Where a refusal would outlive
-- the value that carries it, it is also kept under the key's side
-- tombstone, K followed by sideSuffix (scripts.go), a
-- tombstone of its own that every write of a Lock's value reads first
-- (side_refuses; acquire_fast.lua reads its name too). It holds at most
-- eight entries and lives as long as the longest lived.

local function side_key(K)
  return K .. ':redlock:tomb'
end

-- side_refuses: whether the side tombstone of key K refuses a write of
-- prefix's Lock of generation gen.
local function side_refuses(K, prefix, gen)
  local ok, s = pcall(redis.call, 'GET', side_key(K))
  return ok and s and tomb_refuses(s, prefix, gen) or false
end

-- side_keep: entries (tomb_entries') must refuse until node-clock
-- millisecond dl, read at now, and the value carrying them under key K
-- lives life milliseconds: if they outlive it, the side tombstone keeps
-- them until dl too.
local function side_keep(K, entries, dl, life, now)
  if #entries == 0 or dl - now <= life then
    return
  end
  local S = side_key(K)
  local ok, old = pcall(redis.call, 'GET', S)
  local order, top = {}, {}
  local function keep(t, g)
    g = tonumber(g)
    if top[t] then
      top[t] = math.max(top[t], g)
    elseif #order < 8 then
      order[#order + 1] = t
      top[t] = g
    end
  end
  for _, e in ipairs(entries) do
    keep(e[1], e[2])
  end
  local left = dl - now
  if ok and old then
    for t, g in string.gmatch(old, '(%x+):(%d+)') do
      keep(t, g)
    end
    local okp, pttl = pcall(redis.call, 'PTTL', S)
    if okp and pttl > left then
      left = pttl
    end
  end
  local parts = {}
  for i, t in ipairs(order) do
    parts[i] = t .. ':' .. string.format('%d', top[t])
  end
  pcall(redis.call, 'SET', S, '!' .. table.concat(parts, ','), 'PX', left)
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
-- replaced, with its own expiry, carrying entries (tomb_entries') that
-- must refuse until node-clock millisecond dl. Returns whether a value was
-- put back: nothing is changed when what was replaced has expired since.
local function chain_restore(K, els, entries, dl)
  local v = els[1][2] .. chain_join(els, 2) .. carry_text(dl, entries)
  if not els[1][1] then
    redis.call('SET', K, v, 'KEEPTTL')
    return true
  end
  local now = now_ms()
  local left = els[1][1] - now
  if left <= 0 then
    return false
  end
  redis.call('SET', K, v, 'PX', left)
  side_keep(K, entries, dl, left, now)
  return true
end

-- lock_value: whether v is what a Lock writes (a holder's value, shares,
-- permits), which alone may carry entries: never a value that something
-- else keeps under the name, such as the restart guard's marker.
local function lock_value(v)
  local kind = string.sub(v, 1, 1)
  if kind == '^' or kind == '#' then
    return true
  end
  local head = chain_split((carry_split(v)))
  return string.match(head, '^[%w~]+%.%d+$') ~= nil
end

-- carry_into: a delete of prefix's Lock, whose writes up to generation gen
-- were sent to the nodes, found another holder's value v under key K: the
-- value carries an entry that refuses them, so that the holder's own
-- delete leaves it in its tombstone. A key taken shared or by permits
-- (below) keeps it as one of its tombstone entries, for ms milliseconds.
-- The key keeps its expiry: the holder's claim ends when it would have,
-- however many Locks' deletes find it (a holder that crashed while others
-- contend for the key must expire); where it expires before the entry's
-- ms, the side tombstone keeps the entry (side_keep).
local function carry_into(K, v, prefix, gen, ms)
  if not lock_value(v) then
    return -- another program's value under the name: left alone
  end
  local ok, now = pcall(now_ms)
  if not ok then
    return -- an ACL without TIME: the entry's deadline cannot be kept
  end
  local okp, pttl = pcall(redis.call, 'PTTL', K)
  if okp and pttl >= 0 then
    side_keep(K, {{tomb_tag(prefix), tonumber(gen)}}, now + tonumber(ms), pttl, now)
  end
  local kind = string.sub(v, 1, 1)
  if kind == '^' or kind == '#' then
    redis.call('SET', K, v .. ',' .. string.format('%d', now + tonumber(ms)) .. '=!' .. tomb_tag(prefix) .. ':' ..
      string.format('%d', tonumber(gen)), 'KEEPTTL')
    return
  end
  local body, carried = carry_split(v)
  local dl, entries = carry_read(carried)
  carry_add(entries, tomb_tag(prefix), gen)
  redis.call('SET', K, body .. carry_text(math.max(dl, now + tonumber(ms)), entries), 'KEEPTTL')
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
