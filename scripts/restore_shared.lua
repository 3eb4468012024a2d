-- restore_shared: restore.lua for a shared Lock: put this Lock's entry
-- (shared.lua) back on a node that lost it, after a quorum of other nodes
-- confirmed in the same Extend that it still holds. Never where an
-- exclusive Lock holds the key, nor once the Lock's delete ran here (its
-- refusals key, late.lua).
-- KEYS[1]  the lock key
-- ARGV[1..4] as for restore.lua
-- Returns  1 when the entry was absent and now holds ARGV[1], 0 when it is
--            there (any generation) or an exclusive Lock holds the key, 2
--            when the Lock's refusals key refuses this generation; nothing is
--            changed but on 1.
local K = KEYS[1]
local now = now_ms()
local els, code = shared_from(K, redis.call('GET', K), ARGV[3], tonumber(ARGV[4]), now)
if not els then
  if code == 2 then
    return 2
  end
  return 0
end
if shared_find(els, ARGV[3]) then
  return 0
end
els[#els + 1] = {now + tonumber(ARGV[2]), ARGV[1]}
shared_write(K, els, now, '^')
return 1
