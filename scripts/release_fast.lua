-- release_fast: the prologue of release.lua for a Lock of one key, before
-- lib.lua. The common cases are decided here as release_key decides them,
-- before lib.lua defines its functions: without a tombstone to leave
-- (ARGV[3] absent), an absent key returns 0, and a value whose head is this
-- Lock's, with no chain (no "|"), is deleted, or left (2) when a rollback's
-- limit is below its generation. A Release (limit 0) that deletes announces
-- it on the key's release channel, as release_key does. Anything else (a
-- tombstone, another holder, a chain, a tombstone to leave) goes on to the
-- whole script.
-- KEYS[1], ARGV[1..4] as for release.lua.
if not ARGV[3] then
  local v = redis.call('GET', KEYS[1])
  if not v then
    return 0
  end
  local P = ARGV[1]
  if string.sub(v, 1, #P) == P and not string.find(v, '|', 1, true) then
    local limit = tonumber(ARGV[2])
    if limit > 0 then
      local gen = tonumber(string.match(v, '^%d+', #P + 1))
      if gen and gen > limit then
        return 2
      end
      redis.call('DEL', KEYS[1])
      return 1
    end
    redis.call('DEL', KEYS[1])
    pcall(redis.call, 'PUBLISH', 'redlock:released:' .. KEYS[1], '')
    return 1
  end
end
