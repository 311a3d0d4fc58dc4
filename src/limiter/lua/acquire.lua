-- One request's whole business with the pacer, in one round trip: give
-- back the leases of requests that finished, prove the run lock is still
-- ours, take a concurrency slot and book a token in every gate; all of it,
-- or (past the first two) none. gcra.lua is prepended.
--
-- Order matters. Releases come first, so a worker handing its slot to its
-- own next request never finds the cap full of itself. The run-lock check
-- comes before anything is booked, so a run that lost its lock books
-- nothing and learns it in this same reply. A full cap books no token, and
-- a token beyond the horizon takes no slot.
--
-- KEYS[1] pause   KEYS[2] lease set   KEYS[3] lease counter (never expires)
-- KEYS[4] run lock ("<fence>|<holder>"; only read when ARGV[5] ~= '0')
-- KEYS[5..n] one key per gate
-- ARGV[1] 'book' | 'check' (check: releases and the run lock only)
-- ARGV[2] horizon_us   ARGV[3] cap   ARGV[4] lease ttl_ms
-- ARGV[5] run fence, or '0' for none   ARGV[6] run lock ttl_ms
-- ARGV[7] r, the number of leases to release; ARGV[8 .. 7+r] their ids
-- ARGV[8+r ..] interval and tolerance of each gate (gcra.lua, arg0 = 7+r)
--
-- Returns { status, value, at_us, lease_id, fence }
--   status 1 granted (value = wait_ms)   0 refused: beyond the horizon (wait_ms)
--          2 cap full (value = ms until the first lease expires)
--          3 checked (mode 'check')      4 the run lock is not ours
--   fence  1 held (and extended), 0 lost, -1 not asked

local now = server_now()
local r = tonumber(ARGV[7])
for k = 1, r do
  redis.call('ZREM', KEYS[2], ARGV[7 + k])
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%.0f', now))

local fence = -1
if ARGV[5] ~= '0' then
  local current = redis.call('GET', KEYS[4])
  if current and string.match(current, '^(%d+)|') == ARGV[5] then
    redis.call('PEXPIRE', KEYS[4], tonumber(ARGV[6]))
    fence = 1
  else
    return { 4, 0, '0', 0, 0 }
  end
end
if ARGV[1] == 'check' then
  return { 3, 0, '0', 0, fence }
end

local cap = tonumber(ARGV[3])
if redis.call('ZCARD', KEYS[2]) >= cap then
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  return { 2, math.ceil((tonumber(first[2]) - now) / 1000), '0', 0, fence }
end

local arg0 = 7 + r
local at, tats = gcra_decide(now, KEYS[1], 5, arg0)
local wait = at - now
local wait_ms = math.ceil(wait / 1000)
if wait > tonumber(ARGV[2]) then
  return { 0, wait_ms, string.format('%.0f', at), 0, fence }
end
gcra_commit(now, at, 5, arg0, tats)

-- The lease covers the request from its booked instant on.
local ttl_ms = tonumber(ARGV[4])
local id = redis.call('INCR', KEYS[3])
redis.call('ZADD', KEYS[2], string.format('%.0f', at + ttl_ms * 1000), id)
redis.call('PEXPIRE', KEYS[2], math.ceil(wait / 1000) + ttl_ms * 2)
return { 1, wait_ms, string.format('%.0f', at), id, fence }
