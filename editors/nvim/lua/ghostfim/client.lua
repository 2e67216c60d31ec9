-- LSP plumbing: one client for every buffer, and call wrappers that hide the API differences
-- between Neovim 0.7 (functions on the client table) and 0.11+ (methods, `client:request`).
-- The client is either started by ghostfim (setup()) or by Neovim's vim.lsp.enable("ghostfim")
-- with lsp/ghostfim.lua (0.11+); in the second case ghostfim adopts it.
local M = {}

local uses_method_calls = vim.fn.has("nvim-0.11") == 1

M.name = "ghostfim"
M.id = nil
-- The config a client adopted from vim.lsp.enable was started with (to start it again after a
-- crash); nil for the clients ghostfim starts itself.
M.adopted_config = nil
-- The initialize result's serverInfo ({ name, version }) of the current client.
M.server_info = nil

local function call(client, name, ...)
  if uses_method_calls then
    return client[name](client, ...)
  end
  return client[name](...)
end
M.call = call

local function is_stopped(client)
  return client.is_stopped ~= nil and call(client, "is_stopped")
end

--- vim.lsp.get_clients where it exists (0.10+; 0.11 deprecates get_active_clients).
function M.get_clients(filter)
  if vim.lsp.get_clients then
    return vim.lsp.get_clients(filter)
  end
  return vim.lsp.get_active_clients(filter)
end

--- The running client, or nil before start() or after the server exited.
function M.get()
  if not M.id then
    return nil
  end
  local client = vim.lsp.get_client_by_id(M.id)
  if not client or is_stopped(client) then
    return nil
  end
  return client
end

--- Whether Neovim starts the ghostfim server itself (vim.lsp.enable("ghostfim"), 0.11+).
function M.managed_by_neovim()
  if vim.lsp.is_enabled then
    return vim.lsp.is_enabled(M.name)
  end
  return vim.lsp._enabled_configs ~= nil and vim.lsp._enabled_configs[M.name] ~= nil
end

--- Makes `client` the one ghostfim talks to (called from its on_init and on_attach).
function M.adopt(client)
  if M.id ~= client.id then
    M.server_info = nil
  end
  M.id = client.id
  if M.managed_by_neovim() then
    M.adopted_config = client.config
  end
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
  return client.id == M.id and not is_stopped(client)
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
      "server command %q is not executable: run :GhostfimInstall, install ghostfim, or set " ..
      "`cmd` in setup()", cfg.cmd[1])
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
  if M.id ~= id then
    M.server_info = nil
  end
  M.id = id
  return id
end

--- Starts the adopted client's config again for `buffers` (after a crash or :GhostfimRestart).
--- Its on_attach adopts the new client.
--- @return boolean whether a client was started
function M.restart_adopted(config, buffers)
  local started = false
  for _, bufnr in ipairs(buffers) do
    -- vim.lsp.start() attaches whatever it is given; vim.lsp.enable would only attach these.
    local fits = vim.bo[bufnr].buftype == "" and (not config.filetypes
      or vim.tbl_contains(config.filetypes, vim.bo[bufnr].filetype))
    if fits then
      local ok, id = pcall(vim.lsp.start, config, { bufnr = bufnr })
      started = started or (ok and id ~= nil)
    end
  end
  return started
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
  M.server_info = nil
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

--- A request that waits for its answer (for :checkhealth only: it blocks the editor).
--- @return table|nil result, string|nil error
function M.request_sync(method, params, timeout_ms, bufnr)
  local client = M.get()
  if not client then
    return nil, "the server is not running"
  end
  local answer, err = call(client, "request_sync", method, params, timeout_ms, bufnr)
  if not answer then
    return nil, tostring(err or "no answer")
  end
  if answer.err then
    return nil, tostring(answer.err.message or vim.inspect(answer.err))
  end
  return answer.result
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

function M.offset_encoding()
  local client = M.get()
  return client and client.offset_encoding or "utf-16"
end

--- The LSP position of (row, byte col) in bufnr, in the encoding the client negotiated.
function M.position(bufnr, row, col)
  return {
    line = row,
    character = vim.lsp.util.character_offset(bufnr, row, col, M.offset_encoding()),
  }
end

--- The byte column of LSP `character` in `line` (a string), in the negotiated encoding.
function M.byte_col(line, character)
  local encoding = M.offset_encoding()
  if encoding == "utf-8" then
    return math.min(character, #line)
  end
  local ok, col
  if vim.fn.has("nvim-0.11") == 1 then
    ok, col = pcall(vim.str_byteindex, line, encoding, character, false)
  else
    ok, col = pcall(vim.str_byteindex, line, character, encoding == "utf-16")
  end
  return ok and col or #line
end

--- The version the client last sent for bufnr (what ghostfim/ghostText echoes back).
function M.document_version(bufnr)
  local versions = vim.lsp.util.buf_versions
  return versions and versions[bufnr] or vim.api.nvim_buf_get_changedtick(bufnr)
end

return M
