-- shared: what the scripts of a shared Lock (Shared) share, prepended to
-- each after lib.lua: acquire_shared.lua, extend_shared.lua,
-- restore_shared.lua and release_shared.lua. Nothing here runs on its own.
-- lib.lua describes a shared key's value. Every entry's deadline is the
-- node's clock plus a time to live, as PX would set it, so a share expires
-- by the node's clock and by no client's. A shared Lock has no owner: its
-- holder's prefix is its own.

-- shared_tombs: the entries of tombstone v under key K, as shared entries
-- that live as long as the tombstone does.
local function shared_tombs(K, v, now)
  local out = {}
  local ok, pttl = pcall(redis.call, 'PTTL', K)
  if ok and pttl > 0 then
    for t, g in string.gmatch(v, '(%x+):(%d+)') do
      out[#out + 1] = {now + pttl, '!' .. t .. ':' .. g}
    end
  end
  return out
end

-- shared_from: the live entries a script that writes key K starts from,
-- for a write of prefix P's Lock of generation gen; or nil and the reply
-- when it must not write: 2 when a tombstone refuses the generation, 7
-- when live permits hold the key (permits.lua), false when an exclusive
-- Lock does. Expired permits are absent: their tombstone entries are kept.
local function shared_from(K, v, P, gen, now)
  if side_refuses(K, P, gen) then
    return nil, 2
  end
  if not v then
    return {}
  end
  local c = string.sub(v, 1, 1)
  if c ~= '!' and c ~= '^' and c ~= '#' then
    return nil, false
  end
  if tomb_refuses(v, P, gen) then
    return nil, 2
  end
  if c == '!' then
    return shared_tombs(K, v, now)
  end
  local els, left = shared_live(v, now)
  if c == '#' then
    if left > 0 then
      return nil, 7
    end
    return els, 0
  end
  return els, left
end

-- shared_find: the index in els of prefix P's entry, and its generation.
local function shared_find(els, P)
  for i, e in ipairs(els) do
    if string.sub(e[2], 1, #P) == P then
      return i, tonumber(string.sub(e[2], #P + 1))
    end
  end
end

-- shared_tomb: raise in els the tombstone entry against prefix P's writes
-- up to generation gen to live at least ms from now.
local function shared_tomb(els, P, gen, ms, now)
  local tag = tomb_tag(P)
  local g, dl = tonumber(gen), now + tonumber(ms)
  for i, e in ipairs(els) do
    local t, og = string.match(e[2], '^!(%x+):(%d+)$')
    if t == tag then
      els[i] = {math.max(e[1], dl), '!' .. t .. ':' .. string.format('%d', math.max(g, tonumber(og)))}
      return
    end
  end
  els[#els + 1] = {dl, '!' .. tag .. ':' .. string.format('%d', g)}
end

-- shared_write: write els, live at now, under key K after head ("^", or
-- for permits "#", the count and ","), and report whether a Lock's entry
-- is among them. Without one, the key becomes the tombstone of its
-- tombstone entries, or is deleted: nothing of the shared state (nor the
-- permits' count) is left behind. At most eight tombstone entries are
-- kept, the longest lived, as tomb_leave keeps eight.
local function shared_write(K, els, now, head)
  local parts, tombs, last = {}, {}, 0
  for _, e in ipairs(els) do
    if string.sub(e[2], 1, 1) == '!' then
      tombs[#tombs + 1] = e
    else
      parts[#parts + 1] = e[3] or string.format('%d', e[1]) .. '=' .. e[2]
      last = math.max(last, e[1])
    end
  end
  if #tombs > 8 then
    table.sort(tombs, function(a, b) return a[1] > b[1] end)
  end
  local readers = #parts > 0
  local items = {}
  for i = 1, math.min(#tombs, 8) do
    local e = tombs[i]
    last = math.max(last, e[1])
    if readers then
      parts[#parts + 1] = e[3] or string.format('%d', e[1]) .. '=' .. e[2]
    else
      items[#items + 1] = string.sub(e[2], 2)
    end
  end
  if readers then
    redis.call('SET', K, head .. table.concat(parts, ','), 'PX', last - now)
  elseif #items > 0 then
    redis.call('SET', K, '!' .. table.concat(items, ','), 'PX', last - now)
  else
    -- Nothing is left (a caller always leaves an entry: this cannot
    -- happen); the key goes at once.
    redis.call('PEXPIRE', K, 1)
  end
  return readers
end

-- shared_announce announces a Release of key K on its release channel
-- (ChannelPrefix in internal/waiting), as release.lua does.
local function shared_announce(K)
  pcall(redis.call, 'PUBLISH', 'redlock:released:' .. K, '')
end

-- shared_release: what release.lua does, for the entry of the Lock whose
-- prefix is ARGV[1] in key K taken with kind ("^" shared, "#" permits):
-- find(els) returns the index of that entry in els and its generation.
-- The Release (limit 0) that takes it out is announced on the key's
-- release channel when every is set, else only when it was the last.
-- ARGV and the replies are release_shared.lua's.
local function shared_release(K, kind, find, every)
  local P, limit = ARGV[1], tonumber(ARGV[2])
  local v = redis.call('GET', K)
  if not v or string.sub(v, 1, 1) == '!' then
    tomb_leave(K, v, P, ARGV[3], ARGV[4])
    return 0
  end
  local head = string.match(v, '^%^') or string.match(v, '^#%d+,')
  if string.sub(v, 1, 1) ~= kind or not head then
    carry_into(K, v, P, ARGV[3], ARGV[4]) -- another kind of Lock holds the key
    return -1
  end
  if limit == 0 then
    -- The common Release: this Lock's entry alone is there (one "=", no
    -- tombstone entry), and live, since the key lives as long as its
    -- last entry. The key becomes this Lock's tombstone, as the general
    -- path below would leave it.
    local at = string.find(v, '=', 1, true)
    local sep = kind == '^' and '=' or '/'
    local mine = at and string.find(v, sep .. P, at, true)
    if mine and not string.find(v, '=', at + 1, true) and (mine == at) == (kind == '^') then
      redis.call('SET', K, '!' .. tomb_tag(P) .. ':' .. string.format('%d', tonumber(ARGV[3])), 'PX', ARGV[4])
      shared_announce(K)
      return 1
    end
  end
  local now = now_ms()
  local els = shared_live(v, now)
  local i, g = find(els)
  if i and limit > 0 and g and g > limit then
    return 2
  end
  if i then
    table.remove(els, i)
  end
  shared_tomb(els, P, ARGV[3], ARGV[4], now)
  local left = shared_write(K, els, now, head)
  if not i then
    return 0
  end
  if limit == 0 and (every or not left) then
    shared_announce(K)
  end
  return 1
end
