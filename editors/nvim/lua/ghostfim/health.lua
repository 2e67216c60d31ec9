-- :checkhealth ghostfim: the install :GhostfimInstall made, the server (found, its version),
-- the model's state, the GPU the server uses, this session's accepted and refused suggestions,
-- the prompt budgets in effect, restarts after crashes, and keymap conflicts.
local M = {}

-- 0.10+ has vim.health.start/ok/...; 0.8 and 0.9 vim.health.report_*; 0.7 require("health").
local function reporter()
  local h = vim.health
  if h and h.start then
    return { start = h.start, ok = h.ok, info = h.info, warn = h.warn, error = h.error }
  end
  h = (h and h.report_start) and h or require("health")
  return {
    start = h.report_start, ok = h.report_ok, info = h.report_info, warn = h.report_warn,
    error = h.report_error,
  }
end

local function server_version(cmd)
  -- `ghostfim --version` where the server has it; an error or anything else says nothing.
  local ok, output = pcall(vim.fn.system, { cmd[1], "--version" })
  if ok and vim.v.shell_error == 0 and type(output) == "string" then
    local version = output:match("%d+%.%d+[%w%.%-]*")
    if version then
      return version
    end
  end
  return nil
end

local function field(value)
  if value == nil or value == vim.NIL then
    return "?"
  end
  return tostring(value)
end

