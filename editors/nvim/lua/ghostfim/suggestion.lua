-- The life of a suggestion in insert mode, drawn by ghostfim itself: ask the server on each
-- keystroke, show an answer only where it still applies, follow the user typing through it,
-- insert it (or its next word or line) on accept, and tell the server what became of it
-- (ghostfim.signals).
local client = require("ghostfim.client")
local edit = require("ghostfim.edit")
local ghost = require("ghostfim.ghost")
local signals = require("ghostfim.signals")

local M = {}

local TRIGGER_INVOKED = 1
local TRIGGER_AUTOMATIC = 2
-- Answers to superseded requests: expected on every keystroke, not errors worth showing.
local REQUEST_CANCELLED = -32800
local CONTENT_MODIFIED = -32801

M.enabled = true

-- The suggestion on screen, anchored where it was requested. The line's text before the anchor
-- and after the cursor is kept to tell typing through the suggestion apart from any other edit.
-- `item` is the server's item it shows (nil for text the server streamed without one), and
-- `item_text` that item's whole text from its start, of which `text` is what follows its first
-- `base` bytes (after a word or line of it was accepted, the rest is anchored further on).
-- { bufnr, row, col, text, before, after, item, item_text, base }
local shown = nil
-- The inline completion request in flight: { id, bufnr, tick, version, row, col, position,
-- before, after, item (the answer's, once it came) }
local pending = nil
-- The newest request sent, answered or not: its ghostfim/ghostText updates keep coming after
-- the answer, possibly after the user typed on.
local latest = nil
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

-- Shows `text`, a suggestion for (row, col); the cursor may be further right on that row when
-- the user typed the suggestion's first characters since it was asked for. `item` is the
-- server's item that `text` belongs to; `item_text` and `base` say where in it `text` starts
-- (default: `text` is all of it).
local function show(bufnr, row, col, text, cursor_col, item, item_text, base)
  hide()
  cursor_col = cursor_col or col
  local rest = text:sub(cursor_col - col + 1)
  if rest == "" then
    return
  end
  local line = line_at(bufnr, row)
  shown = {
    bufnr = bufnr, row = row, col = col, text = text,
    before = line:sub(1, col), after = line:sub(cursor_col + 1),
    item = item, item_text = item_text or text, base = base or 0,
  }
  ghost.show(bufnr, row, cursor_col, rest)
  if item then
    signals.shown(item, shown.item_text)
  end
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

local function first_item(result)
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
  if type(text) ~= "string" then
    return nil
  end
  return text, item.range, item
end

local function still_current(request)
  if vim.api.nvim_get_current_buf() ~= request.bufnr or not in_insert_mode() then
    return false
  end
  local row, col = cursor()
  return vim.api.nvim_buf_get_changedtick(request.bufnr) == request.tick
    and row == request.row and col == request.col
end

local function same_position(a, b)
  return type(a) == "table" and type(b) == "table" and a.line == b.line
    and a.character == b.character
end

-- Where `text` starts, as a byte column on the request's row: the item's range start when it
-- has one on that row (ghostfim's is the request position itself), else the request position.
local function anchor_col(request, range)
  if type(range) ~= "table" or type(range.start) ~= "table"
      or same_position(range.start, request.position) or range.start.line ~= request.row
      or type(range.start.character) ~= "number" then
    return request.col
  end
  local col = client.byte_col(request.before .. request.after, range.start.character)
  -- A range that starts after the request position cannot be drawn at the cursor.
  return math.min(col, request.col)
end

--- Shows `text`, the answer to `request`, if it still applies. The user may have typed on since
--- the request was sent (the answer arrived later, or it is a streamed update): the characters
--- typed since must be the start of the suggestion, and only the rest is drawn (and accepted),
--- so accepting never inserts them twice. Otherwise the suggestion is stale and dropped.
local function place(request, text, range)
  if vim.api.nvim_get_current_buf() ~= request.bufnr or not in_insert_mode() then
    return false
  end
  local row, col = cursor()
  if row ~= request.row then
    return false
  end
  local start = anchor_col(request, range)
  if col < request.col then
    return false
  end
  local line = line_at(request.bufnr, row)
  if line:sub(1, start) ~= request.before:sub(1, start) or line:sub(col + 1) ~= request.after then
    return false
  end
  local typed = line:sub(start + 1, col)
  if text:sub(1, #typed) ~= typed or #typed >= #text then
    return false
  end
  -- Streamed text of a request is the same item as its answer, grown.
  show(request.bufnr, row, start, text, col, request.item)
  return true
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
  if not M.enabled then
    return
  end
  local text, range, item = first_item(result)
  request.item = item
  if text and place(request, text, range) then
    return
  end
  -- Nothing to suggest right here: whatever is still shown is no longer the server's word.
  if not text and still_current(request) then
    hide()
  end
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
  -- Until initialize is answered the buffer is not open on the server (an error to the user).
  -- The first answer comes anyway: when the model is ready, on_ready asks again.
  local lsp_client = client.get()
  if not lsp_client or not lsp_client.initialized then
    return
  end
  last_request_key[bufnr] = key
  -- The server supersedes older requests itself; cancelling also frees its queue at once.
  cancel_pending()
  local position = client.position(bufnr, row, col)
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    position = position,
    context = { triggerKind = trigger_kind },
  }
  local line = line_at(bufnr, row)
  local req = {
    bufnr = bufnr, tick = tick, row = row, col = col, position = position,
    uri = params.textDocument.uri, before = line:sub(1, col), after = line:sub(col + 1),
  }
  local sent, id = client.request("textDocument/inlineCompletion", params, function(err, result)
    on_response(req, err, result)
  end, bufnr)
  if sent then
    -- Read after the request: sending it flushes the pending didChange, which sets the version.
    req.version = client.document_version(bufnr)
    req.id = id
    pending = req
    latest = req
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
  latest = nil
  if bufnr then
    last_request_key[bufnr] = nil
  end
end

--- ghostfim/ghostText: the growing suggestion for a request. Kept if it is for the newest
--- request (document version and position) and what was typed since is its start, or if it is
--- for exactly the document version and cursor position the user is at now.
function M.on_ghost_text(params)
  if not M.enabled or type(params) ~= "table" or type(params.insertText) ~= "string"
      or type(params.position) ~= "table" or not in_insert_mode() then
    return
  end
  local bufnr = vim.api.nvim_get_current_buf()
  if params.uri ~= vim.uri_from_bufnr(bufnr)
      or dismissed_at[bufnr] == vim.api.nvim_buf_get_changedtick(bufnr) then
    return
  end
  -- The item the text is, as the server names it: a request cancelled before its answer (or
  -- not answered yet) still streams text that goes on screen, and its accept must name an item.
  local item = type(params.command) == "table" and params or nil
  if latest and latest.bufnr == bufnr and latest.version == params.version
      and same_position(latest.position, params.position) then
    latest.item = latest.item or item
    place(latest, params.insertText)
    return
  end
  if params.version ~= client.document_version(bufnr) then
    return
  end
  local row, col = cursor()
  if not same_position(params.position, client.position(bufnr, row, col)) then
    return
  end
  show(bufnr, row, col, params.insertText, nil, item)
end

--- The model became ready: a request that was answered empty while it loaded would leave the
--- user without a suggestion until the next keystroke, so ask again where the cursor is (a
--- server that held the request answers it itself: then one is still pending).
function M.on_ready(bufnr)
  if not M.enabled or pending or not in_insert_mode()
      or vim.api.nvim_get_current_buf() ~= bufnr or remaining(bufnr)
      or dismissed_at[bufnr] == vim.api.nvim_buf_get_changedtick(bufnr) then
    return
  end
  last_request_key[bufnr] = nil
  request(bufnr, TRIGGER_AUTOMATIC)
end

function M.has_suggestion(bufnr)
  return remaining(bufnr) ~= nil
end

--- Inserts the suggestion, or its next "word" or "line"; the rest stays on screen. The server
--- hears of it: the item's command runs once all of it is in, else the part taken is reported.
--- @return boolean whether there was a suggestion to accept
function M.accept(bufnr, kind)
  local rest, row, col = remaining(bufnr)
  if not rest then
    return false
  end
  cancel_pending()
  local was = shown
  local part = edit.part(rest, kind)
  local end_row, end_col = edit.insert(bufnr, row, col, part)
  -- Bytes of the item now in the buffer: those before this anchor, those typed over it since,
  -- and the part just inserted.
  local taken = was.base + (#was.text - #rest) + #part
  show(bufnr, end_row, end_col, rest:sub(#part + 1), nil, was.item, was.item_text, taken)
  if was.item then
    if #part == #rest then
      signals.accepted(was.item)
    else
      signals.partially_accepted(was.item, was.item_text, was.item_text:sub(1, taken))
    end
  end
  return true
end

--- @return boolean whether there was something to dismiss
function M.dismiss(bufnr)
  if not shown and not pending then
    return false
  end
  local on_screen = remaining(bufnr) and shown
  dismissed_at[bufnr] = vim.api.nvim_buf_get_changedtick(bufnr)
  cancel_pending()
  hide()
  if on_screen and on_screen.item then
    signals.dismissed(on_screen.item, on_screen.item_text)
  end
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
