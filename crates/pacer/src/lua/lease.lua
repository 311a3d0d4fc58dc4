-- Concurrency leases: at most `cap` requests in flight on one quota, across
-- every process and host.
--
-- Leases live in a sorted set scored by their expiry in server time. Expired
-- leases (a holder that crashed or was SIGKILLed) are dropped on every call,
-- so a dead holder shrinks the cap only until its lease expires. Lease ids
-- come from a counter that only grows: a fencing token.
--
-- KEYS[1]  lease set       KEYS[2]  fencing counter (never expires)
-- ARGV[1]  'acquire' | 'renew' | 'release'
-- acquire: ARGV[2] cap, ARGV[3] ttl_ms   -> { 1, id } or { 0, wait_ms until the first expiry }
-- renew:   ARGV[2] id,  ARGV[3] ttl_ms   -> { 1 | 0 (lease lost), 0 }
-- release: ARGV[2] id                    -> { 1 | 0 (already gone), 0 }

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now))

local op = ARGV[1]
if op == 'acquire' then
  local cap = tonumber(ARGV[2])
  local ttl_ms = tonumber(ARGV[3])
  if redis.call('ZCARD', KEYS[1]) >= cap then
    local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    return { 0, math.ceil((tonumber(first[2]) - now) / 1000) }
  end
  local id = redis.call('INCR', KEYS[2])
  redis.call('ZADD', KEYS[1], string.format('%.0f', now + ttl_ms * 1000), id)
  redis.call('PEXPIRE', KEYS[1], ttl_ms * 2)
  return { 1, id }
elseif op == 'renew' then
  local ttl_ms = tonumber(ARGV[3])
  if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then
    return { 0, 0 }
  end
  redis.call('ZADD', KEYS[1], 'XX', string.format('%.0f', now + ttl_ms * 1000), ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ttl_ms * 2)
  return { 1, 0 }
elseif op == 'release' then
  return { redis.call('ZREM', KEYS[1], ARGV[2]), 0 }
end
return redis.error_reply('lease.lua: unknown op ' .. tostring(op))
