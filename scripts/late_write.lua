-- late_write: after late.lua, in every script by which a Lock writes (an
-- acquire of any kind, a handover, an extension, a restore, a fence's
-- commit, a term's record, an announcement): the write reached the node
-- after its deadline, so it changes nothing and says so.
-- Returns  the error reply "LATE" and the node's clock in milliseconds
--          (engine.ErrLate), before anything else is read or written.
do
  local t = redis.call('TIME')
  late_now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
if late_now > late_at then
  return redis.error_reply('LATE ' .. late_fmt(late_now))
end
