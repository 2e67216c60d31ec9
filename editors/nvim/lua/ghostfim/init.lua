-- ghostfim: inline code completion (ghost text) from the `ghostfim serve` LSP server.
-- See :help ghostfim. Public API: setup(), accept(), accept_word(), accept_line(), dismiss(),
-- trigger(), toggle(), restart(), set_model(), status(), statusline(), namespace(), config(),
-- installed() (after :GhostfimInstall: ghostfim.install), and lsp_hooks() for lsp/ghostfim.lua
-- (vim.lsp.enable, 0.11+).
local client = require("ghostfim.client")
local config = require("ghostfim.config")
local ghost = require("ghostfim.ghost")
local keys = require("ghostfim.keys")
local native = require("ghostfim.native")
local signals = require("ghostfim.signals")
local status = require("ghostfim.status")
local suggestion = require("ghostfim.suggestion")

local M = {}

-- Restarts after a crash, as vscode-languageclient does: at most MAX_RESTARTS within
-- RESTART_WINDOW_MS, then the server stays down and the user is told.
M.MAX_RESTARTS = 4
M.RESTART_WINDOW_MS = 3 * 60 * 1000

local cfg = nil
-- Who requests and draws suggestions: ghostfim.suggestion, or ghostfim.native on 0.12+.
local backend = suggestion
local attached = {} -- bufnr -> list of the keys mapped in it
local augroup = nil
local enabled = true
local start_error_reported = false
-- The server is not running although suggestions are on: it could not start, or it crashed
-- more often than the restart limit allows. The next :GhostfimToggle starts it, not stops it.
local server_down = false
local restarts = {} -- vim.loop.now() of the automatic restarts within the window
local last_exit = nil -- { code, signal, at } of the last crash

local function notify_error(message)
  vim.notify("ghostfim: " .. message, vim.log.levels.ERROR)
end

local function wants(bufnr)
  if not vim.api.nvim_buf_is_valid(bufnr) or vim.bo[bufnr].buftype ~= ""
      or vim.api.nvim_buf_get_name(bufnr) == "" then
    return false -- no file, no URI to talk to the server about
  end
  local filetype = vim.bo[bufnr].filetype
  if vim.tbl_contains(cfg.filetypes, "*") then
    return filetype ~= ""
  end
  return vim.tbl_contains(cfg.filetypes, filetype)
end

-- A stop on request (shutdown then exit 0, or SIGTERM from a forced :LspStop) is no crash.
local function crashed(code, signal)
  return (code ~= nil and code ~= 0) or (signal ~= nil and signal ~= 0 and signal ~= 15)
end

local attach_loaded_buffers

local function start_again(buffers)
  if client.adopted_config then
    local config_copy = client.adopted_config
    client.id = nil
    return client.restart_adopted(config_copy, buffers)
  end
  attach_loaded_buffers()
  return client.get() ~= nil
end

