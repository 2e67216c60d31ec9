-- What the server last told us about itself (state, model, latency), cached so that
-- statusline() never waits on the server, plus the text of :GhostfimStatus.
local client = require("ghostfim.client")

local M = {}

-- A status refresh per stats notification would double the traffic while typing; once every
-- two seconds keeps the p95 figure fresh enough for a statusline.
local REFRESH_INTERVAL_MS = 2000

local cache = {
  state = nil, -- "loading" | "ready" | "error" | nil before the first status
  preset = nil,
  ttft_ms = nil, -- from the last ghostfim/stats of an answer the model computed
  ttft_p95_ms = nil, -- from the last ghostfim/status
  -- A model load in flight, from $/progress: { percentage = number|nil }. The server keeps
  -- `state` "ready" while the old model serves during a switch, so this is what shows it.
  load = nil,
}
local last_refresh_ms = -math.huge
local refresh_scheduled = false

M.enabled = true
-- Called when the server's state becomes "ready" (model loaded, at start or after a restart).
M.on_ready = nil

function M.reset()
  cache = {}
  last_refresh_ms = -math.huge
end

--- The last ghostfim/status result or statusChanged notification as received (for health).
function M.last()
  return cache.raw
end

--- Takes in a ghostfim/status result or ghostfim/statusChanged notification.
function M.update(status)
  if type(status) ~= "table" then
    return
  end
  local was = cache.state
  cache.raw = status
  cache.state = status.state
  if status.state == "ready" and was ~= "ready" and M.on_ready then
    vim.schedule(M.on_ready)
  end
  if type(status.model) == "table" and type(status.model.preset) == "string" then
    cache.preset = status.model.preset
  end
  local latency = status.latency
  if type(latency) == "table" and type(latency.ttftP95) == "number"
      and type(latency.n) == "number" and latency.n > 0 then
    cache.ttft_p95_ms = status.latency.ttftP95
  end
end

--- The server could not start, or exited.
function M.server_failed()
  cache.state = "error"
  cache.load = nil
end

local function refresh()
  last_refresh_ms = vim.loop.now()
  client.request("ghostfim/status", vim.NIL, function(err, result)
    if not err then
      M.update(result)
    end
  end)
end

--- Refreshes the cached status soon, at most once per REFRESH_INTERVAL_MS.
function M.schedule_refresh()
  if refresh_scheduled then
    return
  end
  local wait = last_refresh_ms + REFRESH_INTERVAL_MS - vim.loop.now()
  if wait <= 0 then
    refresh()
    return
  end
  refresh_scheduled = true
  vim.defer_fn(function()
    refresh_scheduled = false
    refresh()
  end, wait)
end

--- Takes in a ghostfim/stats notification. Answers from the server's suggestion cache take
--- no model time (ttftMs 0) and would hide the model's speed, so they are not shown.
function M.on_stats(stats)
  if type(stats) == "table" and not stats.cancelled and stats.source ~= "cache"
      and type(stats.ttftMs) == "number" then
    cache.ttft_ms = stats.ttftMs
  end
  M.schedule_refresh()
end

--- Takes in a $/progress notification (the server reports model loads this way).
function M.on_progress(params)
  local value = type(params) == "table" and params.value
  if type(value) ~= "table" then
    return
  end
  if value.kind == "end" then
    cache.load = nil
    M.schedule_refresh()
  else
    cache.load = cache.load or {}
    if type(value.percentage) == "number" then
      cache.load.percentage = value.percentage
    end
  end
end

local function ms(value)
  return string.format("%dms", math.floor(value + 0.5))
end

--- A short status for a statusline, from cached values only.
function M.statusline()
  if not M.enabled then
    return "ghostfim off"
  end
  if cache.state == "error" then
    return "ghostfim error"
  end
  if cache.load and cache.load.percentage then
    return string.format("ghostfim loading %d%%", cache.load.percentage)
  elseif cache.load or cache.state == "loading" then
    return "ghostfim loading"
  end
  if not cache.state and not client.get() then
    return ""
  end
  local parts = { "ghostfim" }
  if cache.preset then
    table.insert(parts, cache.preset)
  end
  if cache.ttft_ms then
    table.insert(parts, ms(cache.ttft_ms))
  end
  if cache.ttft_p95_ms then
    table.insert(parts, "p95 " .. ms(cache.ttft_p95_ms))
  end
  return table.concat(parts, " ")
