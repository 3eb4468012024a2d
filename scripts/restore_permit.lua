-- restore_permit: restore.lua for a permit: put this Lock's entry
-- (permits.lua) back in its slot on a node that lost it, after a quorum of
-- other nodes confirmed in the same Extend that it still holds. Never where
-- another Lock holds the slot, another kind of Lock or permits of another
-- count hold the key, nor once the Lock's delete ran here (its refusals
-- key, late.lua).
-- KEYS[1]  the key
-- ARGV[1..4] as for restore.lua
-- ARGV[5]  the Lock's slot
-- ARGV[6]  the count n
-- Returns  1 when the entry was absent and now holds ARGV[1] in the slot, 0
--            when the Lock's entry is there (any slot, any generation) or
--            the slot or the key is another's, 2 when the Lock's refusals key
--            refuses this generation; nothing is changed but on 1.
local K = KEYS[1]
local P, gen, n, want = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[6]), tonumber(ARGV[5])
local now = now_ms()
local v = redis.call('GET', K)
if late_refused(redis.call('GET', late_key), gen) then
  return 2
end
local els = {}
if v and string.sub(v, 1, 1) ~= '!' then
  if string.sub(v, 1, 1) ~= '#' then
    return 0
  end
  local left
  els, left = shared_live(v, now)
  if left > 0 and permit_count(v) ~= n then
    return 0
  end
end
local mine, _, _, taken = permit_find(els, P, now)
if mine or taken[want] then
  return 0
end
els[#els + 1] = permit_entry(want, ARGV[1], ARGV[2], now)
shared_write(K, els, now, permit_head(n))
return 1
