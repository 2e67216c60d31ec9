-- Headless test of lsp/ghostfim.lua on Neovim 0.11+: vim.lsp.config + vim.lsp.enable start the
-- real server, the plugin draws its ghost text, one server serves the project's buffers, and
-- the server is restarted after a crash.
--
--   nvim --headless -u NONE -i NONE -n -c 'luafile editors/nvim/tests/lsp_config.lua'
--
-- Environment: GHOSTFIM_SERVER_CMD, GHOSTFIM_TEST_MODEL (default "tiny"), as for run.lua.

local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/harness.lua")

local model = vim.env.GHOSTFIM_TEST_MODEL or "tiny"

local function ghostfim_clients(bufnr)
  return vim.lsp.get_clients({ name = "ghostfim", bufnr = bufnr })
end

local function check_resolved_config()
  local name = "vim.lsp.config.ghostfim from lsp/ghostfim.lua"
  vim.lsp.config("ghostfim", {
    cmd = H.server_cmd,
    -- The filter is calibrated on the Qwen models; the tiny smoke-test model is too unsure of
    -- everything it writes for it (these tests are about the plugin's mechanics).
    settings = { ghostfim = { model = { size = model }, filter = "off" } },
  })
  local resolved = vim.lsp.config.ghostfim
  if type(resolved) ~= "table" then
    return H.fail(name, "no config resolved: " .. vim.inspect(resolved))
  end
  local problems = {}
  if not vim.deep_equal(resolved.cmd, H.server_cmd) then
    table.insert(problems, "cmd " .. vim.inspect(resolved.cmd))
  end
  for _, filetype in ipairs({ "python", "lua", "rust", "typescript" }) do
    if not vim.tbl_contains(resolved.filetypes or {}, filetype) then
      table.insert(problems, "filetypes lack " .. filetype)
    end
  end
  if vim.tbl_contains(resolved.filetypes or {}, "markdown") then
    table.insert(problems, "prose filetypes are in")
  end
  if not vim.tbl_contains(resolved.root_markers or {}, ".git")
      or not vim.tbl_contains(resolved.root_markers or {}, "pyproject.toml") then
    table.insert(problems, "root_markers " .. vim.inspect(resolved.root_markers))
  end
  for _, hook in ipairs({ "on_attach", "on_init", "on_exit", "before_init" }) do
    if type(resolved[hook]) ~= "function" then
      table.insert(problems, hook .. " missing")
    end
  end
  if type(resolved.handlers) ~= "table" or not resolved.handlers["ghostfim/ghostText"] then
    table.insert(problems, "no ghostfim/ghostText handler")
  end
  if (resolved.settings.ghostfim.model or {}).size ~= model then
    table.insert(problems, "settings not merged: " .. vim.inspect(resolved.settings))
  end
  if #problems > 0 then
    return H.fail(name, table.concat(problems, "; "))
  end
  H.pass(name, "cmd, filetypes, root markers, hooks, settings merged")
  return true
end

local function type_for_ghost(name)
  vim.api.nvim_input("<Esc>Go")
  H.sleep(50)
  H.type_keys("    return fib")
  local shown = H.wait_for_stable_ghost(H.ghost_wait_ms + 1000, 300)
  if not shown then
    return H.fail(name, "no ghost text")
  end
  return H.pass(name, string.format("%q", shown)) and shown
end

local function main()
  H.say("ghostfim lsp/ghostfim.lua test: %s, server %q, model %s", H.version_line(),
    table.concat(H.server_cmd, " "), model)
  if vim.fn.has("nvim-0.11") ~= 1 then
    return H.fail("Neovim 0.11+", "vim.lsp.config needs Neovim 0.11")
  end
  if not check_resolved_config() then
    return
  end
  local project = vim.fn.resolve(vim.fn.tempname())
  vim.fn.mkdir(project .. "/pkg", "p")
  vim.fn.writefile({ "[project]", 'name = "example"' }, project .. "/pyproject.toml")
  vim.lsp.enable("ghostfim")
  H.open_python_file(project .. "/pkg")

  local name = "vim.lsp.enable starts the server for a Python buffer"
  local lsp_client = H.wait_for(10000, function()
    return ghostfim_clients(0)[1]
  end, 20)
  if not lsp_client then
    return H.fail(name, "no ghostfim client attached")
  end
  if lsp_client.root_dir ~= project then
    return H.fail(name, string.format("root_dir %s, expected %s", tostring(lsp_client.root_dir),
      project))
  end
  H.pass(name, "root_dir from pyproject.toml")
  -- The model named in settings.ghostfim is the first one loaded (before_init).
  if not H.check_server_ready(model) then
    return
  end
  local shown = type_for_ghost("ghost text drawn for the client vim.lsp.enable started")
  if shown then
    local before = vim.api.nvim_get_current_line()
    vim.api.nvim_input(require("ghostfim").config().keymaps.accept)
    H.sleep(100)
    local after = vim.api.nvim_get_current_line()
    local first_line = vim.split(shown, "\n", { plain = true })[1]
    if after ~= before .. first_line then
      H.fail("accept key", string.format("line %q, expected %q", after, before .. first_line))
    else
      H.pass("accept key inserts it")
    end
  end
  vim.api.nvim_input("<Esc>")
  H.sleep(30)

  -- A second buffer of the project: the same server, no second client (setup() too leaves
  -- starting servers to vim.lsp.enable).
  require("ghostfim").setup({ cmd = H.server_cmd })
  vim.fn.writefile({ "import os" }, project .. "/pkg/other.py")
  vim.cmd("edit " .. vim.fn.fnameescape(project .. "/pkg/other.py"))
  H.sleep(500)
  local all = vim.lsp.get_clients({ name = "ghostfim" })
  if #all ~= 1 or not vim.lsp.buf_is_attached(0, all[1].id) then
    H.fail("one server for the project", string.format("%d ghostfim clients", #all))
  else
    H.pass("one server for the project, attached to both buffers")
  end

  vim.cmd("checkhealth ghostfim")
  local health = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n")
  vim.cmd("tabclose")
  if not health:find("started by vim.lsp.enable", 1, true)
      or not health:find("is running", 1, true) then
    H.fail(":checkhealth ghostfim", health)
  else
    H.pass(":checkhealth ghostfim names vim.lsp.enable")
  end

  -- A crash: the plugin starts the same config again for the open buffers.
  local old_id = all[1] and all[1].id
  local messages, stop = H.collect_notify()
  vim.loop.kill(H.server_pid(), "sigkill")
  local new_client = H.wait_for(10000, function()
    local c = ghostfim_clients(0)[1]
    return c and c.id ~= old_id and c
  end, 20)
  stop()
  if not new_client then
    return H.fail("restart after SIGKILL", "no new client; " .. table.concat(messages, " | "))
  end
  H.pass("restart after SIGKILL", string.format("client %s -> %d", tostring(old_id),
    new_client.id))
  if not H.check_server_ready(model, 60000) then
    return
  end
  type_for_ghost("ghost text again after the restart")
  vim.api.nvim_input("<Esc>")
  H.sleep(30)
end

H.run(main)
