-- Reserve one token in every gate of a quota and a call in every fixed
-- window, or nothing (gcra.lua and window.lua, which are prepended, hold
-- the arithmetic).
--
-- The caller sleeps (at - now) on its own monotonic clock and then sends
-- without calling Redis again: one round trip per granted token, however
-- many workers contend. If the wait would exceed the caller's horizon the
-- reservation is refused and nothing is written, so no gate leaks a token.
--
-- KEYS[1]            pause key (server time, microseconds, until which all waits)
-- KEYS[2 .. 1+G]     one key per gate
-- KEYS[2+G .. 1+G+W] one key per fixed window
-- ARGV[1]            horizon in microseconds
-- ARGV[2]            G, then ARGV[1+2k], ARGV[2+2k]: interval and tolerance
--                    (microseconds) of KEYS[k+1]
-- ARGV[3+2G]         W, then each window's shape (window.lua)
--
-- Returns { granted (1|0), wait_ms (rounded up), at_us (grant time), now_us }

local now = server_now()
local G = tonumber(ARGV[2])
local at, tats = gcra_decide(now, KEYS[1], 2, 1 + G, 2)
local wk, wa = 2 + G, 3 + 2 * G
local W = tonumber(ARGV[wa])
local held = {}
if W > 0 then
  at, held = window_settle(at, wk, wa, W)
end
local wait = at - now
local wait_ms = math.ceil(wait / 1000)
if wait > tonumber(ARGV[1]) then
  return { 0, wait_ms, string.format('%.0f', at), string.format('%.0f', now) }
end
gcra_commit(now, at, 2, 1 + G, 2, tats)
if W > 0 then
  window_commit(now, at, wk, wa, W, held)
end
return { 1, wait_ms, string.format('%.0f', at), string.format('%.0f', now) }