local function on_crash(code, signal, buffers)
  local now = vim.loop.now()
  last_exit = { code = code, signal = signal, at = now }
  restarts = vim.tbl_filter(function(at)
    return now - at < M.RESTART_WINDOW_MS
  end, restarts)
  if #restarts >= M.MAX_RESTARTS then
    server_down = true
    notify_error(string.format(
      "the server crashed %d times in %d minutes (last: exit code %s, signal %s) and is not " ..
      "restarted again. :GhostfimRestart starts it; :checkhealth ghostfim may tell why.",
      #restarts + 1, M.RESTART_WINDOW_MS / 60000, tostring(code), tostring(signal)))
    return
  end
  table.insert(restarts, now)
  vim.notify(string.format("ghostfim: the server exited (exit code %s, signal %s); restarting it",
    tostring(code), tostring(signal)), vim.log.levels.WARN)
  if not start_again(buffers) then
    server_down = true
  end
end

local lsp_hooks = {
  handlers = {
    ["ghostfim/ghostText"] = function(_, params)
      backend.on_ghost_text(params)
    end,
    ["ghostfim/stats"] = function(_, params)
      status.on_stats(params)
    end,
    ["ghostfim/statusChanged"] = function(_, params)
      status.update(params)
    end,
    ["$/progress"] = function(err, params, ctx, handler_config)
      status.on_progress(params)
      local default = vim.lsp.handlers["$/progress"]
      if default then
        return default(err, params, ctx, handler_config)
      end
    end,
  },
  on_init = function(lsp_client, result)
    client.adopt(lsp_client)
    client.server_info = type(result) == "table" and result.serverInfo or nil
    signals.reset() -- a new process: its item ids start over
    server_down = false
    vim.schedule(status.schedule_refresh)
  end,
  -- Neovim itself reports a server that quit abnormally; we restart it (within the limit) and
  -- attach the open buffers again.
  on_exit = function(code, signal, client_id)
    vim.schedule(function()
      if not client.exit_unexpected(client_id) then
        return
      end
      local buffers = vim.tbl_filter(vim.api.nvim_buf_is_loaded, vim.tbl_keys(attached))
      attached = {}
      backend.clear()
      if not crashed(code, signal) then
        client.id = nil
        status.reset()
        return
      end
      status.server_failed()
      if cfg and enabled then
        on_crash(code, signal, buffers)
      else
        server_down = true
      end
    end)
  end,
}

-- Each action returns whether it did something; if not, its key does what it did before
-- ghostfim mapped it (ghostfim.keys), so a remap of <Tab> still inserts a tab, or runs cmp's.
local actions = {
  accept = function(bufnr)
    return backend.accept(bufnr, "all")
  end,
  accept_word = function(bufnr)
    return backend.accept(bufnr, "word")
  end,
  accept_line = function(bufnr)
    return backend.accept(bufnr, "line")
  end,
  dismiss = function(bufnr)
    return backend.dismiss(bufnr)
  end,
  trigger = function(bufnr)
    return enabled and backend.trigger(bufnr)
  end,
}

local function map_keys(bufnr)
  local mapped = {}
  for action, lhs in pairs(cfg.keymaps) do
    if lhs then
      keys.map(bufnr, lhs, function()
        return actions[action](bufnr)
      end, (action:gsub("_", " ")))
      table.insert(mapped, lhs)
    end
  end
  return mapped
end

local function unmap_keys()
  for bufnr, mapped in pairs(attached) do
    for _, lhs in ipairs(mapped) do
      keys.unmap(bufnr, lhs)
    end
  end
end

local function watch_typing(bufnr)
  vim.api.nvim_create_autocmd({ "InsertEnter", "TextChangedI", "TextChangedP", "CursorMovedI" }, {
    group = augroup,
    buffer = bufnr,
    callback = function()
      backend.on_edit(bufnr)
    end,
  })
  vim.api.nvim_create_autocmd({ "InsertLeave", "BufLeave" }, {
    group = augroup,
    buffer = bufnr,
    callback = function()
      backend.clear(bufnr)
    end,
  })
end

-- Keys, autocommands and the renderer for a buffer the client is attached to.
local function after_attach(bufnr)
  attached[bufnr] = map_keys(bufnr)
  -- A buffer attached before the server exited still has our autocommands.
  vim.api.nvim_clear_autocmds({ group = augroup, buffer = bufnr })
  if backend == native then
    native.attach(bufnr)
  else
    watch_typing(bufnr)
  end
  vim.api.nvim_create_autocmd("BufWipeout", {
    group = augroup,
    buffer = bufnr,
    callback = function()
      attached[bufnr] = nil
      keys.forget(bufnr)
    end,
  })
end

local function attach(bufnr)
  if not enabled or attached[bufnr] or not wants(bufnr) then
    return
  end
  if client.managed_by_neovim() then
    -- vim.lsp.enable("ghostfim") starts the server; lsp/ghostfim.lua's on_attach brings the
    -- buffer here (M.lsp_hooks().on_attach). Starting one more would run two servers. A
    -- buffer it attached before this setup() is taken over now.
    local running = client.get_clients({ name = client.name, bufnr = bufnr })[1]
    if running then
      client.adopt(running)
      after_attach(bufnr)
    end
    return
  end
  local id, err = client.attach(bufnr, cfg, config.server_settings(cfg), lsp_hooks)
  if not id then
    status.server_failed()
    server_down = true
    if not start_error_reported then
      start_error_reported = true
      notify_error(err)
    end
    return
  end
  after_attach(bufnr)
end

attach_loaded_buffers = function()
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(bufnr) then
      attach(bufnr)
    end
  end
end

local function create_commands()
  vim.api.nvim_create_user_command("GhostfimModel", function(args)
    M.set_model(args.args)
  end, {
    nargs = 1,
    desc = "ghostfim: switch the model preset",
    complete = function(arg_lead)
      return vim.tbl_filter(function(size)
        return size:sub(1, #arg_lead) == arg_lead
      end, config.model_sizes)
    end,
  })
  vim.api.nvim_create_user_command("GhostfimStatus", function()
    M.status(function(err, result)
      if err then
        notify_error("ghostfim/status failed: " .. tostring(err.message or err))
        return
      end
      local text = table.concat(status.describe(result), "\n")
      vim.api.nvim_echo({ { text } }, true, {})
    end)
  end, { nargs = 0, desc = "ghostfim: show the server's model, state and latency" })
  vim.api.nvim_create_user_command("GhostfimToggle", function()
    vim.api.nvim_echo({ { "ghostfim " .. (M.toggle() and "on" or "off") } }, false, {})
  end, { nargs = 0, desc = "ghostfim: turn suggestions on or off" })
  vim.api.nvim_create_user_command("GhostfimRestart", function()
    M.restart()
  end, { nargs = 0, desc = "ghostfim: restart the server and attach the open buffers" })
  require("ghostfim.install").create_command()
end

local function teardown()
  backend.clear()
  unmap_keys()
  attached = {}
  -- A server that vim.lsp.enable started is Neovim's to stop.
  if not client.managed_by_neovim() then
    client.stop()
    status.reset()
  end
end

--- Starts ghostfim for the configured filetypes. See :help ghostfim-setup.
--- @return boolean whether the options were valid
function M.setup(opts)
  local resolved, err = config.resolve(opts)
  if not resolved then
    notify_error(err)
    return false
  end
  if cfg then
    teardown()
  end
  cfg = resolved
  start_error_reported = false
  server_down = false
  restarts = {}
  backend = (cfg.native and native.available()) and native or suggestion
  status.on_ready = function()
    backend.on_ready(vim.api.nvim_get_current_buf())
  end

  ghost.define_highlight()
  augroup = vim.api.nvim_create_augroup("ghostfim", { clear = true })
  vim.api.nvim_create_autocmd("ColorScheme", {
    group = augroup,
    callback = ghost.define_highlight,
  })
  vim.api.nvim_create_autocmd("FileType", {
    group = augroup,
    callback = function(args)
      attach(args.buf)
    end,
  })
  create_commands()
  M.toggle(cfg.enabled)
  return true
end

--- Turns suggestions on or off (`on` nil: the other way). Turning on attaches open buffers and
--- starts a server that is down.
--- @return boolean whether suggestions are now on
function M.toggle(on)
  if on == nil then
    -- After a failed start, or crashes past the restart limit, suggestions are nominally on
    -- but nothing runs: one press must bring them back, not turn them "off" first.
    on = not enabled or server_down
  end
  enabled = on
  status.enabled = on
  if backend == native then
    native.set_enabled(on, vim.tbl_keys(attached))
  else
    suggestion.set_enabled(on)
  end
  if on and cfg then
    if server_down then
      server_down = false
      restarts = {}
      start_error_reported = false
      if client.adopted_config then
        start_again(vim.tbl_filter(vim.api.nvim_buf_is_loaded, vim.api.nvim_list_bufs()))
      end
    end
    attach_loaded_buffers()
  end
  return enabled
end

--- Stops the server and starts it again, attaching the open buffers (:GhostfimRestart).
--- Resets the crash count, and turns suggestions on.
function M.restart()
  if not cfg then
    notify_error("call require('ghostfim').setup() first")
    return false
  end
  local adopted = client.adopted_config
  backend.clear()
  attached = {}
  client.stop()
  status.reset()
  restarts = {}
  server_down = false
  start_error_reported = false
  if adopted then
    client.restart_adopted(adopted,
      vim.tbl_filter(vim.api.nvim_buf_is_loaded, vim.api.nvim_list_bufs()))
  end
  M.toggle(true)
  return true
end

--- Called when :GhostfimInstall finished: a server found by default (no `cmd` given) is looked
--- for again, and started for the open buffers.
function M.installed()
  if not cfg or not cfg.cmd_is_default then
    return
  end
  local cmd = config.default_cmd()
  if vim.deep_equal(cmd, cfg.cmd) and client.get() then
    return -- already running this one
  end
  cfg.cmd = cmd
  M.restart()
end

function M.accept()
  return actions.accept(vim.api.nvim_get_current_buf())
end

function M.accept_word()
  return actions.accept_word(vim.api.nvim_get_current_buf())
end

function M.accept_line()
  return actions.accept_line(vim.api.nvim_get_current_buf())
end

function M.dismiss()
  return actions.dismiss(vim.api.nvim_get_current_buf())
end

function M.trigger()
  return actions.trigger(vim.api.nvim_get_current_buf())
end

--- Switches the server to another model preset (tiny, small, medium, large) by sending the
--- whole settings object with `model.size` changed. The server loads it in the background.
function M.set_model(size)
  local ok, why = config.check_model_size(size)
  if not ok then
    notify_error(why)
    return false
  end
  if not cfg then
    notify_error("call require('ghostfim').setup() first")
    return false
  end
  cfg.model.size = size
  local settings_model = cfg.settings.model or {}
  if cfg.model.path or settings_model.path then
    -- A GGUF path overrides the preset on the server: send null so the new size takes effect.
    cfg.model.path = vim.NIL
  end
  client.change_settings(config.server_settings(cfg))
  return true
end

--- Asks the server for ghostfim/status; callback(err, result). Never blocks.
function M.status(callback)
  local sent = client.request("ghostfim/status", vim.NIL, function(err, result)
    if not err then
      status.update(result)
    end
    if callback then
      callback(err, result)
    end
  end)
  if not sent and callback then
    callback({ message = "the server is not running" }, nil)
  end
end

--- A short status for 'statusline', e.g. "ghostfim small 52ms p95 90ms", "ghostfim loading 40%",
--- "ghostfim error", or "" before the server started. Reads cached values only.
function M.statusline()
  return status.statusline()
end

--- The extmark namespace that ghost text is drawn in (Neovim's own with native rendering).
function M.namespace()
  return backend.namespace()
end

--- The current configuration (read-only use), nil before setup().
function M.config()
  return cfg
end

--- The client hooks lsp/ghostfim.lua gives vim.lsp.config (0.11+): ghostfim's notification
--- handlers, on_init, on_exit (restart after a crash), and on_attach, which draws ghost text
--- in the buffers Neovim attaches (calling setup() with the defaults if it was not called).
--- before_init sends `settings.ghostfim` as initializationOptions too, so the first model the
--- server loads is the configured one.
function M.lsp_hooks()
  return {
    handlers = lsp_hooks.handlers,
    on_init = lsp_hooks.on_init,
    on_exit = lsp_hooks.on_exit,
    before_init = function(params, lsp_config)
      local settings = type(lsp_config.settings) == "table" and lsp_config.settings.ghostfim
      if type(settings) == "table" and next(settings) ~= nil then
        local base = type(params.initializationOptions) == "table"
          and params.initializationOptions or {}
        params.initializationOptions = vim.tbl_deep_extend("force", base, settings)
      end
    end,
    on_attach = function(lsp_client, bufnr)
      if not cfg then
        M.setup({})
      end
      client.adopt(lsp_client)
      server_down = false
      if enabled and not attached[bufnr] then
        after_attach(bufnr)
      end
    end,
  }
end

--- What :checkhealth ghostfim reports on (ghostfim.health).
function M._health()
  local buffers = vim.tbl_keys(attached)
  table.sort(buffers)
  return {
    cfg = cfg,
    enabled = enabled,
    server_down = server_down,
    restarts = #restarts,
    last_exit = last_exit,
    buffers = buffers,
  }
end

return M
