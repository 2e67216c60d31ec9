-- ghostfim for Neovim 0.11+'s vim.lsp.config / vim.lsp.enable:
--
--   vim.lsp.config("ghostfim", { settings = { ghostfim = { model = { size = "small" } } } })
--   vim.lsp.enable("ghostfim")
--
-- Neovim then starts `ghostfim serve` for the filetypes below, and ghostfim's plugin draws the
-- ghost text in the buffers it attaches (its on_attach; the keys of :help ghostfim-keymaps).
-- Settings (docs/protocol.md) go in `settings.ghostfim`; they are also sent as
-- initializationOptions, so the first model the server loads is the configured one.
-- A config of your own that sets on_attach should call
-- require("ghostfim").lsp_hooks().on_attach(client, bufnr) from it.
local config = require("ghostfim.config")
local hooks = require("ghostfim").lsp_hooks()

return {
  cmd = config.default_cmd(),
  filetypes = config.default_filetypes,
  root_markers = {
    ".git", "pyproject.toml", "setup.py", "package.json", "Cargo.toml", "go.mod", "Makefile",
  },
  init_options = vim.empty_dict(),
  settings = { ghostfim = vim.empty_dict() },
  handlers = hooks.handlers,
  before_init = hooks.before_init,
  on_init = hooks.on_init,
  on_attach = hooks.on_attach,
  on_exit = hooks.on_exit,
}
