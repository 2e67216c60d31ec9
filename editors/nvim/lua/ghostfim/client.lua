-- LSP plumbing: one client for every buffer, and call wrappers that hide the API differences
-- between Neovim 0.7 (functions on the client table) and 0.11+ (methods, `client:request`).
local M = {}

local uses_method_calls = vim.fn.has("nvim-0.11") == 1

M.name = "ghostfim"
M.id = nil

local function call(client, name, ...)
  if uses_method_calls then
    return client[name](client, ...)
  end
  return client[name](...)
end

--- The running client, or nil before start() or after the server exited.
function M.get()
  if not M.id then
    return nil
  end
  local client = vim.lsp.get_client_by_id(M.id)
  if not client or (client.is_stopped and call(client, "is_stopped")) then
    return nil
  end
  return client
end

local function lsp_config(cfg, settings, hooks)
  return {
    name = M.name,
    cmd = cfg.cmd,
    root_dir = vim.loop.cwd(),
    init_options = settings,
    settings = { ghostfim = settings },
    handlers = hooks.handlers,
    on_init = hooks.on_init,
    on_exit = hooks.on_exit,
  }
end

local function reuse_ours(client)
  return client.id == M.id and not (client.is_stopped and call(client, "is_stopped"))
end

--- Starts the server on first use and attaches `bufnr` to it; later calls reuse that client.
--- `hooks` holds the client's `handlers`, `on_init` and `on_exit`.
--- @return integer|nil client id, string|nil error
function M.attach(bufnr, cfg, settings, hooks)
  local running = M.get()
  if running then
    vim.lsp.buf_attach_client(bufnr, running.id)
    return running.id
  end
  if vim.fn.executable(cfg.cmd[1]) ~= 1 then
    return nil, string.format(
      "server command %q is not executable: install ghostfim or set `cmd` in setup()", cfg.cmd[1])
  end
  local config = lsp_config(cfg, settings, hooks)
  local ok, id = pcall(function()
    if vim.lsp.start then
      -- 0.8+: vim.lsp.start() attaches too; start_client() is deprecated from 0.11 on.
      return vim.lsp.start(config, { bufnr = bufnr, reuse_client = reuse_ours })
    end
    local new_id = vim.lsp.start_client(config)
    if new_id then
      vim.lsp.buf_attach_client(bufnr, new_id)
    end
    return new_id
  end)
  if not ok or not id then
    return nil, "could not start the server: " .. tostring(id)
  end
  M.id = id
  return id
end

-- Clients we stopped ourselves: their exit is neither an error nor news to act on.
local stopped_on_purpose = {}

function M.stop()
  local client = M.get()
  if client then
    stopped_on_purpose[client.id] = true
    call(client, "stop")
  end
  M.id = nil
end

--- Whether the exit of client `id` calls for a reaction: it is ours and we did not stop it.
function M.exit_unexpected(id)
  return id == M.id and not stopped_on_purpose[id]
end

--- @return boolean sent, integer|nil request id
function M.request(method, params, handler, bufnr)
  local client = M.get()
  if not client then
    return false
  end
  return call(client, "request", method, params, handler, bufnr)
end

--- Replaces the settings the client holds (answers to workspace/configuration) and sends them.
function M.change_settings(settings)
  local client = M.get()
  if client then
    client.config.settings = { ghostfim = settings }
    call(client, "notify", "workspace/didChangeConfiguration", { settings = { ghostfim = settings } })
  end
end

function M.notify(method, params)
  local client = M.get()
  if client then
    call(client, "notify", method, params)
  end
end

function M.cancel(request_id)
  local client = M.get()
  if client and request_id then
    call(client, "cancel_request", request_id)
  end
end

--- The LSP position of (row, byte col) in bufnr, in the encoding the client negotiated.
function M.position(bufnr, row, col)
  local client = M.get()
  local encoding = client and client.offset_encoding or "utf-16"
  return { line = row, character = vim.lsp.util.character_offset(bufnr, row, col, encoding) }
end

--- The version the client last sent for bufnr (what ghostfim/ghostText echoes back).
function M.document_version(bufnr)
  local versions = vim.lsp.util.buf_versions
  return versions and versions[bufnr] or vim.api.nvim_buf_get_changedtick(bufnr)
end

return M
