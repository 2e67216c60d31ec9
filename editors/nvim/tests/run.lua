-- Headless end-to-end test of the ghostfim Neovim plugin against a running `ghostfim serve`.
--
-- From the repository root (works on Neovim 0.7, which has no `nvim -l`):
--   nvim --headless -u NONE -i NONE -n -c 'luafile editors/nvim/tests/run.lua'
--
-- Environment:
--   GHOSTFIM_SERVER_CMD         server command line, split at blanks, or a JSON list of
--                               arguments (default "ghostfim serve")
--   GHOSTFIM_TEST_MODEL         model preset to start with (default "tiny")
--   GHOSTFIM_TEST_SWITCH_MODEL  preset :GhostfimModel switches to (default "small", or "tiny"
--                               when GHOSTFIM_TEST_MODEL is "small")
--   GHOSTFIM_TEST_NATIVE        "0" uses ghostfim's own renderer even where Neovim 0.12+ has
--                               vim.lsp.inline_completion (default: the plugin's default)
--   GHOSTFIM_TEST_GHOST_MS      how long to wait for ghost text (default 3000)
--   GHOSTFIM_TEST_TIMEOUT_S     whole-run limit (default 170)
--
-- How keystrokes are simulated: the steps run in a coroutine that yields to Neovim's event loop
-- between keys. Keys queued with nvim_input() are only processed by the main loop while no Lua
-- code runs, and processing them there is what fires InsertEnter, TextChangedI and CursorMovedI
-- exactly as for a user typing, so the plugin's real autocommands and keymaps are exercised.
--
-- Prints one line per check and ends with "N passed, M failed"; exits 0 only if all passed.

local script = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p")
local plugin_root = vim.fn.fnamemodify(script, ":h:h")
vim.opt.runtimepath:prepend(plugin_root)
vim.opt.swapfile = false
-- `-u NONE` leaves filetype detection off, and the plugin attaches on FileType.
vim.cmd("filetype on")
-- Typed lines should hold exactly what the test types (Neovim's default autoindent would add a
-- tab when opening a line below an indented one).
vim.opt.autoindent = false

local ghostfim = require("ghostfim")
local config = require("ghostfim.config")
local edit = require("ghostfim.edit")
local ghost = require("ghostfim.ghost")

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
local server_cmd = parse_server_cmd(env.GHOSTFIM_SERVER_CMD)
local start_model = env.GHOSTFIM_TEST_MODEL or "tiny"
local switch_model = env.GHOSTFIM_TEST_SWITCH_MODEL
  or (start_model == "small" and "tiny" or "small")
local ghost_wait_ms = tonumber(env.GHOSTFIM_TEST_GHOST_MS or "") or 3000
local total_timeout_s = tonumber(env.GHOSTFIM_TEST_TIMEOUT_S or "") or 170
local force_own_renderer = env.GHOSTFIM_TEST_NATIVE == "0"

local passed, failed, skipped = 0, 0, 0
local finished = false
local runner

local function say(fmt, ...)
  io.stdout:write(string.format(fmt, ...) .. "\n")
  io.stdout:flush()
end

local function pass(name, detail)
  passed = passed + 1
  say("ok   - %s%s", name, detail and (" (" .. detail .. ")") or "")
end

local function fail(name, why)
  failed = failed + 1
  say("FAIL - %s: %s", name, why)
end

local function skip(name, why)
  skipped = skipped + 1
  say("skip - %s: %s", name, why)
end

local function finish()
  if finished then
    return
  end
  finished = true
  say("%d passed, %d failed", passed, failed)
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
    fail("test script", debug.traceback(runner, tostring(err)))
    finish()
  end
end

-- Lets the event loop run (keys, LSP messages, timers) for `ms` milliseconds.
local function sleep(ms)
  vim.defer_fn(resume, ms)
  coroutine.yield()
end

-- Polls `predicate` until it returns a truthy value or `timeout_ms` passes.
local function wait_for(timeout_ms, predicate, interval_ms)
  local deadline = vim.loop.now() + timeout_ms
  while true do
    local value = predicate()
    if value or vim.loop.now() >= deadline then
      return value
    end
    sleep(interval_ms or 10)
  end
end

local function buffer_text()
  return table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n")
end

local function shown_text()
  local ns = ghostfim.namespace()
  if not ns then
    return nil
  end
  local text = ghost.shown_text(0, ns)
  if text == "" then
    return nil
  end
  return text
end

-- Ghost text that stayed the same for `quiet_ms`: the server streams growing suggestions
-- (ghostfim/ghostText), and accepting mid-stream would make the expected text a moving target.
local function wait_for_stable_ghost(timeout_ms, quiet_ms)
  local last, since = nil, vim.loop.now()
  return wait_for(timeout_ms, function()
    local text = shown_text()
    if text ~= last then
      last, since = text, vim.loop.now()
    end
    return text and vim.loop.now() - since >= quiet_ms and text
  end)
end

local function type_keys(text, gap_ms)
  for i = 1, #text do
    vim.api.nvim_input(text:sub(i, i) == "<" and "<lt>" or text:sub(i, i))
    sleep(gap_ms or 15)
  end
end

local function status_now(timeout_ms)
  local answer
  ghostfim.status(function(err, result)
    answer = { err = err, result = result }
  end)
  wait_for(timeout_ms or 5000, function()
    return answer
  end)
  return answer and answer.result, answer and answer.err
end

-- Captures vim.notify messages while `fn` runs (expected error messages stay off the output).
local function capture_notify(fn)
  local messages, original = {}, vim.notify
  vim.notify = function(msg)
    table.insert(messages, msg)
  end
  local ok, result = pcall(fn)
  vim.notify = original
  assert(ok, result)
  return result, table.concat(messages, "\n")
end

---------------------------------------------------------------------------------------------
-- Checks that need no server
---------------------------------------------------------------------------------------------

local function check_config_validation()
  local cfg = config.resolve(nil)
  if not cfg or cfg.cmd[1] ~= "ghostfim" or cfg.keymaps.accept ~= "<M-l>" then
    return fail("config defaults", vim.inspect(cfg))
  end
  local cases = {
    { { model = { size = "huge" } }, "model.size" },
    { { keymap = {} }, "unknown option 'keymap'" },
    { { cmd = "ghostfim serve" }, "'cmd' must be a list" },
    { { keymaps = { accept = 3 } }, "keymaps.accept" },
  }
  for _, case in ipairs(cases) do
    local resolved, err = config.resolve(case[1])
    if resolved or not tostring(err):find(case[2], 1, true) then
      return fail("config validation", string.format("%s gave %s", vim.inspect(case[1]), err))
    end
  end
  local merged = config.resolve({ filetypes = { "python" }, keymaps = { dismiss = false } })
  if #merged.filetypes ~= 1 or merged.keymaps.dismiss ~= false or not merged.keymaps.accept then
    return fail("config merge", vim.inspect(merged))
  end
  local settings = config.server_settings(config.resolve({
    model = { size = "tiny" }, settings = { maxTokens = 32 } }))
  if settings.model.size ~= "tiny" or settings.maxTokens ~= 32
      or vim.json.encode(config.server_settings(config.resolve({}))) ~= "{}" then
    return fail("server settings", vim.inspect(settings))
  end
  pass("config defaults, merging and validation messages")
end

local function check_partial_accept_split()
  local cases = {
    { "foo(bar)", "word", "foo" }, { "  foo bar", "word", "  foo" }, { "(x)", "word", "(" },
    { "\n    return", "word", "\n    return" }, { "a = 1\nb = 2", "line", "a = 1" },
    { "\nb = 2\nc", "line", "\nb = 2" }, { "a\nb", "all", "a\nb" },
  }
  for _, case in ipairs(cases) do
    local part = edit.part(case[1], case[2])
    if part ~= case[3] then
      return fail("accept word/line split",
        string.format("%q as %s gave %q, expected %q", case[1], case[2], part, case[3]))
    end
  end
  pass("accept word/line split")
end

local function check_help_tags()
  local dir = vim.fn.tempname()
  vim.fn.mkdir(dir .. "/doc", "p")
  local lines = vim.fn.readfile(plugin_root .. "/doc/ghostfim.txt")
  vim.fn.writefile(lines, dir .. "/doc/ghostfim.txt")
  -- :helptags fails with E154 on a duplicate tag. It runs on a copy so that no `tags` file
  -- lands in the repository.
  local ok, err = pcall(vim.cmd, "helptags " .. vim.fn.fnameescape(dir .. "/doc"))
  if not ok then
    return fail("help tags", err)
  end
  local tags = {}
  for _, line in ipairs(vim.fn.readfile(dir .. "/doc/tags")) do
    tags[line:match("^[^\t]+")] = true
  end
  local required = { "ghostfim", "ghostfim-setup", "ghostfim-options", "ghostfim-keymaps",
    ":GhostfimModel", ":GhostfimStatus", ":GhostfimToggle", "ghostfim-statusline" }
  for _, tag in ipairs(required) do
    if not tags[tag] then
      return fail("help tags", "missing *" .. tag .. "*")
    end
  end
  vim.opt.runtimepath:append(dir)
  ok, err = pcall(vim.cmd, "help ghostfim-setup")
  if not ok then
    return fail("help tags", ":help ghostfim-setup: " .. err)
  end
  vim.cmd("helpclose")
  pass("help file: tags unique, :help ghostfim-setup opens", vim.tbl_count(tags) .. " tags")
end

---------------------------------------------------------------------------------------------
-- Checks against the server
---------------------------------------------------------------------------------------------

local function open_python_file()
  local path = vim.fn.tempname() .. ".py"
  vim.fn.writefile({
    "def fibonacci(n):",
    '    """Return the n-th Fibonacci number."""',
    "    if n < 2:",
    "        return n",
  }, path)
  vim.cmd("edit " .. vim.fn.fnameescape(path))
  return path
end

local function check_server_ready()
  local result, err
  local started = vim.loop.now()
  local ready = wait_for(90000, function()
    result, err = status_now(5000)
    -- A server that never started will not start later: fail now rather than in 90 s.
    if not require("ghostfim.client").get() and vim.loop.now() - started > 10000 then
      return true
    end
    return result and result.state == "ready"
  end, 250)
  ready = ready and result and result.state == "ready"
  if not ready then
    return fail("server ready", string.format("last ghostfim/status: %s %s",
      vim.inspect(result), vim.inspect(err)))
  end
  local preset = result.model and result.model.preset
  if preset ~= start_model then
    return fail("server ready", string.format("preset %s, expected %s from init_options",
      tostring(preset), start_model))
  end
  pass("server started and reports ready", "preset " .. preset)
  return true
end

-- Types the start of a line at the end of the file and waits for a suggestion.
local function type_and_wait_for_ghost(name, text)
  vim.api.nvim_input("<Esc>Go")
  sleep(50)
  type_keys(text)
  local shown = wait_for_stable_ghost(ghost_wait_ms + 1000, 300)
  if not shown then
    fail(name, string.format("no ghost text within %d ms after typing %q", ghost_wait_ms, text))
    return nil
  end
  pass(name, string.format("%q", shown))
  return shown
end

local function screen_row_text(screen_row)
  local chars = {}
  for col = 1, vim.o.columns do
    table.insert(chars, vim.fn.screenstring(screen_row, col))
  end
  return (table.concat(chars):gsub("%s+$", ""))
end

-- What the user sees: the typed line continued by the suggestion's first line, and its other
-- lines below (headless Neovim still keeps a screen grid, readable with screenstring()).
local function check_drawn_on_screen(shown)
  local name = "ghost text drawn at the cursor and below it"
  vim.cmd("redraw")
  local row = vim.api.nvim_win_get_cursor(0)[1]
  local screen_row = vim.fn.screenpos(0, row, 1).row
  local lines = vim.split(shown, "\n", { plain = true })
  local width = vim.o.columns - 1
  local expected = { (vim.api.nvim_get_current_line() .. lines[1]):sub(1, width) }
  for i = 2, math.min(#lines, 3) do
    table.insert(expected, (lines[i]:gsub("\t", string.rep(" ", vim.bo.tabstop))):sub(1, width))
  end
  local first_row
  for i, want in ipairs(expected) do
    local got = screen_row_text(screen_row + i - 1)
    first_row = first_row or got
    if got:sub(1, #want) ~= want:gsub("%s+$", "") then
      return fail(name, string.format("screen row %d is %q, expected %q", screen_row + i - 1,
        got, want))
    end
  end
  pass(name, string.format("%q", first_row))
end

local function check_typed_through(shown)
  local name = "typed-through keeps the rest without waiting for the server"
  local first = shown:sub(1, 1)
  if first == "\n" or first == "" then
    return skip(name, "the suggestion starts with a line break")
  end
  local tick = vim.api.nvim_buf_get_changedtick(0)
  vim.api.nvim_input(first == "<" and "<lt>" or first)
  -- Poll tightly: the check must see the state right after the keystroke, before any answer.
  wait_for(1000, function()
    return vim.api.nvim_buf_get_changedtick(0) ~= tick
  end, 1)
  local now = shown_text()
  if now ~= shown:sub(2) then
    return fail(name, string.format("after typing %q expected %q, shown %q",
      first, shown:sub(2), tostring(now)))
  end
  pass(name)
end

local function check_accept(name, key, kind)
  local shown = wait_for_stable_ghost(ghost_wait_ms, 300)
  if not shown then
    return fail(name, "no ghost text to accept")
  end
  local before = buffer_text()
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  local part = edit.part(shown, kind)
  local lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  local line = lines[row]
  local inserted = vim.split(part, "\n", { plain = true })
  local expected_lines = vim.list_slice(lines, 1, row - 1)
  for i, piece in ipairs(inserted) do
    local text = piece
    if i == 1 then
      text = line:sub(1, col) .. text
    end
    if i == #inserted then
      text = text .. line:sub(col + 1)
    end
    table.insert(expected_lines, text)
  end
  vim.list_extend(expected_lines, lines, row + 1)
  local expected_cursor = { row + #inserted - 1,
    (#inserted == 1 and col or 0) + #inserted[#inserted] }

  vim.api.nvim_input(key)
  wait_for(1000, function()
    return buffer_text() ~= before
  end)
  local after = buffer_text()
  if after ~= table.concat(expected_lines, "\n") then
    return fail(name, string.format("accepting %q: buffer is\n%s\nexpected\n%s", part, after,
      table.concat(expected_lines, "\n")))
  end
  local cursor = vim.api.nvim_win_get_cursor(0)
  if cursor[1] ~= expected_cursor[1] or cursor[2] ~= expected_cursor[2] then
    return fail(name, string.format("cursor at %s, expected %s after the insertion",
      vim.inspect(cursor), vim.inspect(expected_cursor)))
  end
  pass(name, string.format("inserted %q", part))
  return true
end

local function check_cleared_on_insert_leave()
  vim.api.nvim_input("<Esc>")
  local cleared = wait_for(1000, function()
    return vim.api.nvim_get_mode().mode == "n" and shown_text() == nil
  end)
  if not cleared then
    return fail("InsertLeave clears the ghost text", "still shown: " .. tostring(shown_text()))
  end
  pass("InsertLeave clears the ghost text")
end

local function check_dismiss(key)
  local name = "dismiss key clears the ghost text"
  if not wait_for(ghost_wait_ms, shown_text) then
    return skip(name, "no suggestion was shown to dismiss")
  end
  vim.api.nvim_input(key)
  if not wait_for(500, function()
    return shown_text() == nil
  end) then
    return fail(name, "still shown: " .. tostring(shown_text()))
  end
  -- Dismissed means dismissed until the next edit, not until the next server answer.
  sleep(400)
  if shown_text() then
    return fail(name, "came back without an edit: " .. tostring(shown_text()))
  end
  pass(name)
end

local function check_trigger(key)
  local name = "trigger key asks for a suggestion at once"
  if ghostfim.namespace() ~= ghost.namespace then
    return skip(name, "not offered with Neovim's native inline completion")
  end
  ghostfim.dismiss()
  sleep(100)
  vim.api.nvim_input(key)
  local shown = wait_for(ghost_wait_ms, shown_text)
  if not shown then
    return fail(name, string.format("no ghost text within %d ms", ghost_wait_ms))
  end
  pass(name, string.format("%q", shown))
end

local function check_statusline_latency()
  -- "ghostfim <preset> <last TTFT>ms ...": the figure right after the preset is the last one.
  local line = wait_for(3000, function()
    local text = ghostfim.statusline()
    return text:match("^ghostfim %S+ %d+ms") and text
  end)
  if not line then
    return fail("statusline shows a latency", string.format("%q", ghostfim.statusline()))
  end
  pass("statusline shows a latency", string.format("%q", line))
end

local function check_status_command()
  vim.cmd("messages clear")
  vim.cmd("GhostfimStatus")
  local messages = wait_for(3000, function()
    local text = vim.fn.execute("messages")
    return text:find("ghostfim ready", 1, true) and text
  end)
  if not messages then
    return fail(":GhostfimStatus", "no status message; :messages is " .. vim.fn.execute("messages"))
  end
  if not messages:find("latency", 1, true) then
    return fail(":GhostfimStatus", "no latency line in " .. messages)
  end
  pass(":GhostfimStatus", vim.trim(messages):gsub("\n", " | "))
end

local function check_toggle()
  vim.cmd("GhostfimToggle")
  if ghostfim.statusline() ~= "ghostfim off" then
    return fail(":GhostfimToggle", "statusline after turning off: " .. ghostfim.statusline())
  end
  vim.api.nvim_input("<Esc>Go")
  sleep(50)
  type_keys("    retu")
  sleep(800)
  local leaked = shown_text()
  vim.api.nvim_input("<Esc>")
  vim.cmd("GhostfimToggle")
  if leaked then
    return fail(":GhostfimToggle", "ghost text shown while off: " .. leaked)
  end
  if ghostfim.statusline() == "ghostfim off" then
    return fail(":GhostfimToggle", "statusline still off after turning on again")
  end
  pass(":GhostfimToggle turns suggestions off and on")
end

local function check_model_commands()
  local completion = vim.fn.getcompletion("GhostfimModel s", "cmdline")
  if #completion ~= 1 or completion[1] ~= "small" then
    return fail(":GhostfimModel completion", vim.inspect(completion))
  end
  local all = vim.fn.getcompletion("GhostfimModel ", "cmdline")
  if table.concat(all, ",") ~= "tiny,small,medium,large" then
    return fail(":GhostfimModel completion", vim.inspect(all))
  end
  local accepted, message = capture_notify(function()
    return ghostfim.set_model("huge")
  end)
  if accepted ~= false or not message:find("tiny, small, medium, large", 1, true) then
    return fail(":GhostfimModel huge", string.format("returned %s, said %q",
      tostring(accepted), message))
  end
  pass(":GhostfimModel completes the four presets and rejects others")
end

local function check_model_switch()
  local name = ":GhostfimModel " .. switch_model
  local started = vim.loop.now()
  vim.cmd("GhostfimModel " .. switch_model)
  local states, result, statusline_loading = {}, nil, nil
  local switched = wait_for(60000, function()
    result = status_now(5000)
    local state = result and result.state
    if state and states[#states] ~= state then
      table.insert(states, state)
    end
    local line = ghostfim.statusline()
    if line:find("loading", 1, true) then
      statusline_loading = line
    end
    return state == "ready" and result.model and result.model.preset == switch_model
  end, 200)
  if not switched then
    return fail(name, string.format("server did not report preset %s ready within 60 s; " ..
      "states seen %s; last status %s", switch_model, table.concat(states, "→"),
      vim.inspect(result)))
  end
  pass(name, string.format("states %s, %d ms, statusline while loading: %s",
    table.concat(states, "→"), vim.loop.now() - started, tostring(statusline_loading)))
end

---------------------------------------------------------------------------------------------

local function main()
  say("ghostfim nvim test: %s, server %q, model %s", vim.fn.execute("version"):match("NVIM [^\n]+"),
    table.concat(server_cmd, " "), start_model)
  check_config_validation()
  check_partial_accept_split()
  check_help_tags()

  local ok = ghostfim.setup({
    cmd = server_cmd,
    model = { size = start_model },
    native = not force_own_renderer,
  })
  if not ok then
    fail("setup", "returned false")
    return finish()
  end
  say("renderer: %s", ghostfim.namespace() == ghost.namespace and "ghostfim" or "native")
  open_python_file()
  if not check_server_ready() then
    return finish()
  end

  local keys = ghostfim.config().keymaps
  local shown = type_and_wait_for_ghost("ghost text appears while typing", "    return fib")
  if shown then
    check_drawn_on_screen(shown)
    check_typed_through(shown)
    check_accept("accept key inserts the suggestion", keys.accept, "all")
  end
  check_cleared_on_insert_leave()

  if type_and_wait_for_ghost("ghost text appears on a new line", "    x = fibonacci(") then
    check_accept("accept-word key inserts the next word", keys.accept_word, "word")
    check_dismiss(keys.dismiss)
    check_trigger(keys.trigger)
  end
  vim.api.nvim_input("<Esc>")
  sleep(50)

  check_statusline_latency()
  check_status_command()
  check_toggle()
  check_model_commands()
  check_model_switch()
  finish()
end

vim.defer_fn(function()
  if not finished then
    fail("whole run", string.format("did not finish within %d s", total_timeout_s))
    finish()
  end
end, total_timeout_s * 1000)

runner = coroutine.create(main)
resume()
