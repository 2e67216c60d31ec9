-- The life of a suggestion in insert mode, drawn by ghostfim itself: ask the server on each
-- keystroke, show an answer only where it still applies, follow the user typing through it,
-- and insert it (or its next word or line) on accept.
local client = require("ghostfim.client")
local edit = require("ghostfim.edit")
local ghost = require("ghostfim.ghost")

local M = {}

local TRIGGER_INVOKED = 1
local TRIGGER_AUTOMATIC = 2
-- Answers to superseded requests: expected on every keystroke, not errors worth showing.
local REQUEST_CANCELLED = -32800
local CONTENT_MODIFIED = -32801

M.enabled = true

-- The suggestion on screen, anchored where it was requested. The line's text on both sides of
-- the anchor is kept to tell typing through the suggestion apart from any other edit.
-- { bufnr, row, col, text, before, after }
local shown = nil
-- The inline completion request in flight: { id, bufnr, tick, row, col }
local pending = nil
-- Per buffer, "changedtick:row:col" of the last automatic request: one keystroke fires both
-- TextChangedI and CursorMovedI, and should cost one request.
local last_request_key = {}
-- Per buffer, the changedtick at which the user dismissed: no automatic request until it moves.
local dismissed_at = {}
local reported_errors = {}

local function cursor()
  local pos = vim.api.nvim_win_get_cursor(0)
  return pos[1] - 1, pos[2]
end

local function line_at(bufnr, row)
  return vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ""
end

local function in_insert_mode()
  return vim.api.nvim_get_mode().mode:sub(1, 1) == "i"
end

