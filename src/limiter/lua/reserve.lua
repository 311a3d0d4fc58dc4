-- Reserve one token in every gate of a quota, or in none.
--
-- The bucket is GCRA ("virtual scheduling"): each gate stores its theoretical
-- arrival time TAT in integer microseconds of Redis server time. A request is
-- granted at   at = max(now, pause_until, TAT_i - tolerance_i  for every gate i)
-- and every gate then moves to   TAT_i = max(TAT_i, at) + interval_i.
-- interval = 1/rate, tolerance = (burst - 1) * interval. This admits `burst`
-- requests at once and then one per interval: never more than
-- burst + rate * t in any window of length t.
--
-- The caller sleeps (at - now) on its own monotonic clock and then sends
-- without calling Redis again: one round trip per granted token, however
-- many workers contend. If the wait would exceed the caller's horizon the
-- reservation is refused and nothing is written, so no gate leaks a token.
--
-- Time comes only from redis.call('TIME'); the client's clock is never used.
-- Mirrored by src/limiter/gcra.rs (the LocalPacer); keep the two in step.
--
-- KEYS[1]      pause key (server time, microseconds, until which all waits)
-- KEYS[2..n]   one key per gate
-- ARGV[1]      horizon in microseconds
-- ARGV[2k], ARGV[2k+1]   interval and tolerance (microseconds) of KEYS[k+1]
--
-- Returns { granted (1|0), wait_ms (rounded up), at_us (grant time), now_us }

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local horizon = tonumber(ARGV[1])

local at = now
local pause = tonumber(redis.call('GET', KEYS[1]) or '0')
if pause > at then at = pause end

local tats = {}
for i = 2, #KEYS do
  local tolerance = tonumber(ARGV[2 * (i - 1) + 1])
  local tat = tonumber(redis.call('GET', KEYS[i]) or '0')
  tats[i] = tat
  if tat - tolerance > at then at = tat - tolerance end
end

-- Whole microseconds, rounded up (as gcra.rs does).
at = math.ceil(at)
local wait = at - now
local wait_ms = math.ceil(wait / 1000)
if wait > horizon then
  return { 0, wait_ms, string.format('%.0f', at), string.format('%.0f', now) }
end

for i = 2, #KEYS do
  local interval = tonumber(ARGV[2 * (i - 1)])
  local tat = tats[i]
  if tat < at then tat = at end
  -- Round up: a stored TAT is never earlier than the exact arithmetic, so
  -- rounding can only make pacing slower, never faster than the policy.
  local new = math.ceil(tat + interval)
  -- Once TAT has passed the bucket is full again, which is the same state
  -- as no key at all: the key may expire then without losing anything.
  local ttl_ms = math.ceil((new - now) / 1000) + 1000
  redis.call('SET', KEYS[i], string.format('%.0f', new), 'PX', ttl_ms)
end

return { 1, wait_ms, string.format('%.0f', at), string.format('%.0f', now) }
