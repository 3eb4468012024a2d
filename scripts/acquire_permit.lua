-- acquire_permit: give this Lock a slot of the key's permits on this node
-- (permits.lua): the preferred slot if it is free, else the slot an earlier
-- attempt of the same Lock holds here, else the lowest free one. Nodes that
-- find the same state give the same slot; the Lock holds when a quorum
-- gave it the same one (the round counts by slot).
-- KEYS[1]  the key
-- ARGV[1..4] as for take.lua; the holder's prefix is the Lock's own
-- ARGV[5]  the count n
-- ARGV[6]  the preferred slot, -1 for none
-- Returns  {1, slot} when this Lock's entry now holds slot, living ARGV[2]
--            milliseconds,
--          {0, pttl} when every slot is another Lock's (pttl: until the
--            first of them expires),
--          {2} when this call is stale and changes nothing (as for take.lua:
--            a later generation of the entry, or the Lock's refusals key),
--          {7, found} when the key is held otherwise (nothing is changed):
--            found is 0 for an exclusive Lock, -1 for shared Locks, and m
--            for permits of another count m.
-- permit_pick: the slot to give, of n, where taken marks the other
-- permits' slots and own is the slot an earlier attempt of this Lock holds
-- here (nil if none): the preferred slot ARGV[6] if free, else own, else
-- the lowest free one; nil when every slot is taken.
local function permit_pick(taken, n, own)
  local pref = tonumber(ARGV[6])
  if pref >= 0 and pref < n and not taken[pref] then
    return pref
  end
  if own then
    return own
  end
  for s = 0, n - 1 do
    if not taken[s] then
      return s
    end
  end
end

local K = KEYS[1]
local P, gen, n = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local now = now_ms()
local v = redis.call('GET', K)
if late_refused(redis.call('GET', late_key), gen) then
  return {2}
end
if v and permit_count(v) == n and not string.find(v, '!', 1, true) and not string.find(v, '/' .. P, 1, true) then
  -- The common case: permits of this count hold the key, none of them
  -- this Lock's, no entry an earlier version left. When none has expired, the
  -- new entry joins them as they are, without rewriting them.
  local taken, soonest, last, expired = {}, nil, 0, false
  for dl, s in string.gmatch(v, '(%d+)=(%d+)/') do
    dl = tonumber(dl)
    if dl <= now then
      expired = true
      break
    end
    taken[tonumber(s)] = true
    last = math.max(last, dl)
    if not soonest or dl - now < soonest then
      soonest = dl - now
    end
  end
  if not expired then
    local slot = permit_pick(taken, n, nil)
    if not slot then
      return {0, soonest or -1}
    end
    local e = permit_entry(slot, ARGV[1], ARGV[2], now)
    redis.call('SET', K, v .. ',' .. string.format('%d', e[1]) .. '=' .. e[2], 'PX', math.max(last, e[1]) - now)
    return {1, slot}
  end
end
local els = {}
if v and string.sub(v, 1, 1) ~= '!' then
  local c = string.sub(v, 1, 1)
  if c ~= '^' and c ~= '#' then
    return {7, 0}
  end
  local left
  els, left = shared_live(v, now)
  if left > 0 and c == '^' then
    return {7, -1}
  elseif left > 0 and permit_count(v) ~= n then
    return {7, permit_count(v)}
  end
end
local mine, slot, g, taken, soonest = permit_find(els, P, now)
if mine and g and g > gen then
  return {2}
end
if mine then
  slot = permit_pick(taken, n, slot)
else
  slot = permit_pick(taken, n, nil)
end
if not slot then
  return {0, soonest or -1}
end
local e = permit_entry(slot, ARGV[1], ARGV[2], now)
if mine then
  els[mine] = e
else
  els[#els + 1] = e
end
shared_write(K, els, now, permit_head(n))
return {1, slot}
