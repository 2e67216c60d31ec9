-- :GhostfimInstall: the server, set up by the plugin in stdpath("data")/ghostfim, without a
-- terminal and without blocking the editor (jobs): a virtual environment made with a Python
-- 3.10+ from $PATH, ghostfim installed into it from the repository holding this plugin, then
-- `ghostfim setup --json` (llama.cpp built with this machine's flags, the default model
-- fetched), whose steps show in the command line and through vim.notify. config.default_cmd()
-- finds the result; :checkhealth ghostfim says whether it is there and ready.
--
-- Every job runs with its working directory in that folder, never the current directory (the
-- user's project), with Python isolated (-I) and without PYTHON* variables.
local M = {}

local is_windows = vim.fn.has("win32") == 1
local sep = is_windows and "\\" or "/"

-- What installs Python or its venv module, by platform: the same commands `ghostfim setup`
-- gives (engine/setup/platforms.py's FIXES; tests/unit/engine/setup/test_install.py checks).
M.FIXES = {
  python = {
    debian = "sudo apt-get install python3 python3-venv",
    fedora = "sudo dnf install python3",
    macos = "brew install python@3.12",
    windows = "winget install Python.Python.3.12",
  },
  venv = {
    debian = "sudo apt-get install python3-venv",
    fedora = "sudo dnf install python3",
    macos = "brew install python@3.12",
    windows = "winget install Python.Python.3.12",
  },
}
local PLATFORMS = { "debian", "fedora", "macos", "windows" }
local PLATFORM_NAMES = { debian = "Debian/Ubuntu", fedora = "Fedora", macos = "macOS",
  windows = "Windows" }
local WHAT = { python = "Python 3.10 or later", venv = "Python's venv module" }

-- The version, whether the venv module can make an environment with pip, and the executable:
-- "ghostfim-python 3 11 2 1 /usr/bin/python3".
local PYTHON_PROBE = table.concat({
  "import sys",
  "try:",
  "    import ensurepip, venv",
  "    ok = 1",
  "except ImportError:",
  "    ok = 0",
  'print("ghostfim-python", *sys.version_info[:3], ok, sys.executable)',
}, "\n")

-- editors/nvim/lua/ghostfim/install.lua: the plugin is three levels up, the repository five.
local plugin_root = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h:h")

local function join(...)
  return table.concat({ ... }, sep)
end

--- Where the install lives and what it is made of.
function M.paths()
  local root = join(vim.fn.stdpath("data"), "ghostfim")
  local venv = join(root, "venv")
  local bin = is_windows and join(venv, "Scripts") or join(venv, "bin")
  return {
    root = root,
    venv = venv,
    python = join(bin, is_windows and "python.exe" or "python"),
    server = join(bin, is_windows and "ghostfim.exe" or "ghostfim"),
    -- Written when `ghostfim setup` said ready; its time is when. Nothing reads what is in it
    -- (the plugin takes nothing from files: tests/unit/lsp/test_settings_sync.py).
    ready = join(root, "ready"),
    log = join(root, "install.log"),
  }
end

--- When the last install finished ({ ready_at = "..." }), nil when none did.
function M.state()
  local stat = vim.loop.fs_stat(M.paths().ready)
  if not stat then
    return nil
  end
  return { ready_at = os.date("%Y-%m-%d %H:%M", stat.mtime.sec) }
end

--- The installed server, when an install finished and its executable is there.
function M.server()
  local paths = M.paths()
  if M.state() and vim.fn.executable(paths.server) == 1 then
    return paths.server
  end
  return nil
end

--- The ghostfim source the plugin installs: the repository it is part of (a folder with
--- pyproject.toml and ghostfim's engine/setup/install.py).
function M.source()
  local repo = vim.fn.fnamemodify(plugin_root, ":h:h")
  local marker = join(repo, "engine", "setup", "install.py")
  if vim.loop.fs_stat(join(repo, "pyproject.toml")) and vim.loop.fs_stat(marker) then
    return repo
  end
  return nil
end

-- Which command the advice puts first: the package manager this machine has.
local function platform()
  if is_windows then
    return "windows"
  elseif vim.fn.has("mac") == 1 then
    return "macos"
  elseif vim.fn.executable("apt-get") == 1 then
    return "debian"
  elseif vim.fn.executable("dnf") == 1 then
    return "fedora"
  end
  return nil
end

--- "Debian/Ubuntu: sudo apt-get install python3-venv; Fedora: ...", this machine's first.
function M.advice(fix, here)
  local parts = {}
  for _, key in ipairs(PLATFORMS) do
    if fix[key] then
      local text = PLATFORM_NAMES[key] .. ": " .. fix[key]
      table.insert(parts, key == here and 1 or #parts + 1, text)
    end
  end
  return table.concat(parts, "; ")
end

-- $PATH's absolute entries only: a relative one names a folder of the current directory.
local function on_path(name)
  local list = is_windows and ";" or ":"
  for dir in (vim.env.PATH or ""):gmatch("[^" .. list .. "]+") do
    local absolute = dir:sub(1, 1) == "/" or dir:match("^%a:[/\\]")
    if absolute then
      for _, file in ipairs(is_windows and { name .. ".exe" } or { name }) do
        local candidate = dir .. sep .. file
        if vim.fn.executable(candidate) == 1 then
          return candidate
        end
      end
    end
  end
  return nil
end

--- The Pythons to try: `py -3` first on Windows, then python3 and python.
function M.python_candidates()
  local found = {}
  local names = is_windows and { "py", "python3", "python" } or { "python3", "python" }
  for _, name in ipairs(names) do
    local path = on_path(name)
    if path and not vim.tbl_contains(vim.tbl_map(function(c)
      return c[1]
    end, found), path) then
      table.insert(found, name == "py" and { path, "-3" } or { path })
    end
  end
  return found
end

-- The environment of a job: ours without what points Python at other code.
local function job_env()
  local env = {}
  for key, value in pairs(vim.fn.environ()) do
    if key:sub(1, 6) ~= "PYTHON" then
      env[key] = value
    end
  end
  env.PYTHONUNBUFFERED = "1"
  env.PIP_NO_INPUT = "1"
  env.PIP_DISABLE_PIP_VERSION_CHECK = "1"
  return env
end

local running = nil -- the install in progress: { job, message, started, on_done }
M.last_error = nil -- why the last install failed, for :checkhealth

--- The step of the install in progress, or nil.
function M.progress()
  return running and running.message or nil
end

local function fmt_elapsed(seconds)
  seconds = math.floor(tonumber(seconds) or 0)
  if seconds >= 60 then
    return string.format("%d:%02d", math.floor(seconds / 60), seconds % 60)
  end
  return string.format("%d s", seconds)
end

--- The message for one line of `ghostfim setup --json` (nil: the log only).
function M.event_message(event)
  local title = event.title or event.step
  if event.step == "setup" then
    return nil
  end
  if event.event == "start" or event.event == "done" then
    return string.format("%s: %s", title, event.message or "")
  elseif event.event == "progress" then
    local text = string.format("%s: %s", title, event.phase or "working")
    if type(event.percent) == "number" then
      text = text .. string.format(" %d%%", math.floor(event.percent))
    end
    if type(event.bytes) == "number" and type(event.total) == "number" then
      text = text .. string.format(" (%d MB of %d MB)", math.floor(event.bytes / 1048576 + 0.5),
        math.floor(event.total / 1048576 + 0.5))
    end
    return text .. " · " .. fmt_elapsed(event.elapsed_s)
  end
  return nil
end

local function log_line(line)
  vim.fn.writefile({ line }, M.paths().log, "a")
end

-- Splits a job's output into lines (a chunk may end inside a line).
local function line_reader(on_line)
  local pending = ""
  return function(_, data)
    if not data then
      return
    end
    data[1] = pending .. data[1]
    pending = table.remove(data)
    for _, line in ipairs(data) do
      on_line((line:gsub("\r$", "")))
    end
  end, function()
    if pending ~= "" then
      on_line(pending)
      pending = ""
    end
  end
end

-- Runs argv in the install folder; every line goes to the log, stdout lines to on_stdout too.
-- callback(exit code, the last lines).
local function run(argv, on_stdout, callback)
  local tail = {}
  local function keep(line)
    log_line(line)
    table.insert(tail, line)
    if #tail > 30 then
      table.remove(tail, 1)
    end
  end
  local out_line, out_flush = line_reader(function(line)
    keep(line)
    if on_stdout then
      on_stdout(line)
    end
  end)
  local err_line, err_flush = line_reader(keep)
  log_line("$ " .. table.concat(argv, " "))
  local ok, job = pcall(vim.fn.jobstart, argv, {
    cwd = M.paths().root,
    env = job_env(),
    clear_env = true,
    stdout_buffered = false,
    on_stdout = out_line,
    on_stderr = err_line,
    on_exit = function(_, code)
      out_flush()
      err_flush()
      if running then
        running.job = nil
      end
      callback(code, table.concat(tail, "\n"))
    end,
  })
  if not ok or type(job) ~= "number" or job <= 0 then
    callback(-1, "could not start " .. tostring(argv[1]) .. ": " .. tostring(job))
    return
  end
  if running then
    running.job = job
  end
end

local last_echo = 0
-- A step's progress: in the command line, at most once a second (the log has all of it).
local function show(message, important)
  if not running then
    return
  end
  running.message = message
  local now = vim.loop.now()
  if important then
    vim.notify("ghostfim: " .. message, vim.log.levels.INFO)
  elseif now - last_echo >= 1000 then
    last_echo = now
    vim.api.nvim_echo({ { "ghostfim: " .. message } }, false, {})
  end
end

-- `fix`: the commands that install what is missing; `what`: what that is, in words.
local function finish(ok, message, fix, what)
  local done = running
  running = nil
  if ok then
    M.last_error = nil
    vim.notify("ghostfim: " .. message, vim.log.levels.INFO)
  else
    M.last_error = message .. (fix and (". To install " .. (what or "it") .. ": " .. fix) or "")
    vim.notify(string.format("ghostfim: the install failed: %s. The whole output: %s. " ..
      ":GhostfimInstall tries again.", M.last_error, M.paths().log), vim.log.levels.ERROR)
  end
  if done and done.on_done then
    done.on_done(ok, ok and nil or M.last_error)
  end
end

local function last_line(text)
  local last = "no output"
  for line in (text or ""):gmatch("[^\n]+") do
    if vim.trim(line) ~= "" then
      last = line
    end
  end
  return last
end

local function setup_step(paths)
  show("ghostfim setup: checking the build and the model", true)
  local failed, finished
  -- `ghostfim setup --json`, run as its module: the `ghostfim` command's other tools import
  -- packages that are not installed yet.
  run({ paths.python, "-I", "-m", "ghostfim.engine.setup.install", "--json" }, function(line)
    if line:sub(1, 1) ~= "{" then
      return
    end
    -- A line its own child printed (engine/setup/install.py's events), never a file.
    local ok, event = pcall(vim.json.decode, line)
    if not ok or type(event) ~= "table" then
      return
    end
    if event.step == "setup" and event.event == "done" then
      finished = event
    elseif event.event == "error" and event.step ~= "setup" then
      failed = event
    end
    local message = M.event_message(event)
    if message then
      show(message, event.event == "done" or event.event == "start")
    end
  end, function(code, tail)
    if code ~= 0 or not (finished and finished.ready) then
      local why = failed and failed.message
        or string.format("ghostfim setup exited with %d: %s", code, last_line(tail))
      return finish(false, why, failed and failed.fix_text, failed and failed.what)
    end
    vim.fn.writefile({ paths.server }, paths.ready)
    finish(true, string.format("the server is ready (%s): %s",
      fmt_elapsed(running and (vim.loop.now() - running.started) / 1000 or 0), paths.server))
  end)
end

local function install_step(paths)
  show("installing ghostfim from " .. running.source, true)
  run({ paths.python, "-I", "-m", "pip", "install", "--no-deps", "--force-reinstall",
    "--no-input", "--disable-pip-version-check", running.source }, nil, function(code, tail)
    if code ~= 0 then
      return finish(false, "installing ghostfim failed: " .. last_line(tail))
    end
    setup_step(paths)
  end)
end

local function venv_step(paths, python)
  show(string.format("creating a virtual environment with Python %s",
    table.concat(python.version, ".")), true)
  vim.fn.delete(paths.venv, "rf")
  local argv = vim.list_extend(vim.deepcopy(python.cmd), { "-I", "-m", "venv", paths.venv })
  run(argv, nil, function(code, tail)
    if code ~= 0 then
      local missing = (tail:find("ensurepip") or tail:find("venv")) and "venv" or nil
      return finish(false, "creating the virtual environment failed: " .. last_line(tail),
        missing and M.advice(M.FIXES.venv, platform()), missing and WHAT.venv)
    end
    install_step(paths)
  end)
end

-- Tries the candidates in turn; the first Python 3.10+ with a working venv module wins.
local function find_python(candidates, index, without_venv, done)
  local cmd = candidates[index]
  if not cmd then
    return done(nil, without_venv)
  end
  local found
  run(vim.list_extend(vim.deepcopy(cmd), { "-I", "-c", PYTHON_PROBE }), function(line)
    local major, minor, micro, venv, executable =
      line:match("^ghostfim%-python (%d+) (%d+) (%d+) ([01]) (.+)$")
    if major then
      found = { version = { tonumber(major), tonumber(minor), tonumber(micro) },
        venv = venv == "1", executable = executable, cmd = cmd }
    end
  end, function(code)
    if code == 0 and found then
      local major, minor = found.version[1], found.version[2]
      if major > 3 or (major == 3 and minor >= 10) then
        if found.venv then
          return done(found, without_venv)
        end
        without_venv = without_venv or found
      end
    end
    find_python(candidates, index + 1, without_venv, done)
  end)
end

--- Installs (or, with `fresh`, reinstalls from scratch) the server, without blocking.
--- opts: { fresh = boolean, on_done = function(ok, err) }. Returns false when one is running.
function M.run(opts)
  opts = opts or {}
  if running then
    vim.notify("ghostfim: an install is already running: " .. (running.message or ""),
      vim.log.levels.WARN)
    return false
  end
  local paths = M.paths()
  local source = M.source()
  running = { message = "starting", started = vim.loop.now(), on_done = opts.on_done,
    source = source }
  if not source then
    finish(false, "the plugin is not inside a ghostfim repository (" .. plugin_root ..
      "), so there is nothing to install from: clone the repository and point your plugin " ..
      "manager at its editors/nvim, or `pipx install` ghostfim and run `ghostfim setup`")
    return true
  end
  vim.fn.mkdir(paths.root, "p")
  vim.fn.writefile({}, paths.log)
  vim.fn.delete(paths.ready) -- not ready until this install says so
  if not opts.fresh and vim.fn.executable(paths.python) == 1 then
    install_step(paths)
    return true
  end
  show("looking for Python 3.10 or later", true)
  find_python(M.python_candidates(), 1, nil, function(python, without_venv)
    if python then
      return venv_step(paths, python)
    end
    if without_venv then
      return finish(false, string.format("Python %s at %s cannot make a virtual environment",
        table.concat(without_venv.version, "."), without_venv.executable),
        M.advice(M.FIXES.venv, platform()), WHAT.venv)
    end
    finish(false, "no Python 3.10 or later was found on $PATH",
      M.advice(M.FIXES.python, platform()), WHAT.python)
  end)
  return true
end

--- Stops the install in progress (its job and pip's children).
function M.cancel()
  if running and running.job then
    vim.fn.jobstop(running.job)
  end
end

--- The :GhostfimInstall command (`!`: from scratch). When it is done, a ghostfim set up with
--- the default command starts its server.
function M.command(args)
  M.run({
    fresh = args and args.bang or false,
    on_done = function(ok)
      if ok then
        local ghostfim = require("ghostfim")
        if ghostfim.config() then
          ghostfim.installed()
        end
      end
    end,
  })
end

function M.create_command()
  vim.api.nvim_create_user_command("GhostfimInstall", M.command, {
    nargs = 0,
    bang = true,
    desc = "ghostfim: set up the server in stdpath('data')/ghostfim (! from scratch)",
  })
end

return M
