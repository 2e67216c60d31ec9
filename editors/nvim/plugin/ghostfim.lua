-- Loaded at startup from the runtimepath: only :GhostfimInstall, so that a plugin manager's build
-- step (lazy.nvim: `build = ":GhostfimInstall"`) can run it before require("ghostfim").setup().
-- Everything else starts with setup() or vim.lsp.enable("ghostfim").
if vim.g.loaded_ghostfim_install then
  return
end
vim.g.loaded_ghostfim_install = true
require("ghostfim.install").create_command()
