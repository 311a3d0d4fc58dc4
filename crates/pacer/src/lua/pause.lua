-- Pause a whole quota until server time now + ARGV[1] milliseconds.
--
-- Set by any worker that receives 429 (or 503) with a Retry-After; every
-- later reservation on the quota, from any process, is granted no earlier
-- than this instant (see reserve.lua). A pause only ever extends: a shorter
-- Retry-After seen later does not cut a longer one short.
--
-- KEYS[1]  pause key
-- ARGV[1]  pause length in milliseconds
--
-- Returns { pause_until_us, now_us }

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local until_us = now + tonumber(ARGV[1]) * 1000
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if until_us > current then
  redis.call('SET', KEYS[1], string.format('%.0f', until_us), 'PX', math.ceil((until_us - now) / 1000) + 1000)
  current = until_us
end
return { string.format('%.0f', current), string.format('%.0f', now) }
