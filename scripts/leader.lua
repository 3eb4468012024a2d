-- leader: read a lock key and its record of elected terms (settle.lua)
-- without changing anything: what Election.Leader counts.
-- KEYS[1]  the lock key
-- KEYS[2]  its record of elected terms
-- Returns  {value, pttl, record}: the key's value or false when absent, its
--          remaining time to live in milliseconds as PTTL gives it, and the
--          record or false.
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2])}
