-- Options of require("ghostfim").setup(): their defaults, and validation that names the
-- offending option so a typo in a user's config is found at startup, not at the first keystroke.
local M = {}

M.model_sizes = { "tiny", "small", "medium", "large" }

-- Programming languages only: prose filetypes (markdown, text, gitcommit) are left out on
-- purpose because a code model's suggestions there are noise. Add them in `filetypes` if wanted.
M.default_filetypes = {
  "bash", "c", "clojure", "cmake", "cpp", "cs", "css", "cuda", "dart", "dockerfile", "elixir",
  "erlang", "fish", "fsharp", "go", "graphql", "haskell", "hcl", "html", "java", "javascript",
  "javascriptreact", "json", "jsonc", "julia", "kotlin", "lua", "make", "nim", "objc", "objcpp",
  "ocaml", "perl", "php", "proto", "python", "r", "ruby", "rust", "scala", "scss", "sh", "sql",
  "svelte", "swift", "terraform", "toml", "typescript", "typescriptreact", "vim", "vue", "yaml",
  "zig", "zsh",
}

-- editors/nvim in a ghostfim checkout: lua/ghostfim/config.lua is three levels down.
local plugin_root = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h:h")

--- The server command when `cmd` is not given: `ghostfim serve` when `ghostfim` is on $PATH,
--- else the server :GhostfimInstall set up in stdpath("data")/ghostfim, else the checkout's
--- own `.venv/bin/ghostfim` (what `make setup` in the repository holding this plugin
--- installs), else `ghostfim serve` anyway (the error then names it).
function M.default_cmd()
  if vim.fn.executable("ghostfim") == 1 then
    return { "ghostfim", "serve" }
  end
  local installed = require("ghostfim.install").server()
  if installed then
    return { installed, "serve" }
  end
  local venv = vim.fn.fnamemodify(plugin_root .. "/../../.venv/bin/ghostfim", ":p")
  if vim.fn.executable(venv) == 1 then
    return { venv, "serve" }
  end
  return { "ghostfim", "serve" }
end

M.defaults = {
  enabled = true,
  -- nil: M.default_cmd()
  cmd = nil,
  filetypes = M.default_filetypes,
  -- Empty: the server picks the preset (small on CPU, medium on a CUDA GPU).
  model = {},
  -- Server settings (docs/protocol.md), sent as-is; `model` above is merged into them.
  settings = {},
  -- Use Neovim's own vim.lsp.inline_completion (0.12+) when it exists.
  native = true,
  -- Alt chords and <C-g> prefixes are left alone by nvim-cmp and blink.cmp, unlike
  -- <Tab>, <C-n>, <C-p>, <C-y> or <CR>. `false` leaves an action unmapped.
  keymaps = {
    accept = "<M-l>",
    accept_word = "<M-w>",
    accept_line = "<M-j>",
    dismiss = "<M-e>",
    trigger = "<M-\\>",
  },
}

M.known_options = vim.tbl_extend("force", { cmd = true }, M.defaults)

local function fail(fmt, ...)
  error({ ghostfim_config = string.format(fmt, ...) })
end

local function describe(value)
  if type(value) == "string" then
    return string.format("%q", value)
  end
  return vim.inspect(value)
end

local function check_type(name, value, expected, optional)
  if value == nil and optional then
    return
  end
  if type(value) ~= expected then
    fail("option '%s' must be a %s, got %s", name, expected, describe(value))
  end
end

local function check_string_list(name, value, allow_empty)
  if type(value) ~= "table" or (not allow_empty and #value == 0) then
    fail("option '%s' must be a list of strings, got %s", name, describe(value))
  end
  for i, item in ipairs(value) do
    if type(item) ~= "string" or item == "" then
      fail("option '%s' item %d must be a non-empty string, got %s", name, i, describe(item))
    end
  end
end

local function check_known_keys(name, value, known)
  for key in pairs(value) do
    if known[key] == nil then
      local keys = vim.tbl_keys(known)
      table.sort(keys)
      fail("unknown option '%s%s' (known: %s)", name, tostring(key), table.concat(keys, ", "))
    end
  end
end

function M.check_model_size(size)
  if not vim.tbl_contains(M.model_sizes, size) then
    return false, string.format("model size must be one of %s, got %s",
      table.concat(M.model_sizes, ", "), describe(size))
  end
  return true
end

local function validate(cfg)
  check_type("enabled", cfg.enabled, "boolean")
  check_type("native", cfg.native, "boolean")
  check_string_list("cmd", cfg.cmd, false)
  check_string_list("filetypes", cfg.filetypes, true)

  check_type("model", cfg.model, "table")
  check_known_keys("model.", cfg.model, { size = true, path = true })
  if cfg.model.size ~= nil then
    local ok, why = M.check_model_size(cfg.model.size)
    if not ok then
      fail("option 'model.size': %s", why)
    end
  end
  check_type("model.path", cfg.model.path, "string", true)

  check_type("settings", cfg.settings, "table")
  check_type("settings.model", cfg.settings.model, "table", true)

  check_type("keymaps", cfg.keymaps, "table")
  check_known_keys("keymaps.", cfg.keymaps, M.defaults.keymaps)
  for action, lhs in pairs(cfg.keymaps) do
    if lhs ~= false and (type(lhs) ~= "string" or lhs == "") then
      fail("option 'keymaps.%s' must be a key sequence like \"<M-l>\" or false, got %s",
        action, describe(lhs))
    end
  end
end

--- Merges user options over the defaults and validates the result.
--- Lists (cmd, filetypes) replace the default list; tables of named options merge key by key.
--- @return table|nil config, string|nil error message naming the bad option
function M.resolve(user)
  if user ~= nil and type(user) ~= "table" then
    return nil, "setup() takes a table of options, got " .. describe(user)
  end
  user = user or {}
  local ok, result = pcall(function()
    check_known_keys("", user, M.known_options)
    local cfg = vim.deepcopy(M.defaults)
    cfg.cmd = M.default_cmd()
    -- Found, not given: :GhostfimInstall may find a better one later (init.lua's installed()).
    cfg.cmd_is_default = user.cmd == nil
    for key, value in pairs(user) do
      if (key == "keymaps" or key == "model") and type(value) == "table" then
        cfg[key] = vim.tbl_extend("force", cfg[key], value)
      else
        cfg[key] = vim.deepcopy(value)
      end
    end
    validate(cfg)
    return cfg
  end)
  if ok then
    return result
  end
  if type(result) == "table" and result.ghostfim_config then
    return nil, result.ghostfim_config
  end
  error(result, 0)
end

--- The settings object the server receives (initializationOptions and
--- didChangeConfiguration): `settings` with the `model` shortcut merged into `settings.model`.
function M.server_settings(cfg)
  local settings = vim.deepcopy(cfg.settings)
  local model = vim.tbl_extend("force", settings.model or {}, cfg.model)
  settings.model = next(model) and model or nil
  -- An empty Lua table would be encoded as a JSON array; the server expects an object.
  if next(settings) == nil then
    return vim.empty_dict()
  end
  return settings
end

return M
