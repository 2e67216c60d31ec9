-- Shared by the headless tests (run.lua, startup.lua, lsp_config.lua): a coroutine runner that
-- yields to Neovim's event loop between steps, checks that print one line each, and waits.
--
-- How keystrokes are simulated: the steps run in a coroutine that yields to Neovim's event loop
-- between keys. Keys queued with nvim_input() are only processed by the main loop while no Lua
-- code runs, and processing them there is what fires InsertEnter, TextChangedI and CursorMovedI
-- exactly as for a user typing, so the plugin's real autocommands and keymaps are exercised.
local H = {}

local script = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p")
H.plugin_root = vim.fn.fnamemodify(script, ":h:h")
vim.opt.runtimepath:prepend(H.plugin_root)
vim.opt.swapfile = false
-- `-u NONE` leaves filetype detection off, and the plugin attaches on FileType.
vim.cmd("filetype on")
-- Typed lines should hold exactly what the test types (Neovim's default autoindent would add a
-- tab when opening a line below an indented one).
vim.opt.autoindent = false

local env = vim.env

local function parse_server_cmd(value)
  value = vim.trim(value or "")
  if value == "" then
    return { "ghostfim", "serve" }
  elseif value:sub(1, 1) == "[" then
    return vim.json.decode(value) -- paths with blanks come this way
  end
  return vim.split(value, "%s+")
end

H.server_cmd = parse_server_cmd(env.GHOSTFIM_SERVER_CMD)
H.ghost_wait_ms = tonumber(env.GHOSTFIM_TEST_GHOST_MS or "") or 3000
H.total_timeout_s = tonumber(env.GHOSTFIM_TEST_TIMEOUT_S or "") or 170

local passed, failed, skipped = 0, 0, 0
local finished = false
local runner

function H.say(fmt, ...)
  io.stdout:write(string.format(fmt, ...) .. "\n")
  io.stdout:flush()
end

function H.pass(name, detail)
  passed = passed + 1
  H.say("ok   - %s%s", name, detail and (" (" .. detail .. ")") or "")
  return true
end

function H.fail(name, why)
  failed = failed + 1
  H.say("FAIL - %s: %s", name, why)
  return false
end

function H.skip(name, why)
  skipped = skipped + 1
  H.say("skip - %s: %s", name, why)
end

function H.finish()
  if finished then
    return
  end
  finished = true
  H.say("%d passed, %d failed", passed, failed)
  if failed > 0 or passed == 0 then
    vim.cmd("cquit 1")
  else
    vim.cmd("qall!")
  end
end

local function resume()
  if finished then
    return
  end
  local ok, err = coroutine.resume(runner)
  if not ok then
    H.fail("test script", debug.traceback(runner, tostring(err)))
    H.finish()
  end
end

--- Runs `main` in the coroutine, with the whole-run limit.
function H.run(main)
  vim.defer_fn(function()
    if not finished then
      H.fail("whole run", string.format("did not finish within %d s", H.total_timeout_s))
      H.finish()
    end
  end, H.total_timeout_s * 1000)
  runner = coroutine.create(function()
    main()
    H.finish()
  end)
  resume()
end

-- Lets the event loop run (keys, LSP messages, timers) for `ms` milliseconds.
function H.sleep(ms)
  vim.defer_fn(resume, ms)
  coroutine.yield()
end

-- Polls `predicate` until it returns a truthy value or `timeout_ms` passes.
function H.wait_for(timeout_ms, predicate, interval_ms)
  local deadline = vim.loop.now() + timeout_ms
  while true do
    local value = predicate()
    if value or vim.loop.now() >= deadline then
      return value
    end
    H.sleep(interval_ms or 10)
  end
end

function H.buffer_text()
  return table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n")
end

function H.shown_text()
  local ns = require("ghostfim").namespace()
  if not ns then
    return nil
  end
  local text = require("ghostfim.ghost").shown_text(0, ns)
  if text == "" then
    return nil
  end
  return text
end

-- Ghost text that stayed the same for `quiet_ms`: the server streams growing suggestions
-- (ghostfim/ghostText), and accepting mid-stream would make the expected text a moving target.
function H.wait_for_stable_ghost(timeout_ms, quiet_ms)
  local last, since = nil, vim.loop.now()
  return H.wait_for(timeout_ms, function()
    local text = H.shown_text()
    if text ~= last then
      last, since = text, vim.loop.now()
    end
    return text and vim.loop.now() - since >= quiet_ms and text
  end)
end

function H.key(char)
  return char == "<" and "<lt>" or char
end

function H.type_keys(text, gap_ms)
  for i = 1, #text do
    vim.api.nvim_input(H.key(text:sub(i, i)))
    H.sleep(gap_ms or 15)
  end
end

function H.status_now(timeout_ms)
  local answer
  require("ghostfim").status(function(err, result)
    answer = { err = err, result = result }
  end)
  H.wait_for(timeout_ms or 5000, function()
    return answer
  end)
  return answer and answer.result, answer and answer.err
end

-- Captures vim.notify messages while `fn` runs (expected error messages stay off the output).
function H.capture_notify(fn)
  local messages, original = {}, vim.notify
  vim.notify = function(msg)
    table.insert(messages, msg)
  end
  local ok, result = pcall(fn)
  vim.notify = original
  assert(ok, result)
  return result, table.concat(messages, "\n")
end

--- Starts capturing vim.notify: the list fills as messages come; call stop() to end.
--- @return table messages, function stop
function H.collect_notify()
  local messages, original = {}, vim.notify
  vim.notify = function(msg)
    table.insert(messages, tostring(msg))
  end
  return messages, function()
    vim.notify = original
    return messages
  end
end

--- How many of `messages` contain `text` (plain).
function H.count(messages, text)
  local n = 0
  for _, message in ipairs(messages) do
    if message:find(text, 1, true) then
      n = n + 1
    end
  end
  return n
end

function H.open_python_file(dir)
  local path = (dir and (dir .. "/example") or vim.fn.tempname()) .. ".py"
  vim.fn.writefile({
    "def fibonacci(n):",
    '    """Return the n-th Fibonacci number."""',
    "    if n < 2:",
    "        return n",
  }, path)
  vim.cmd("edit " .. vim.fn.fnameescape(path))
  return path
end

--- Waits until ghostfim/status says ready with preset `want_preset`.
function H.check_server_ready(want_preset, timeout_ms)
  local result, err
  local started = vim.loop.now()
  local ready = H.wait_for(timeout_ms or 90000, function()
    result, err = H.status_now(5000)
    -- A server that never started will not start later: fail now rather than in 90 s.
    if not require("ghostfim.client").get() and vim.loop.now() - started > 10000 then
      return true
    end
    return result and result.state == "ready"
  end, 100)
  ready = ready and result and result.state == "ready"
  if not ready then
    return H.fail("server ready", string.format("last ghostfim/status: %s %s",
      vim.inspect(result), vim.inspect(err)))
  end
  local preset = result.model and result.model.preset
  if want_preset and preset ~= want_preset then
    return H.fail("server ready", string.format("preset %s, expected %s from the settings",
      tostring(preset), want_preset))
  end
  H.pass("server started and reports ready", "preset " .. tostring(preset))
  return true
end

--- The server's process id (the only child of this Neovim).
function H.server_pid()
  local children = vim.api.nvim_get_proc_children(vim.fn.getpid())
  return children[1]
end

function H.version_line()
  return vim.fn.execute("version"):match("NVIM [^\n]+")
end

return H