end

local function field(value, fallback)
  if value == nil or value == vim.NIL then
    return fallback or "?"
  end
  return tostring(value)
end

local function count(value)
  return type(value) == "number" and value >= 0 and value == math.floor(value)
end

--- "accepted 12, partial 3, refused 5 of 25 shown; accept rate 75%": this session's suggestions
--- as the server counts them (ghostfim/status `acceptance`), or nil when it reports none.
function M.describe_acceptance(status)
  local a = type(status) == "table" and status.acceptance
  if type(a) ~= "table" or not (count(a.accepted) or count(a.partial) or count(a.refused)) then
    return nil
  end
  local function n(key)
    return count(a[key]) and tostring(a[key]) or "?"
  end
  local text = string.format("accepted %s, partial %s, refused %s", n("accepted"), n("partial"),
    n("refused"))
  if count(a.shown) then
    text = text .. " of " .. a.shown .. " shown"
  end
  local rate = type(a.acceptRate) == "number"
    and string.format("%d%%", math.floor(a.acceptRate * 100 + 0.5)) or "none yet"
  text = text .. "; accept rate " .. rate
  if count(a.acceptedChars) then
    text = text .. "; " .. a.acceptedChars .. " characters taken"
  end
  return text
end

local BUDGET_KEYS = { "prefixTokens", "suffixTokens", "keystrokePrefillMs", "kvSnapshotMb" }

--- The prompt budgets the server uses (ghostfim/status `budgets`, newer servers only): a line of
--- the effective values or nil, and one line per setting it clamped on this machine.
function M.describe_budgets(status)
  local b = type(status) == "table" and status.budgets
  if type(b) ~= "table" then
    return nil, {}
  end
  local effective
  if type(b.effective) == "table" then
    local parts = {}
    for _, key in ipairs(BUDGET_KEYS) do
      if type(b.effective[key]) == "number" then
        table.insert(parts, string.format("%s %s", key, tostring(b.effective[key])))
      end
    end
    effective = #parts > 0 and table.concat(parts, ", ") or nil
  end
  local clamps = {}
  for _, clamp in ipairs(type(b.clamped) == "table" and b.clamped or {}) do
    if type(clamp) == "table" and type(clamp.setting) == "string" then
      local reason = type(clamp.reason) == "string" and clamp.reason ~= ""
        and (": " .. clamp.reason) or ""
      table.insert(clamps, string.format("%s %s asked, %s used%s", clamp.setting,
        field(clamp.asked), field(clamp.effective), reason))
    end
  end
  return effective, clamps
end

--- The lines :GhostfimStatus shows for a ghostfim/status result.
function M.describe(status)
  local model = type(status.model) == "table" and status.model or {}
  local lines = {
    string.format("ghostfim %s: model %s (%s, %s, %s GPU layers)", field(status.state),
      field(model.preset), field(model.name), field(model.device), field(model.nGpuLayers)),
  }
  if status.error ~= nil and status.error ~= vim.NIL then
    table.insert(lines, "error: " .. tostring(status.error))
  end
  local latency = type(status.latency) == "table" and status.latency or {}
  if type(latency.n) == "number" and latency.n > 0 then
    local function p(key)
      return type(latency[key]) == "number" and ms(latency[key]) or "?"
    end
    table.insert(lines, string.format(
      "latency over %d requests: TTFT p50 %s p95 %s p99 %s, total p50 %s p95 %s", latency.n,
      p("ttftP50"), p("ttftP95"), p("ttftP99"), p("totalP50"), p("totalP95")))
  else
    table.insert(lines, "latency: no requests answered yet")
  end
  local acceptance = M.describe_acceptance(status)
  if acceptance then
    table.insert(lines, "suggestions: " .. acceptance)
  end
  local effective, clamps = M.describe_budgets(status)
  if effective then
    table.insert(lines, "prompt budgets: " .. effective)
  end
  for _, clamp in ipairs(clamps) do
    table.insert(lines, "clamped: " .. clamp)
  end
  return lines
end

return M
