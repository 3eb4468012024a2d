-- release: delete our key, whichever of our generations it holds, up to a
-- limit: a rollback deletes only its own attempt's value or an earlier one,
-- never the value of a later attempt that may since have been counted.
-- Runs after late.lua and lib.lua; release_key(K) does it for key K, and
-- release_one.lua calls it for KEYS[1], release_all.lua for every key of a
-- Lock of several keys. Both then leave what refuses the Lock's writes
-- that may still land (late_leave): whatever this node replied, a copy of
-- any write sent before this delete may still be in the network, and
-- without it would land after this delete and keep the key for its whole
-- TTL; it is refused until the latest of their deadlines, past which
-- none can land.
-- KEYS[1]  the lock key
-- ARGV[1]  the Lock's prefix (as for extend.lua): another Lock's value, even
--          the same owner's, is never deleted
-- ARGV[2]  the highest generation to delete; 0 deletes any of ours (a
--          Release)
-- ARGV[3]  the Lock's highest generation sent to the nodes: the refusal
--          refuses its writes up to it
-- Returns  1 when our value was deleted (or, by a rollback, replaced by what
--            our attempt had taken over, or taken out of the chain of
--            another Lock of the owner that took it over),
--          0 when the key was absent (expired, never set on this node),
--         -1 when another holder's value is there (nothing of it changes),
--          2 when a later generation of ours is there (nothing is changed).
-- Chains (take.lua): a rollback of an attempt that took over another Lock of
-- the owner puts that Lock's value back, with that value's own expiry; a
-- rollback of an attempt that another Lock of the owner took over since
-- takes its element out of that Lock's chain; a Release of such a Lock
-- (limit 0) cuts the chain at its element, dropping what it had taken over
-- too: its takeover was final. Either way nothing of a Lock whose Release
-- or rollback ran is ever put back, and its refusal refuses a stale write
-- of it that lands later.
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
    return 0
  end
  local kind = string.sub(v, 1, 1)
  if kind == '^' or kind == '#' then
    return -1 -- shares or permits hold the key
  end
  local function stale(value)
    local gen = tonumber(string.match(value, '^%d+', #P + 1))
    return limit > 0 and gen and gen > limit
  end
  local head, chain = chain_split(v)
  if string.sub(head, 1, #P) == P then
    if stale(head) then
      return 2
    end
    if limit > 0 and chain ~= '' and chain_restore(K, chain_elements(chain)) then
      return 1
    end
    drop(K)
    if limit == 0 then
      -- The key's release channel: ChannelPrefix in internal/waiting.
      pcall(redis.call, 'PUBLISH', 'redlock:released:' .. K, '')
    end
    return 1
  end
  if chain == '' then
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
      redis.call('SET', K, head .. chain_join(kept, 1), 'KEEPTTL')
      return 1
    end
  end
  return -1
end