function M.check()
  local report = reporter()
  local ghostfim = require("ghostfim")
  local client = require("ghostfim.client")
  local config = require("ghostfim.config")
  local keys = require("ghostfim.keys")
  local status_text = require("ghostfim.status")
  local state = ghostfim._health()
  local cfg = state.cfg

  report.start("ghostfim: setup")
  local version = vim.version and vim.version()
  if version then
    report.info(string.format("Neovim %d.%d.%d", version.major, version.minor, version.patch))
  end
  local running = client.get()
  if client.managed_by_neovim() then
    report.ok("started by vim.lsp.enable('ghostfim') (lsp/ghostfim.lua)")
  elseif cfg then
    report.ok("require('ghostfim').setup() was called")
  else
    report.warn("not set up", {
      "call require('ghostfim').setup() in your config, or vim.lsp.enable('ghostfim') on 0.11+" })
  end
  if cfg and not state.enabled then
    report.warn("suggestions are turned off (:GhostfimToggle turns them on)")
  end

  report.start("ghostfim: install (:GhostfimInstall)")
  local install = require("ghostfim.install")
  local paths = install.paths()
  local recorded = install.state()
  if install.progress() then
    report.info("an install is running: " .. install.progress())
  elseif install.server() then
    report.ok(string.format("installed and ready: %s (set up %s)", paths.server,
      field(recorded.ready_at)))
  elseif install.last_error then
    report.error("the last install failed: " .. install.last_error, {
      ":GhostfimInstall tries again (:GhostfimInstall! from scratch)",
      "the whole output is in " .. paths.log })
  elseif vim.fn.executable(paths.server) == 1 then
    report.warn("an install in " .. paths.root .. " did not finish", {
      ":GhostfimInstall finishes it" })
  else
    report.info("not installed in " .. paths.root ..
      " (:GhostfimInstall sets the server up there; not needed when `ghostfim` is on $PATH)")
  end

  report.start("ghostfim: server")
  local cmd = (running and running.config and running.config.cmd)
    or (client.adopted_config and client.adopted_config.cmd)
    or (cfg and cfg.cmd) or config.default_cmd()
  if type(cmd) ~= "table" then
    report.info("server command: a function (vim.lsp.config)")
  elseif vim.fn.executable(cmd[1]) == 1 then
    report.ok(string.format("server command found: %s (%s)", table.concat(cmd, " "),
      vim.fn.exepath(cmd[1])))
  else
    report.error(string.format("server command not found: %s", cmd[1]), {
      ":GhostfimInstall sets the server up (or `pipx install` ghostfim, then `ghostfim setup`)",
      "or set `cmd` in setup(), e.g. { '/path/to/ghostfim/.venv/bin/ghostfim', 'serve' }" })
  end
  local info = client.server_info
  if running and type(info) == "table" and info.version then
    report.ok(string.format("server %s %s is running (client id %d)", field(info.name),
      field(info.version), running.id))
  elseif running then
    report.ok(string.format("server is running (client id %d)", running.id))
  else
    local found = type(cmd) == "table" and vim.fn.executable(cmd[1]) == 1 and server_version(cmd)
    if found then
      report.info("server version " .. found)
    end
    if state.server_down then
      report.error("the server is not running: it could not start or kept crashing", {
        ":GhostfimRestart starts it", ":messages shows the last errors" })
    else
      report.info("the server is not running (it starts with the first buffer of a " ..
        "configured filetype)")
    end
  end
  if state.last_exit then
    local text = string.format("the server crashed (last: exit code %s, signal %s); " ..
      "automatic restarts in the last %d minutes: %d of at most %d", field(state.last_exit.code),
      field(state.last_exit.signal), ghostfim.RESTART_WINDOW_MS / 60000, state.restarts,
      ghostfim.MAX_RESTARTS)
    if state.server_down then
      report.error(text)
    else
      report.warn(text)
    end
  end

  report.start("ghostfim: model")
  if not running then
    report.info("no server running: model state unknown")
  else
    local status, err = client.request_sync("ghostfim/status", vim.NIL, 3000)
    if not status then
      report.error("ghostfim/status failed: " .. tostring(err))
    else
      local model = type(status.model) == "table" and status.model or {}
      local text = string.format("model %s (%s)", field(model.preset), field(model.name))
      if status.state == "ready" then
        report.ok(text .. " is ready")
      elseif status.state == "loading" then
        report.info((model.preset and text or "the model") .. " is loading")
      else
        report.error(string.format("model state %s: %s", field(status.state),
          field(status.error)))
      end
      local draft = type(model.draft) == "table" and model.draft or nil
      if draft then
        local rate = type(draft.acceptance) == "number"
            and string.format("%d%%", math.floor(draft.acceptance * 100 + 0.5)) or "-"
        local mb = type(model.memoryBytes) == "number" and type(draft.memoryBytes) == "number"
            and string.format(", %.0f MB of weights for both",
              (model.memoryBytes + draft.memoryBytes) / 1048576) or ""
        report.info(string.format("draft %s writes suggestions first: %s of its tokens kept%s",
          field(draft.name), rate, mb))
      end
      if status.switchingTo ~= nil and status.switchingTo ~= vim.NIL then
        report.info("switching to " .. field(status.switchingTo))
      end
      local device = model.device
      if device == nil or device == vim.NIL then
        report.info("GPU: not known yet (the server reports its device once a model is loaded)")
      elseif tostring(device):lower() == "cpu" then
        report.info(string.format("GPU: none in use, the model runs on the CPU (%s GPU layers)",
          field(model.nGpuLayers)))
      else
        report.ok(string.format("GPU: %s, %s layers offloaded", field(device),
          field(model.nGpuLayers)))
      end
      local latency = type(status.latency) == "table" and status.latency or {}
      if type(latency.n) == "number" and latency.n > 0 then
        report.info(string.format("time to first token over %d requests: p50 %s ms, p95 %s ms",
          latency.n, field(latency.ttftP50), field(latency.ttftP95)))
      end
      local acceptance = status_text.describe_acceptance(status)
      if acceptance then
        report.info("suggestions this session: " .. acceptance)
      end
      -- Servers before the budgets report leave it out; then there is nothing to say.
      local effective, clamps = status_text.describe_budgets(status)
      if effective then
        report.info("prompt budgets in effect: " .. effective)
      end
      for _, clamp in ipairs(clamps) do
        report.warn("setting clamped on this machine: " .. clamp)
      end
    end
  end

  report.start("ghostfim: keys")
  if not cfg then
    report.info("not set up: no keys mapped")
    return
  end
  local conflicts = keys.conflicts(cfg.keymaps, state.buffers)
  if #conflicts == 0 then
    local mapped = {}
    for action, lhs in pairs(cfg.keymaps) do
      if lhs then
        table.insert(mapped, string.format("%s %s", action, lhs))
      end
    end
    table.sort(mapped)
    report.ok("no conflicts: " .. table.concat(mapped, ", "))
  end
  for _, conflict in ipairs(conflicts) do
    if conflict.kind == "shadowed" then
      report.error(conflict.text)
    else
      report.warn(conflict.text)
    end
  end
  report.info(string.format("attached buffers: %s", #state.buffers > 0
    and table.concat(state.buffers, ", ") or "none"))
end

return M
