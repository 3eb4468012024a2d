-- shared: what the scripts of a shared Lock (Shared) share, prepended to
-- each after lib.lua: acquire_shared.lua, extend_shared.lua,
-- restore_shared.lua and release_shared.lua. Nothing here runs on its own.
-- lib.lua describes a shared key's value. Every entry's deadline is the
-- node's clock plus a time to live, as PX would set it, so a share expires
-- by the node's clock and by no client's. A shared Lock has no owner: its
-- holder's prefix is its own.

-- shared_from: the live entries a script that writes key K starts from,
-- for a write of prefix P's Lock of generation gen; or nil and the reply
-- when it must not write: 2 when the Lock's refusals key refuses the
-- generation (late.lua), 7 when live permits hold the key (permits.lua),
-- false when an exclusive Lock does. Expired permits are absent.
local function shared_from(K, v, P, gen, now)
  if late_refused(redis.call('GET', late_key), gen) then
    return nil, 2
  end
  if not v or string.sub(v, 1, 1) == '!' then
    return {}
  end
  local c = string.sub(v, 1, 1)
  if c ~= '^' and c ~= '#' then
    return nil, false
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

-- shared_write: write els, live at now, under key K after head ("^", or
-- for permits "#", the count and ","), and report whether a Lock's entry
-- is among them. Without one the key is deleted: nothing of the shared
-- state (nor the permits' count) is left behind.
local function shared_write(K, els, now, head)
  local parts, last = {}, 0
  for _, e in ipairs(els) do
    parts[#parts + 1] = e[3] or string.format('%d', e[1]) .. '=' .. e[2]
    last = math.max(last, e[1])
  end
  if #parts == 0 then
    drop(K)
    return false
  end
  redis.call('SET', K, head .. table.concat(parts, ','), 'PX', last - now)
  return true
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
-- ARGV and the replies are release_shared.lua's; the caller leaves the
-- refusal of the Lock's writes (late_leave).
local function shared_release(K, kind, find, every)
  local P, limit = ARGV[1], tonumber(ARGV[2])
  local v = redis.call('GET', K)
  if not v or string.sub(v, 1, 1) == '!' then
    return 0
  end
  local head = string.match(v, '^%^') or string.match(v, '^#%d+,')
  if string.sub(v, 1, 1) ~= kind or not head then
    return -1 -- another kind of Lock holds the key
  end
  if limit == 0 then
    -- The common Release: this Lock's entry alone is there (one "="),
    -- and live, since the key lives as long as its last entry: the key
    -- goes, as the general path below would leave it.
    local at = string.find(v, '=', 1, true)
    local sep = kind == '^' and '=' or '/'
    local mine = at and string.find(v, sep .. P, at, true)
    if mine and not string.find(v, '=', at + 1, true) and (mine == at) == (kind == '^') then
      drop(K)
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
  if not i then
    return 0
  end
  table.remove(els, i)
  local left = shared_write(K, els, now, head)
  if limit == 0 and (every or not left) then
    shared_announce(K)
  end
  return 1
end
