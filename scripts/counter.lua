-- counter: raising a key's fencing counter, shared by extend.lua and
-- fence_commit.lua (prepended to each). Nothing here runs on its own.

-- counter_raise: raise fencing counter F to fence, never lower it, and
-- keep it for horizon more milliseconds.
local function counter_raise(F, fence, horizon)
  local c = tonumber(redis.call('GET', F) or '0')
  if c < tonumber(fence) then
    redis.call('SET', F, fence, 'PX', horizon)
  else
    redis.call('PEXPIRE', F, horizon)
  end
end
