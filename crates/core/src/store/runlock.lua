-- The run lock of one stream across hosts, with a fencing token.
--
-- KEYS[1]  lock key (value "<fence>|<holder>")   KEYS[2]  fencing counter
-- acquire: ARGV = 'acquire', holder, ttl_ms -> { 1, fence } or { 0, current holder }
-- check:   ARGV = 'check', fence, ttl_ms    -> { 1, fence } if still held (and extends it), else { 0, holder or '' }
-- release: ARGV = 'release', fence          -> { 1 | 0, '' }
-- takeover: ARGV = 'takeover', expected, holder, ttl_ms -> { 1, fence } if the
--           lock still holds exactly `expected` (a holder the caller proved
--           dead), else { 0, current holder or '' }: compare-and-set, so a
--           lock someone else took meanwhile is never stolen.
--
-- The cursor commit calls 'check' with its fence before it writes: a
-- holder whose lock expired (a paused process) or was taken over can never
-- commit, because its fence no longer matches.

local op = ARGV[1]
local current = redis.call('GET', KEYS[1])
local function fence_of(v)
  if not v then return nil end
  return string.match(v, '^(%d+)|')
end
if op == 'acquire' then
  if current then
    return { 0, current }
  end
  local fence = redis.call('INCR', KEYS[2])
  redis.call('SET', KEYS[1], fence .. '|' .. ARGV[2], 'PX', tonumber(ARGV[3]))
  return { 1, tostring(fence) }
elseif op == 'check' then
  if current and fence_of(current) == ARGV[2] then
    redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
    return { 1, ARGV[2] }
  end
  return { 0, current or '' }
elseif op == 'takeover' then
  if current and current == ARGV[2] then
    local fence = redis.call('INCR', KEYS[2])
    redis.call('SET', KEYS[1], fence .. '|' .. ARGV[3], 'PX', tonumber(ARGV[4]))
    return { 1, tostring(fence) }
  end
  return { 0, current or '' }
elseif op == 'release' then
  if current and fence_of(current) == ARGV[2] then
    redis.call('DEL', KEYS[1])
    return { 1, '' }
  end
  return { 0, '' }
end
return redis.error_reply('runlock.lua: unknown op ' .. tostring(op))
