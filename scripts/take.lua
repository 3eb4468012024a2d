-- take: the step the acquire scripts share (acquire.lua, acquire_fenced.lua,
-- and handover.lua for the waiter), prepended to each after lib.lua: whether
-- this attempt may write the key, and what it writes.
-- ARGV[1]  this attempt's value: the Lock's prefix followed by ARGV[4]
-- ARGV[2]  time to live in milliseconds
-- ARGV[3]  the holder's prefix: the Lock's prefix (its token and a dot), or
--          for a Lock of an owner (WithOwner) the owner's part of it, so
--          that any Lock of the owner takes the key over
-- ARGV[4]  this attempt's generation
-- take(K, v), v the value of key K or false, returns
--          1, value, ttl, chained when this attempt may write: value with
--            PX ttl; chained when value keeps what it took over,
--          -(pttl + 1), 0 or less, when another holder's value is there:
--            pttl is its remaining time to live in milliseconds, -1 when
--            unknown (a waiter sleeps at most that),
--          2 when this call is stale and must change nothing: a later
--            generation of the same Lock is there, or a tombstone that a
--            delete of the Lock left for this generation or a later one,
--          7 when permits (Permits) hold the key: a Lock of another kind
--            must not wait for it (ErrInvalidArgument).
-- Taking over our own earlier value is what makes a retry after a lost reply
-- succeed instead of locking its own holder out for the whole TTL. A
-- tombstone (lib.lua) is an absent key for everyone but the writes it names;
-- a refusal leaves it as it is, for the other writes it still covers, and
-- a write over it carries its entries (lib.lua), as it carries those of
-- the value it takes over, so that they go on refusing whoever holds the
-- key in between. A key
-- taken shared refuses while a shared Lock holds it, one taken by permits
-- while a permit does (lib.lua).
-- Taking over another Lock of the same owner keeps what it replaces, as an
-- element of the chain (lib.lua) with that value's own deadline, and the key
-- lives at least as long. The attempt may still fail; its rollback
-- (release.lua) then puts the replaced value back with its own expiry, so a
-- Lock of the owner that another Client holds keeps this node for as long as
-- it counted on, and no longer. A retry of the same attempt keeps the chain.
-- Elements whose deadline has passed are dropped. Once the attempt's Lock
-- holds, the chain is dropped (the acquire's settle, an extension, a
-- Release): only a pending takeover keeps one. At most eight pending
-- takeovers chain; a ninth is refused as another holder.
local function take(K, v)
  local mine = string.sub(ARGV[1], 1, #ARGV[1] - #ARGV[4])
  if side_refuses(K, mine, ARGV[4]) then
    return 2
  end
  if not v then
    return 1, ARGV[1], ARGV[2], false
  end
  if string.sub(v, 1, 1) == '!' then
    if tomb_refuses(v, mine, ARGV[4]) then
      return 2
    end
    if not string.find(v, ':', 1, true) then
      return 1, ARGV[1], ARGV[2], false
    end
    -- The tombstone's entries go on in the value, which lives at least as
    -- long as the tombstone would have: a late write of their Locks stays
    -- refused, whatever becomes of this Lock.
    local okt, now = pcall(now_ms)
    local okp, pttl = pcall(redis.call, 'PTTL', K)
    if not okt or not okp or pttl <= 0 then
      return 1, ARGV[1], ARGV[2], false -- an ACL without TIME or PTTL: as an absent key
    end
    return 1, ARGV[1] .. carry_text(now + pttl, tomb_entries(v)), math.max(tonumber(ARGV[2]), pttl), false
  end
  local kind = string.sub(v, 1, 1)
  if kind == '^' or kind == '#' then
    -- Taken shared or by permits (lib.lua): while an entry is live,
    -- refused for as long as the last one lives, or as taken with another
    -- kind of lock (7) by permits; otherwise absent, as a tombstone is,
    -- but for the writes its tombstone entries refuse, which go on in the
    -- value.
    if tomb_refuses(v, mine, ARGV[4]) then
      return 2
    end
    local okt, now = pcall(now_ms)
    if not okt then
      return 0 -- an ACL without TIME: the entries' expiry is unknown
    end
    local live, left = shared_live(v, now)
    if left > 0 and kind == '#' then
      return 7
    elseif left > 0 then
      return -left - 1
    end
    local entries, last = {}, 0
    for i = #live, 1, -1 do
      local t, g = string.match(live[i][2], '^!(%x+):(%d+)$')
      if t then
        carry_add(entries, t, g)
        last = math.max(last, live[i][1])
      end
    end
    return 1, ARGV[1] .. carry_text(last, entries), math.max(tonumber(ARGV[2]), last - now), false
  end
  local ok, pttl = pcall(redis.call, 'PTTL', K)
  if not ok then
    pttl = -1 -- an ACL without PTTL: a waiter falls back to its backoff
  end
  local body, carried = carry_split(v)
  if string.sub(body, 1, #ARGV[3]) ~= ARGV[3] then
    return -pttl - 1
  end
  local _, entries = carry_read(carried)
  if carry_refuses(entries, mine, ARGV[4]) then
    return 2
  end
  local head, chain = chain_split(body)
  local els
  if string.sub(head, 1, #mine) == mine then
    local gen = tonumber(string.match(head, '^%d+', #mine + 1))
    if gen and gen > tonumber(ARGV[4]) then
      return 2
    end
    if chain == '' then
      return 1, ARGV[1] .. carried, carry_life(carried, ARGV[2]), false
    end
    els = chain_elements(chain)
  else
    els = nil -- another Lock of the owner: its value joins the chain
  end
  if not ok or pttl < 0 then
    return 0 -- the replaced value's expiry cannot be kept: not taken
  end
  local okt, now = pcall(now_ms)
  if not okt then
    return 0 -- an ACL without TIME: not taken
  end
  if not els then
    els = chain_elements(chain)
    table.insert(els, 1, {now + pttl, head})
  end
  local live = 0
  while live < #els and (els[live + 1][1] == false or els[live + 1][1] > now) do
    live = live + 1
  end
  if live > 8 then
    return -pttl - 1
  end
  if live == 0 then
    return 1, ARGV[1] .. carried, carry_life(carried, ARGV[2]), false
  end
  local kept = {}
  for k = 1, live do
    kept[k] = els[k]
  end
  return 1, ARGV[1] .. chain_join(kept, 1) .. carried, math.max(tonumber(carry_life(carried, ARGV[2])), pttl), true
end
