-- The GCRA arithmetic shared by reserve.lua and acquire.lua: prepended to
-- each when the script is built (src/limiter/redis.rs), so the two can
-- never drift apart. Mirrored by src/limiter/gcra.rs (the LocalPacer).
--
-- The bucket is GCRA ("virtual scheduling"): each gate stores its theoretical
-- arrival time TAT in integer microseconds of Redis server time. A request is
-- granted at   at = max(now, pause_until, TAT_i - tolerance_i  for every gate i)
-- and every gate then moves to   TAT_i = max(TAT_i, at) + interval_i.
-- interval = 1/rate, tolerance = (burst - 1) * interval. This admits `burst`
-- requests at once and then one per interval: never more than
-- burst + rate * t in any window of length t.
--
-- Time comes only from redis.call('TIME'); the client's clock is never used.
--
-- Gate j (1-based) is KEYS[first + j - 1], for first + j - 1 <= last; its
-- interval and tolerance (microseconds) are ARGV[arg0 + 2j - 1] and
-- ARGV[arg0 + 2j].

local function server_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- The grant instant of one token in every gate, and the TATs read.
local function gcra_decide(now, pause_key, first, last, arg0)
  local at = now
  local pause = tonumber(redis.call('GET', pause_key) or '0')
  if pause > at then at = pause end
  local tats = {}
  for i = first, last do
    local j = i - first + 1
    local tolerance = tonumber(ARGV[arg0 + 2 * j])
    local tat = tonumber(redis.call('GET', KEYS[i]) or '0')
    tats[i] = tat
    if tat - tolerance > at then at = tat - tolerance end
  end
  -- Whole microseconds, rounded up (as gcra.rs does).
  return math.ceil(at), tats
end

-- Books the token granted at `at` in every gate.
local function gcra_commit(now, at, first, last, arg0, tats)
  for i = first, last do
    local j = i - first + 1
    local interval = tonumber(ARGV[arg0 + 2 * j - 1])
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
end

