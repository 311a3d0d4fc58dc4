-- One request's whole business with the pacer, in one round trip: give
-- back the leases of requests that finished, prove the run lock is still
-- ours, take a slot under every concurrency cap of the quota and book a
-- token in every gate; all of it, or (past the first two) none.
-- gcra.lua and window.lua are prepended.
--
-- Order matters. Releases come first, so a worker handing its slot to its
-- own next request never finds the cap full of itself. The run-lock check
-- comes before anything is booked, so a run that lost its lock books
-- nothing and learns it in this same reply. A full cap books no token, and
-- a token beyond the horizon takes no slot.
--
-- The account's cap is taken in arrival order across processes: a caller
-- takes a slot only if fewer callers wait before it (in the line of those
-- turned away and still asking) than there are free slots, so a process
-- that hands its slots from task to task gives them up to another's
-- waiting caller.
--
-- KEYS[1] pause   KEYS[2] lease counter (never expires)
-- KEYS[3] run lock ("<fence>|<holder>"; only read when ARGV[4] ~= '0')
-- KEYS[4 .. 3+L]          lease sets to take a slot in (the account's first)
-- KEYS[4+L .. 3+L+G]      gates to book a token in
-- KEYS[4+L+G .. 3+L+G+R]  the lease set of each release entry
-- ARGV[1] 'book' | 'check' (check: releases and the run lock only; L = G = 0)
-- ARGV[2] horizon_us   ARGV[3] lease ttl_ms
-- ARGV[4] run fence, or '0' for none   ARGV[5] run lock ttl_ms
-- ARGV[6] L, then ARGV[7 .. 6+L] the cap of each lease set
-- ARGV[7+L] G, then interval and tolerance of each gate (gcra.lua, arg0 = 7+L)
-- ARGV[8+L+2G] R, then R lease ids, one per release entry
-- KEYS[4+L+G+R] the line of callers the cap turned away (arrival order)
-- KEYS[5+L+G+R] when each of them must ask again by
-- KEYS[6+L+G+R] the account's lease set (the line's cap), in either mode
-- ARGV[9+L+2G+R] the caller's name in that line, or '' for none
-- ARGV[10+L+2G+R] how long a name keeps its place without asking (ms)
-- ARGV[11+L+2G+R] the account's cap
-- ARGV[12+L+2G+R] the prefix of every process's wake-up list
-- KEYS[7+L+G+R .. 6+L+G+R+W]  the quota's fixed windows (window.lua)
-- ARGV[13+L+2G+R] W, then each window's shape (window.lua); W = 0 to check
--
-- Waking. A slot this call frees (given back, or its lease expired) is
-- for the first caller in line: that caller is woken by its name pushed
-- onto the wake-up list of its process, `<wake prefix><process>` (a name
-- is `<process>/<count>`), which one task of that process pops (BLPOP).
-- Those lists are not in KEYS: their names come from the line. They carry
-- the quota's hash tag in the prefix, so on a Redis Cluster they live in
-- this script's one slot. A wake is a hint; the woken caller still asks.
--
-- Returns { status, value, at_us, lease_id, fence }
--   status 1 granted (value = wait_ms)   0 refused: beyond the horizon (wait_ms)
--          2 a cap is full (value = ms until that set's first lease expires)
--          3 checked (mode 'check')      4 the run lock is not ours
--   fence  1 held (and extended), -1 not asked

local now = server_now()
local L = tonumber(ARGV[6])
local G = tonumber(ARGV[7 + L])
local r0 = 8 + L + 2 * G
local R = tonumber(ARGV[r0])
local line = KEYS[4 + L + G + R]
local line_until = KEYS[5 + L + G + R]
local account = KEYS[6 + L + G + R]
local me = ARGV[r0 + R + 1]
local keep_ms = tonumber(ARGV[r0 + R + 2])
local account_cap = tonumber(ARGV[r0 + R + 3])
local wake_prefix = ARGV[r0 + R + 4]
local stamp = string.format('%.0f', now)

local before = redis.call('ZCARD', account)
for k = 1, R do
  redis.call('ZREM', KEYS[3 + L + G + k], ARGV[r0 + k])
end
redis.call('ZREMRANGEBYSCORE', account, '-inf', stamp)
for i = 4, 3 + L do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', stamp)
end

local gone = redis.call('ZRANGEBYSCORE', line_until, '-inf', stamp)
for _, name in ipairs(gone) do
  redis.call('ZREM', line, name)
  redis.call('ZREM', line_until, name)
end
local after = redis.call('ZCARD', account)
local freed = math.min(before - after, account_cap - after)
if freed > 0 then
  local woken = 0
  for _, name in ipairs(redis.call('ZRANGE', line, 0, freed)) do
    if woken < freed and name ~= me then
      local process = string.match(name, '^(.+)/%d+$')
      if process then
        local list = wake_prefix .. process
        redis.call('RPUSH', list, name)
        redis.call('PEXPIRE', list, keep_ms * 4)
      end
      woken = woken + 1
    end
  end
end

local fence = -1
if ARGV[4] ~= '0' then
  local current = redis.call('GET', KEYS[3])
  if current and string.match(current, '^(%d+)|') == ARGV[4] then
    redis.call('PEXPIRE', KEYS[3], tonumber(ARGV[5]))
    fence = 1
  else
    return { 4, 0, '0', 0, 0 }
  end
end
if ARGV[1] == 'check' then
  return { 3, 0, '0', 0, fence }
end

local ahead = nil
if me ~= '' then
  ahead = redis.call('ZRANK', line, me)
end
if not ahead then
  ahead = redis.call('ZCARD', line)
end

for i = 4, 3 + L do
  local waiting = 0
  if i == 4 then
    waiting = ahead
  end
  if redis.call('ZCARD', KEYS[i]) + waiting >= tonumber(ARGV[3 + i]) then
    -- Until the first held lease expires; with none held, the callers
    -- ahead in line were woken for the free slots, and this one is woken
    -- when one of theirs frees (or asks again to keep its place).
    local retry_ms = keep_ms
    local first = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
    if first[2] then
      retry_ms = math.ceil((tonumber(first[2]) - now) / 1000)
    end
    if me ~= '' then
      redis.call('ZADD', line, 'NX', stamp, me)
      redis.call('ZADD', line_until, string.format('%.0f', now + keep_ms * 1000), me)
      redis.call('PEXPIRE', line, keep_ms * 4)
      redis.call('PEXPIRE', line_until, keep_ms * 4)
    end
    return { 2, retry_ms, '0', 0, fence }
  end
end

local arg0 = 7 + L
local at, tats = gcra_decide(now, KEYS[1], 4 + L, 3 + L + G, arg0)
local wk, wa = 7 + L + G + R, r0 + R + 5
local W = tonumber(ARGV[wa] or '0')
local held = {}
if W > 0 then
  at, held = window_settle(at, wk, wa, W)
end
local wait = at - now
local wait_ms = math.ceil(wait / 1000)
if wait > tonumber(ARGV[2]) then
  return { 0, wait_ms, string.format('%.0f', at), 0, fence }
end
gcra_commit(now, at, 4 + L, 3 + L + G, arg0, tats)
if W > 0 then
  window_commit(now, at, wk, wa, W, held)
end

-- One id, a slot in every set; it covers the request from its booked
-- instant on.
if me ~= '' then
  redis.call('ZREM', line, me)
  redis.call('ZREM', line_until, me)
end
local ttl_ms = tonumber(ARGV[3])
local id = redis.call('INCR', KEYS[2])
for i = 4, 3 + L do
  redis.call('ZADD', KEYS[i], string.format('%.0f', at + ttl_ms * 1000), id)
  redis.call('PEXPIRE', KEYS[i], math.ceil(wait / 1000) + ttl_ms * 2)
end
return { 1, wait_ms, string.format('%.0f', at), id, fence }
