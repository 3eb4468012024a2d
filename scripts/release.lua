-- release: delete our key, whichever of our generations it holds, up to a
-- limit: a rollback deletes only its own attempt's value or an earlier one,
-- never the value of a later attempt that may since have been counted.
-- Runs after lib.lua; release_key(K) does it for key K, and the script's
-- last line (in scripts.go) calls it for KEYS[1], or release_all.lua for
-- every key of a Lock of several keys.
-- KEYS[1]  the lock key
-- ARGV[1]  the Lock's prefix (as for extend.lua): another Lock's value, even
--          the same owner's, is never deleted
-- ARGV[2]  the highest generation to delete; 0 deletes any of ours (a
--          Release)
-- ARGV[3]  the Lock's highest generation sent to the nodes, and ARGV[4]
--          how long to refuse its writes up to it, in milliseconds
-- Returns  1 when our value was deleted (or, by a rollback, replaced by what
--            our attempt had taken over, or taken out of the chain of
--            another Lock of the owner that took it over),
--          0 when the key was absent (expired, never set on this node, or a
--            tombstone),
--         -1 when another holder's value is there (nothing of it changes
--            but the entry below),
--          2 when a later generation of ours is there (nothing is changed).
-- Whatever is found, what stays refuses the Lock's writes up to ARGV[3]
-- for ARGV[4] milliseconds: any write that left the client may
-- still be in the network (a copy go-redis sent again, a TCP segment late),
-- and without it would land after this delete and keep the key for its
-- whole TTL. Where the key is absent or ours, that is a tombstone
-- (lib.lua), or the existing one raised to ARGV[3] and kept at least as
-- long; where another holder's value is, an entry it carries (carry_into),
-- which its own delete leaves in its tombstone. A tombstone of other Locks
-- keeps their entries, and our value's carried entries stay in ours.
-- Chains (take.lua): a rollback of an attempt that took over another Lock of
-- the owner puts that Lock's value back, with that value's own expiry; a
-- rollback of an attempt that another Lock of the owner took over since
-- takes its element out of that Lock's chain; a Release of such a Lock
-- (limit 0) cuts the chain at its element, dropping what it had taken over
-- too: its takeover was final. Either way nothing of a Lock whose Release
-- or rollback ran is ever put back.
-- A Release (limit 0) that deletes the key is announced on the key's release
-- channel, to wake the clients waiting for the key; a rollback is not, so
-- that the heads of several processes do not all wake to split the next
-- vote. A node that refuses PUBLISH (an ACL without channel rights) still
-- deletes, and its waiters fall back to polling.
local function release_key(K)
  local P = ARGV[1]
  local limit = tonumber(ARGV[2])
  local v = redis.call('GET', K)
  if not v or string.sub(v, 1, 1) == '!' then
    tomb_leave(K, v, P, ARGV[3], ARGV[4])
    return 0
  end
  local kind = string.sub(v, 1, 1)
  if kind == '^' or kind == '#' then
    carry_into(K, v, P, ARGV[3], ARGV[4]) -- shares or permits hold the key
    return -1
  end
  local function stale(value)
    local gen = tonumber(string.match(value, '^%d+', #P + 1))
    return limit > 0 and gen and gen > limit
  end
  local body, carried = carry_split(v)
  local head, chain = chain_split(body)
  if string.sub(head, 1, #P) == P then
    if stale(head) then
      return 2
    end
    local dl, entries = carry_read(carried)
    local now = 0
    if carried ~= '' or (limit > 0 and chain ~= '') then
      now = now_ms()
    end
    if limit > 0 and chain ~= '' then
      local mine = {}
      for i, e in ipairs(entries) do
        mine[i] = {e[1], e[2]}
      end
      carry_add(mine, tomb_tag(P), ARGV[3])
      if chain_restore(K, chain_elements(chain), mine, math.max(dl, now + tonumber(ARGV[4]))) then
        return 1
      end
    end
    tomb_leave(K, false, P, ARGV[3], ARGV[4], entries, dl, now)
    if limit == 0 then
      -- The key's release channel: ChannelPrefix in internal/waiting.
      pcall(redis.call, 'PUBLISH', 'redlock:released:' .. K, '')
    end
    return 1
  end
  if chain == '' then
    carry_into(K, v, P, ARGV[3], ARGV[4])
    return -1
  end
  local els = chain_elements(chain)
  for i = 1, #els do
    if string.sub(els[i][2], 1, #P) == P then
      if stale(els[i][2]) then
        return 2
      end
      local kept = {}
      for k = 1, i - 1 do
        kept[k] = els[k]
      end
      if limit > 0 then
        for k = i + 1, #els do
          kept[#kept + 1] = els[k]
        end
      end
      carry_into(K, head .. chain_join(kept, 1) .. carried, P, ARGV[3], ARGV[4])
      return 1
    end
  end
  carry_into(K, v, P, ARGV[3], ARGV[4])
  return -1
end
