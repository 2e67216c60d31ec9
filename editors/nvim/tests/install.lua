-- Headless test: a user with no ghostfim anywhere runs :GhostfimInstall and gets ghost text.
--
--   nvim --headless -u NONE -i NONE -n -c 'luafile editors/nvim/tests/install.lua'
--
-- Run by tests/e2e/test_nvim.py with a fresh HOME (and XDG folders) and a $PATH without any
-- ghostfim: the plugin must set its server up in stdpath("data")/ghostfim by itself.
--
-- GHOSTFIM_TEST_PHASE=install (the default): setup() with the defaults finds no server and says
-- so; :GhostfimInstall returns at once and the editor keeps running (a timer's largest gap is
-- measured) while the steps show through vim.notify and the command line; when it is done the
-- server starts, ghost text appears in a Python file, and :checkhealth says the install is there
-- and ready. GHOSTFIM_TEST_PHASE=again: a second Neovim with the same data folder starts that
-- server by itself, with no install.

local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/harness.lua")

local phase = vim.env.GHOSTFIM_TEST_PHASE or "install"
local INSTALL_WAIT_MS = (tonumber(vim.env.GHOSTFIM_TEST_INSTALL_S or "") or 1500) * 1000

-- As a user's startup does: plugin/ files from the runtimepath (-u NONE skips them).
vim.cmd("runtime plugin/ghostfim.lua")
local ghostfim = require("ghostfim")
local install = require("ghostfim.install")
local config = require("ghostfim.config")

local function checkhealth_text()
  vim.cmd("checkhealth ghostfim")
  local text = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n")
  vim.cmd("tabclose")
  return text
end

local function wait_for_ghost_text(name, started)
  H.open_python_file()
  if not H.check_server_ready("small", 300000) then
    return false
  end
  vim.api.nvim_input("Go")
  H.type_keys("    return fib", 60)
  local shown = H.wait_for(60000, H.shown_text, 20)
  if not shown then
    return H.fail(name, "no ghost text within 60 s of typing")
  end
  H.pass(name, string.format("%q", shown))
  vim.api.nvim_input("<Esc>")
  H.sleep(50)
  return vim.loop.now() - started
end

local function first_install()
  local started = vim.loop.now()
  if vim.fn.exists(":GhostfimInstall") ~= 2 then
    return H.fail(":GhostfimInstall exists before setup()", "plugin/ghostfim.lua did not define it")
  end
  H.pass(":GhostfimInstall exists before setup()")
  if vim.fn.executable("ghostfim") == 1 or install.server() then
    return H.fail("no ghostfim anywhere", "found " .. vim.fn.exepath("ghostfim"))
  end

  -- setup() with the defaults: no server to start, and the message says what to run.
  local messages, stop = H.collect_notify()
  ghostfim.setup({ settings = { filter = "off" } })
  H.open_python_file()
  H.sleep(100)
  stop()
  if H.count(messages, ":GhostfimInstall") == 0 then
    return H.fail("no server: the error names :GhostfimInstall", table.concat(messages, "\n"))
  end
  H.pass("no server: the error names :GhostfimInstall")

  -- The editor keeps running while the install does: a timer's largest gap.
  local ticks, largest_gap, last_tick = 0, 0, vim.loop.now()
  local timer = vim.loop.new_timer()
  timer:start(100, 100, vim.schedule_wrap(function()
    local now = vim.loop.now()
    largest_gap = math.max(largest_gap, now - last_tick)
    last_tick, ticks = now, ticks + 1
  end))

  local notes, stop_notes = H.collect_notify()
  local clicked = vim.loop.now()
  vim.cmd("GhostfimInstall")
  local returned_ms = vim.loop.now() - clicked
  if returned_ms > 1000 or not install.progress() then
    stop_notes()
    return H.fail(":GhostfimInstall runs in the background", string.format(
      "returned after %d ms, progress %s", returned_ms, tostring(install.progress())))
  end
  -- A step in progress shows in :checkhealth too.
  local during = checkhealth_text()
  if not during:find("an install is running", 1, true) then
    stop_notes()
    return H.fail(":checkhealth during the install", during)
  end
  H.pass(":GhostfimInstall runs in the background", string.format("returned in %d ms", returned_ms))

  local seen = {}
  local finished = H.wait_for(INSTALL_WAIT_MS, function()
    local now = install.progress()
    if now and seen[#seen] ~= now then
      table.insert(seen, now)
    end
    return not now
  end, 50)
  stop_notes()
  timer:stop()
  timer:close()
  local install_ms = vim.loop.now() - clicked
  if not finished or not install.server() then
    return H.fail(":GhostfimInstall sets the server up", string.format(
      "after %d s: %s\n--- notifications:\n%s", install_ms / 1000, tostring(install.last_error),
      table.concat(notes, "\n")))
  end
  H.pass(":GhostfimInstall sets the server up", string.format("%.1f s, %s", install_ms / 1000,
    install.server()))
  -- Progress throughout: each step announced, and a download percentage on the way.
  local steps = { "looking for Python", "creating a virtual environment", "installing ghostfim",
    "llama.cpp: ", "model: ", "decode check: ", "the server is ready" }
  local missing = {}
  for _, step in ipairs(steps) do
    if H.count(notes, step) == 0 then
      table.insert(missing, step)
    end
  end
  local percent = vim.tbl_filter(function(s)
    return s:find("%d+%%") ~= nil
  end, seen)
  if #missing > 0 then
    return H.fail("the steps showed", "missing " .. table.concat(missing, ", ") .. " in\n" ..
      table.concat(notes, "\n"))
  end
  H.pass("the steps showed", string.format("%d notifications, %d progress states (%s)", #notes,
    #seen, percent[#percent] or "no percentage seen"))
  if ticks < 10 or largest_gap > 2000 then
    return H.fail("the editor was not blocked", string.format("%d ticks, largest gap %d ms",
      ticks, largest_gap))
  end
  H.pass("the editor was not blocked", string.format("%d ticks, largest gap %d ms", ticks,
    largest_gap))

  local health = checkhealth_text()
  if not health:find("installed and ready: " .. install.paths().server, 1, true) then
    return H.fail(":checkhealth says the install is ready", health)
  end
  H.pass(":checkhealth says the install is ready")

  -- The plugin found it by itself: the server now runs from the install.
  if not vim.deep_equal(ghostfim.config().cmd, { install.paths().server, "serve" }) then
    return H.fail("the plugin found the install", vim.inspect(ghostfim.config().cmd))
  end
  local total = wait_for_ghost_text("ghost text after the install", clicked)
  if total then
    H.say("install: :GhostfimInstall -> first ghost text %.1f s (install %.1f s)", total / 1000,
      install_ms / 1000)
  end
  return started
end

local function second_start()
  local started = vim.loop.now()
  local cmd = config.default_cmd()
  if not vim.deep_equal(cmd, { install.paths().server, "serve" }) then
    return H.fail("the install is found by itself", vim.inspect(cmd))
  end
  H.pass("the install is found by itself", cmd[1])
  ghostfim.setup({ settings = { filter = "off" } })
  local total = wait_for_ghost_text("ghost text in a second Neovim, without installing", started)
  if install.progress() then
    return H.fail("nothing was installed again", install.progress())
  end
  if total then
    H.say("again: start -> first ghost text %.1f s", total / 1000)
  end
end

H.run(function()
  H.say("ghostfim install test (%s): %s, data %s", phase, H.version_line(), install.paths().root)
  if phase == "again" then
    second_start()
  else
    first_install()
  end
end)