--- The part of the shown suggestion still ahead of the cursor, with the cursor position; nil
--- when the buffer or cursor moved away from it.
local function remaining(bufnr)
  if not shown or shown.bufnr ~= bufnr or vim.api.nvim_get_current_buf() ~= bufnr then
    return nil
  end
  local row, col = cursor()
  if row ~= shown.row or col < shown.col then
    return nil
  end
  local line = line_at(bufnr, row)
  if line:sub(1, shown.col) ~= shown.before or line:sub(col + 1) ~= shown.after then
    return nil
  end
  local typed = line:sub(shown.col + 1, col)
  if shown.text:sub(1, #typed) ~= typed or #typed == #shown.text then
    return nil
  end
  return shown.text:sub(#typed + 1), row, col
end

local function hide()
  if shown then
    ghost.clear(shown.bufnr)
    shown = nil
  end
end

local function show(bufnr, row, col, text)
  hide()
  if text == "" then
    return
  end
  local line = line_at(bufnr, row)
  shown = {
    bufnr = bufnr, row = row, col = col, text = text,
    before = line:sub(1, col), after = line:sub(col + 1),
  }
  ghost.show(bufnr, row, col, text)
end

local function cancel_pending()
  if pending then
    client.cancel(pending.id)
    pending = nil
  end
end

local function report_error(err)
  local message = "ghostfim: " .. tostring(err.message or vim.inspect(err))
  if not reported_errors[message] then
    reported_errors[message] = true
    vim.notify(message, vim.log.levels.ERROR)
  end
end

local function first_insert_text(result)
  if type(result) ~= "table" then
    return nil
  end
  local item = (result.items or result)[1]
  if type(item) ~= "table" then
    return nil
  end
  local text = item.insertText
  if type(text) == "table" then
    text = text.value -- a StringValue; ghostfim never sends snippets, but be lenient
  end
  return type(text) == "string" and text or nil
end

local function still_current(request)
  if vim.api.nvim_get_current_buf() ~= request.bufnr or not in_insert_mode() then
    return false
  end
  local row, col = cursor()
  return vim.api.nvim_buf_get_changedtick(request.bufnr) == request.tick
    and row == request.row and col == request.col
end

local function on_response(request, err, result)
  if pending == request then
    pending = nil
  end
  if err then
    if err.code ~= REQUEST_CANCELLED and err.code ~= CONTENT_MODIFIED then
      report_error(err)
    end
    return
  end
  if not M.enabled or not still_current(request) then
    return
  end
  show(request.bufnr, request.row, request.col, first_insert_text(result) or "")
end

local function request(bufnr, trigger_kind)
  if not M.enabled or not in_insert_mode() then
    return
  end
  local row, col = cursor()
  local tick = vim.api.nvim_buf_get_changedtick(bufnr)
  if dismissed_at[bufnr] ~= tick then
    dismissed_at[bufnr] = nil
  end
  local key = table.concat({ tick, row, col }, ":")
  if trigger_kind == TRIGGER_AUTOMATIC
      and (key == last_request_key[bufnr] or dismissed_at[bufnr]) then
    return
  end
  last_request_key[bufnr] = key
  -- The server supersedes older requests itself; cancelling also frees its queue at once.
  cancel_pending()
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    position = client.position(bufnr, row, col),
    context = { triggerKind = trigger_kind },
  }
  local req = { bufnr = bufnr, tick = tick, row = row, col = col }
  local sent, id = client.request("textDocument/inlineCompletion", params, function(err, result)
    on_response(req, err, result)
  end, bufnr)
  if sent then
    req.id = id
    pending = req
  end
end

--- TextChangedI, CursorMovedI and InsertEnter: keep what the user typed through, drop what no
--- longer fits, and ask for a fresh suggestion.
function M.on_edit(bufnr)
  if not M.enabled then
    return
  end
  local rest, row, col = remaining(bufnr)
  if rest then
    ghost.show(bufnr, row, col, rest)
  else
    hide()
  end
  request(bufnr, TRIGGER_AUTOMATIC)
end

--- InsertLeave, BufLeave: nothing stays on screen outside insert mode.
function M.clear(bufnr)
  cancel_pending()
  hide()
  if bufnr then
    last_request_key[bufnr] = nil
  end
end

--- ghostfim/ghostText: the growing suggestion for a request, kept only if it was made for the
--- exact document version and cursor position the user is at now.
function M.on_ghost_text(params)
  if not M.enabled or type(params) ~= "table" or type(params.insertText) ~= "string"
      or type(params.position) ~= "table" or not in_insert_mode() then
    return
  end
  local bufnr = vim.api.nvim_get_current_buf()
  if params.uri ~= vim.uri_from_bufnr(bufnr)
      or params.version ~= client.document_version(bufnr)
      or dismissed_at[bufnr] == vim.api.nvim_buf_get_changedtick(bufnr) then
    return
  end
  local row, col = cursor()
  local position = client.position(bufnr, row, col)
  if params.position.line ~= position.line or params.position.character ~= position.character then
    return
  end
  show(bufnr, row, col, params.insertText)
end

function M.has_suggestion(bufnr)
  return remaining(bufnr) ~= nil
end

--- Inserts the suggestion, or its next "word" or "line"; the rest stays on screen.
--- @return boolean whether there was a suggestion to accept
function M.accept(bufnr, kind)
  local rest, row, col = remaining(bufnr)
  if not rest then
    return false
  end
  cancel_pending()
  local part = edit.part(rest, kind)
  local end_row, end_col = edit.insert(bufnr, row, col, part)
  show(bufnr, end_row, end_col, rest:sub(#part + 1))
  return true
end

--- @return boolean whether there was something to dismiss
function M.dismiss(bufnr)
  if not shown and not pending then
    return false
  end
  dismissed_at[bufnr] = vim.api.nvim_buf_get_changedtick(bufnr)
  cancel_pending()
  hide()
  return true
end

--- An explicit request: the server skips its debounce and uses the full prompt.
function M.trigger(bufnr)
  dismissed_at[bufnr] = nil
  request(bufnr, TRIGGER_INVOKED)
  return true
end

function M.set_enabled(enabled)
  M.enabled = enabled
  if not enabled then
    M.clear()
  end
end

function M.namespace()
  return ghost.namespace
end

return M
