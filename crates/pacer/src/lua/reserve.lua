-- Reserve one token in every gate of a quota, or in none (gcra.lua, which
-- is prepended, holds the arithmetic).
--
-- The caller sleeps (at - now) on its own monotonic clock and then sends
-- without calling Redis again: one round trip per granted token, however
-- many workers contend. If the wait would exceed the caller's horizon the
-- reservation is refused and nothing is written, so no gate leaks a token.
--
-- KEYS[1]      pause key (server time, microseconds, until which all waits)
-- KEYS[2..n]   one key per gate
-- ARGV[1]      horizon in microseconds
-- ARGV[2k], ARGV[2k+1]   interval and tolerance (microseconds) of KEYS[k+1]
--
-- Returns { granted (1|0), wait_ms (rounded up), at_us (grant time), now_us }

local now = server_now()
local at, tats = gcra_decide(now, KEYS[1], 2, #KEYS, 1)
local wait = at - now
local wait_ms = math.ceil(wait / 1000)
if wait > tonumber(ARGV[1]) then
  return { 0, wait_ms, string.format('%.0f', at), string.format('%.0f', now) }
end
gcra_commit(now, at, 2, #KEYS, 1, tats)
return { 1, wait_ms, string.format('%.0f', at), string.format('%.0f', now) }
