-- take: the step the acquire scripts share (acquire.lua, acquire_fenced.lua,
-- and handover.lua for the waiter), prepended to each after late.lua,
-- late_write.lua and lib.lua: whether this attempt may write the key, and
-- what it writes.
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
--            generation of the same Lock is there, or the Lock's refusals
--            key (late.lua) refuses this generation: a delete of the Lock
--            ran after this call was sent,
--          7 when permits (Permits) hold the key: a Lock of another kind
--            must not wait for it (ErrInvalidArgument).
-- Taking over our own earlier value is what makes a retry after a lost reply
-- succeed instead of locking its own holder out for the whole TTL. A key
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

-- take_refused: whether the Lock's refusals key refuses this attempt's
-- generation, read once per script (a Lock of several keys has one).
local take_checked, take_stale = false, false
local function take_refused()
  if not take_checked then
    take_stale = late_refused(redis.call('GET', late_key), ARGV[4])
    take_checked = true
  end
  return take_stale
end

local function take(K, v)
  if take_refused() then
    return 2
  end
  if not v or string.sub(v, 1, 1) == '!' then
    return 1, ARGV[1], ARGV[2], false
  end
  local kind = string.sub(v, 1, 1)
  if kind == '^' or kind == '#' then
    -- Taken shared or by permits (lib.lua): while an entry is live,
    -- refused for as long as the last one lives, or as taken with another
    -- kind of lock (7) by permits; otherwise absent.
    local _, left = shared_live(v, now_ms())
    if left > 0 and kind == '#' then
      return 7
    elseif left > 0 then
      return -left - 1
    end
    return 1, ARGV[1], ARGV[2], false
  end
  local ok, pttl = pcall(redis.call, 'PTTL', K)
  if not ok then
    pttl = -1 -- an ACL without PTTL: a waiter falls back to its backoff
  end
  local head, chain = chain_split(v)
  if string.sub(head, 1, #ARGV[3]) ~= ARGV[3] then
    return -pttl - 1
  end
  local mine = string.sub(ARGV[1], 1, #ARGV[1] - #ARGV[4])
  local els
  if string.sub(head, 1, #mine) == mine then
    local gen = tonumber(string.match(head, '^%d+', #mine + 1))
    if gen and gen > tonumber(ARGV[4]) then
      return 2
    end
    if chain == '' then
      return 1, ARGV[1], ARGV[2], false
    end
    els = chain_elements(chain)
  else
    els = nil -- another Lock of the owner: its value joins the chain
  end
  if not ok or pttl < 0 then
    return 0 -- the replaced value's expiry cannot be kept: not taken
  end
  local now = now_ms()
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
    return 1, ARGV[1], ARGV[2], false
  end
  local kept = {}
  for k = 1, live do
    kept[k] = els[k]
  end
  return 1, ARGV[1] .. chain_join(kept, 1), math.max(tonumber(ARGV[2]), pttl), true
end
