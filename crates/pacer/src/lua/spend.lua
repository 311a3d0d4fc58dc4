-- Marks every window of a quota spent until its end, for every caller: the
-- vendor answered that the window's calls are used up (a 429). A window not
-- on record is taken to have started now, the latest the vendor's can have
-- started. window.lua is prepended.
--
-- KEYS[1 .. W]  the windows; ARGV[1] W, then each window's shape (window.lua)
--
-- Returns now_us.

local now = server_now()
local W = tonumber(ARGV[1])
for j = 1, W do
  local calls, len, aligned, margin = window_shape(1, j)
  local start, _ = window_read(KEYS[j])
  if not (start and now < window_next_open(start, len, aligned, margin)) then
    start = window_start_of(now, len, aligned)
  end
  window_store(now, KEYS[j], start, calls, len, aligned, margin)
end
return string.format('%.0f', now)
