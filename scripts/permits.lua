-- permits: what the scripts of a permit (Permits) share, prepended to each
-- after lib.lua and shared.lua: acquire_permit.lua, extend_permit.lua,
-- restore_permit.lua and release_permit.lua. Nothing here runs on its own.
-- A key taken by permits holds "#", the count n, "," and entries
-- (lib.lua), one per permit: its slot (0 to n-1), "/" and its Lock's value.
-- Each slot is a lock of its own: a node gives a slot to one Lock at a
-- time, and a permit holds when a quorum of nodes gave its Lock the same
-- slot, so that at most n Locks hold (docs/permits.md). A permit's Lock has
-- no owner: its holder's prefix is its own.

-- permit_head: the head of a key taken by permits of count n.
local function permit_head(n)
  return '#' .. string.format('%d', n) .. ','
end

-- permit_count: the count of permits' value v, nil for another value.
local function permit_count(v)
  return tonumber(string.match(v, '^#(%d+),'))
end

-- permit_find: the index in els of prefix P's entry, its slot and its
-- generation; and the slots the other entries hold, and the milliseconds
-- until the first of them expires at now (nil when none).
local function permit_find(els, P, now)
  local mine, slot, gen, taken, soonest
  taken = {}
  for i, e in ipairs(els) do
    local item = e[2]
    local cut = string.find(item, '/', 1, true)
    if cut then
      local s, val = tonumber(string.sub(item, 1, cut - 1)), string.sub(item, cut + 1)
      if string.sub(val, 1, #P) == P then
        mine, slot, gen = i, s, tonumber(string.sub(val, #P + 1))
      else
        taken[s] = true
        if not soonest or e[1] - now < soonest then
          soonest = e[1] - now
        end
      end
    end
  end
  return mine, slot, gen, taken, soonest
end

-- permit_entry: the entry of value val in slot s, living ms from now.
local function permit_entry(s, val, ms, now)
  return {now + tonumber(ms), string.format('%d', s) .. '/' .. val}
end
