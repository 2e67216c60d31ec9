-- Headless test: the user starts Neovim and types at once, while the server is still loading
-- its model. Ghost text must appear, with no further keystroke, once the model is ready.
--
--   nvim --headless -u NONE -i NONE -n -c 'luafile editors/nvim/tests/startup.lua'
--
-- Environment: GHOSTFIM_SERVER_CMD (as for run.lua), GHOSTFIM_TEST_MODEL (default "small": a
-- model that takes measurable time to load), GHOSTFIM_TEST_T0 (Unix time in seconds at which
-- Neovim was started, to report the time from start to ghost text; default: this script's
-- start), GHOSTFIM_TEST_TIMEOUT_S.

local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/harness.lua")

local ghostfim = require("ghostfim")
local client = require("ghostfim.client")

local model = vim.env.GHOSTFIM_TEST_MODEL or "small"
local WAIT_MS = 90000

local function epoch_ms()
  local sec, usec = vim.loop.gettimeofday()
  return sec * 1000 + usec / 1000
end

-- loop.now() of Neovim's start.
local started_at = vim.loop.now()
local t0 = tonumber(vim.env.GHOSTFIM_TEST_T0 or "")
if t0 then
  started_at = vim.loop.now() - (epoch_ms() - t0 * 1000)
end
local function since_start()
  return math.floor(vim.loop.now() - started_at + 0.5)
end

local function main()
  H.say("ghostfim startup test: %s, server %q, model %s", H.version_line(),
    table.concat(H.server_cmd, " "), model)
  -- Count the requests the plugin sends, and when the model becomes ready.
  local requests, ready_at = {}, nil
  local original_request = client.request
  client.request = function(method, params, handler, bufnr)
    if method == "textDocument/inlineCompletion" then
      table.insert(requests, since_start())
    end
    return original_request(method, params, handler, bufnr)
  end
  local status = require("ghostfim.status")
  local original_update = status.update
  status.update = function(result)
    if type(result) == "table" and result.state == "ready" and not ready_at then
      ready_at = since_start()
    end
    return original_update(result)
  end

  -- The filter is calibrated on the Qwen models, not the tiny smoke-test one.
  local settings = { filter = "off" }
  if not ghostfim.setup({ cmd = H.server_cmd, model = { size = model }, settings = settings }) then
    return H.fail("setup", "returned false")
  end
  H.open_python_file()
  local opened_at = since_start()
  -- Typing starts at once: the state the server reports right before the first key.
  local first_status
  ghostfim.status(function(err, result)
    first_status = err and ("error: " .. tostring(err.message)) or (result and result.state)
  end)
  vim.api.nvim_input("Go")
  -- About a keystroke every 90 ms (a fast typist), so that keys come before the server has
  -- answered initialize and after it, while the model still loads.
  H.type_keys("    return fib", 90)
  local typed_at = since_start()
  local requests_while_typing = #requests
  H.wait_for(5000, function()
    return first_status
  end)
  local state_when_typing = first_status
  if state_when_typing ~= "loading" then
    H.fail("typing started while the model loads", string.format(
      "the server said %s before the first key (opened at %d ms): nothing to test",
      tostring(state_when_typing), opened_at))
  else
    H.pass("typing started while the model loads", string.format(
      "file open at %d ms, %d keys typed by %d ms, %d requests sent", opened_at,
      #"    return fib", typed_at, requests_while_typing))
  end

  -- No more keys from here on.
  local tick = vim.api.nvim_buf_get_changedtick(0)
  local shown = H.wait_for(WAIT_MS, H.shown_text, 10)
  local shown_at = since_start()
  client.request = original_request
  status.update = original_update
  local name = "ghost text appears once the model is ready, without another keystroke"
  if not shown then
    return H.fail(name, string.format("none within %d s; model ready at %s ms; requests at %s",
      WAIT_MS / 1000, tostring(ready_at), table.concat(requests, ", ")))
  end
  if vim.api.nvim_buf_get_changedtick(0) ~= tick or vim.api.nvim_get_mode().mode ~= "i" then
    return H.fail(name, "the buffer or mode changed while waiting")
  end
  local line = vim.api.nvim_get_current_line()
  if line ~= "    return fib" then
    return H.fail(name, "the line is " .. line)
  end
  local after_ready = ready_at and (shown_at - ready_at) or nil
  H.pass(name, string.format("%q", shown))
  H.say("startup: nvim start -> first ghost text %d ms (model ready at %s ms, %s ms later; " ..
    "requests sent at %s ms; %d after the typing)", shown_at, tostring(ready_at),
    tostring(after_ready), table.concat(requests, ", "), #requests - requests_while_typing)
  vim.api.nvim_input("<Esc>")
  H.sleep(30)
end

H.run(main)
