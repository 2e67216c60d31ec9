-- ghostfim: inline code completion (ghost text) from the `ghostfim serve` LSP server.
-- See :help ghostfim. Public API: setup(), accept(), accept_word(), accept_line(), dismiss(),
-- trigger(), toggle(), set_model(), status(), statusline(), namespace(), config().
local client = require("ghostfim.client")
local config = require("ghostfim.config")
local ghost = require("ghostfim.ghost")
local native = require("ghostfim.native")
local status = require("ghostfim.status")
local suggestion = require("ghostfim.suggestion")

local M = {}

local cfg = nil
-- Who requests and draws suggestions: ghostfim.suggestion, or ghostfim.native on 0.12+.
local backend = suggestion
local attached = {} -- bufnr -> list of the keys mapped in it
local augroup = nil
local enabled = true
local start_error_reported = false

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
  on_init = function()
    vim.schedule(status.schedule_refresh)
  end,
  -- Neovim itself reports a server that quit abnormally; we only stop showing it as working.
  -- Buffers are attached again (and the server restarted) on :GhostfimToggle or a new file.
  on_exit = function(_, _, client_id)
    vim.schedule(function()
      if client.exit_unexpected(client_id) then
        status.server_failed()
        attached = {}
      end
    end)
  end,
}

-- Each action returns whether it did something; if not, its key does what it would do
-- without ghostfim (so a remap of <Tab> still inserts a tab when nothing is suggested).
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
      vim.keymap.set("i", lhs, function()
        if not actions[action](bufnr) then
          local keys = vim.api.nvim_replace_termcodes(lhs, true, false, true)
          vim.api.nvim_feedkeys(keys, "n", false)
        end
      end, { buffer = bufnr, desc = "ghostfim: " .. action:gsub("_", " ") })
      table.insert(mapped, lhs)
    end
  end
  return mapped
end

local function unmap_keys()
  for bufnr, mapped in pairs(attached) do
    if vim.api.nvim_buf_is_valid(bufnr) then
      for _, lhs in ipairs(mapped) do
        pcall(vim.keymap.del, "i", lhs, { buffer = bufnr })
      end
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

local function attach(bufnr)
  if not enabled or attached[bufnr] or not wants(bufnr) then
    return
  end
  local id, err = client.attach(bufnr, cfg, config.server_settings(cfg), lsp_hooks)
  if not id then
    status.server_failed()
    if not start_error_reported then
      start_error_reported = true
      notify_error(err)
    end
    return
  end
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
    end,
  })
end

local function attach_loaded_buffers()
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
end

local function teardown()
  backend.clear()
  unmap_keys()
  attached = {}
  client.stop()
  status.reset()
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
  backend = (cfg.native and native.available()) and native or suggestion

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

--- Turns suggestions on or off (`on` nil: the other way). Turning on attaches open buffers.
--- @return boolean whether suggestions are now on
function M.toggle(on)
  if on == nil then
    on = not enabled
  end
  enabled = on
  status.enabled = on
  if backend == native then
    native.set_enabled(on, vim.tbl_keys(attached))
  else
    suggestion.set_enabled(on)
  end
  if on and cfg then
    attach_loaded_buffers()
  end
  return enabled
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

return M
