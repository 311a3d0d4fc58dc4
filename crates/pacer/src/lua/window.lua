-- The fixed-window arithmetic shared by reserve.lua, acquire.lua and
-- spend.lua: prepended to each when the script is built (src/redis.rs), so
-- they can never drift apart. Mirrored by src/window.rs (the LocalPacer),
-- whose header says why a window books only before its end less the margin
-- and why a window that starts at its first call opens the next one only
-- after its end plus the margin.
--
-- A window's key holds "<start_us> <count>" and expires once the next
-- window may open. Window j (1-based) is KEYS[wk + j - 1]; its shape is
-- ARGV[wa + 4(j-1) + 1 .. + 4]: calls, length_us, aligned (1: on the
-- clock's multiples of the length; 0: at the first call), margin_us.

local function window_shape(wa, j)
  local b = wa + 4 * (j - 1)
  return tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), ARGV[b + 3] == '1', tonumber(ARGV[b + 4])
end

local function window_read(key)
  local v = redis.call('GET', key)
  if not v then return nil, nil end
  local start, count = string.match(v, '^(%-?%d+) (%d+)$')
  return tonumber(start), tonumber(count)
end

local function window_start_of(at, len, aligned)
  if aligned then return math.floor(at / len) * len end
  return at
end

local function window_opening(at, len, aligned, margin)
  if not aligned then return at end
  local start = math.floor(at / len) * len
  if at < start + len - margin then return at end
  return start + len
end

local function window_next_open(start, len, aligned, margin)
  if aligned then return start + len end
  return start + len + margin
end

local function window_earliest(at, calls, len, aligned, margin, start, count)
  if not start then return window_opening(at, len, aligned, margin) end
  if at < start then at = start end
  if at < start + len - margin and count < calls then return at end
  local open = window_next_open(start, len, aligned, margin)
  if at < open then return window_opening(open, len, aligned, margin) end
  return window_opening(at, len, aligned, margin)
end

-- The earliest instant at or after `at` every window lets a call go, and
-- what each window held.
local function window_settle(at, wk, wa, W)
  local held = {}
  for j = 1, W do
    local start, count = window_read(KEYS[wk + j - 1])
    held[j] = { start, count }
  end
  for _ = 0, W do
    local moved = at
    for j = 1, W do
      local calls, len, aligned, margin = window_shape(wa, j)
      local e = window_earliest(at, calls, len, aligned, margin, held[j][1], held[j][2])
      if e > moved then moved = e end
    end
    if moved == at then break end
    at = moved
  end
  return at, held
end

local function window_store(now, key, start, count, len, aligned, margin)
  local open = window_next_open(start, len, aligned, margin)
  local ttl_ms = math.ceil((open - now) / 1000) + 1000
  redis.call('SET', key, string.format('%.0f %d', start, count), 'PX', ttl_ms)
end

-- Books the call granted at `at` in every window.
local function window_commit(now, at, wk, wa, W, held)
  for j = 1, W do
    local calls, len, aligned, margin = window_shape(wa, j)
    local start, count = held[j][1], held[j][2]
    if start and at >= start and at < start + len - margin then
      count = count + 1
    else
      start = window_start_of(at, len, aligned)
      count = 1
    end
    window_store(now, KEYS[wk + j - 1], start, count, len, aligned, margin)
  end
end
