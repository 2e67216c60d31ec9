-- Accept signals (the ghostfim repository's docs/protocol.md, "Accept signals"): what became of
-- a suggestion, told to the server so that it counts accepts and refusals (ghostfim/status
-- `acceptance`). Every item the server sends carries the command `ghostfim.accepted` with its
-- id: a full accept runs it (workspace/executeCommand), as LSP clients do after inserting an
-- item; a word or a line taken, the item drawn and a dismiss are notifications of their own.
local client = require("ghostfim.client")

local M = {}

M.ACCEPTED_COMMAND = "ghostfim.accepted"
M.DID_SHOW = "textDocument/didShowCompletion"
M.DID_PARTIALLY_ACCEPT = "textDocument/didPartiallyAcceptCompletion"
M.DID_DISMISS = "ghostfim/didDismissCompletion"

local has_new_utfindex = vim.fn.has("nvim-0.11") == 1
local SHOWN_IDS_KEPT = 256

-- The ids already reported shown: an item grows while it streams and is drawn again after each
-- keystroke typed through it, but goes on screen once.
local shown_ids, shown_count = {}, 0

--- The UTF-16 code units of `text` (LSP's default unit; acceptedLength is counted in it).
function M.utf16_len(text)
  local ok, units
  if has_new_utfindex then
    ok, units = pcall(vim.str_utfindex, text, "utf-16")
  else
    -- 0.7 to 0.10: (utf-32 index, utf-16 index) of the end of the string.
    ok, units = pcall(function()
      return select(2, vim.str_utfindex(text))
    end)
  end
  return (ok and type(units) == "number") and units or #text
end

local function command_of(item)
  local command = type(item) == "table" and item.command
  if type(command) ~= "table" or type(command.command) ~= "string" then
    return nil
  end
  return command
end

--- The item id the server put in the item's command, or nil.
function M.item_id(item)
  local command = command_of(item)
  local args = command and command.arguments
  local id = type(args) == "table" and args[1]
  return type(id) == "string" and id ~= "" and id or nil
end

-- The item as the signals send it: the server's command (the id is read from it) and the text as
-- shown from the item's start (it grows while the suggestion streams; acceptedLength counts in it).
local function wire(item, text)
  local sent = { insertText = text, command = item.command }
  local range = item.range
  if type(range) == "table" and type(range.start) == "table" and range.start.line ~= nil then
    sent.range = range -- an LSP range (Neovim 0.12's own items carry another kind)
  end
  return sent
end

--- `item` (as the server sent it) is on screen with `text`. Reported once per item.
function M.shown(item, text)
  local id = M.item_id(item)
  if not id or shown_ids[id] then
    return
  end
  if shown_count >= SHOWN_IDS_KEPT then
    shown_ids, shown_count = {}, 0
  end
  shown_ids[id] = true
  shown_count = shown_count + 1
  client.notify(M.DID_SHOW, { item = wire(item, text) })
end

--- The whole item was inserted: run its command on the server (after the insertion, as LSP
--- clients do), which is how the server hears of a full accept.
function M.accepted(item)
  local command = command_of(item)
  if not command then
    return
  end
  -- The command answers null, and an id the server no longer knows is no error either.
  client.request("workspace/executeCommand",
    { command = command.command, arguments = command.arguments }, function() end)
end

--- The first part of the item's text was inserted (a word, a line): `taken` is the text of the
--- item from its start that is now in the buffer (what was typed over it included).
function M.partially_accepted(item, text, taken)
  if not M.item_id(item) or taken == "" then
    return
  end
  client.notify(M.DID_PARTIALLY_ACCEPT, {
    item = wire(item, text), acceptedLength = M.utf16_len(taken),
  })
end

--- The user dismissed the item while it was on screen.
function M.dismissed(item, text)
  if M.item_id(item) then
    client.notify(M.DID_DISMISS, { item = wire(item, text) })
  end
end

--- A new server process numbers its items afresh.
function M.reset()
  shown_ids, shown_count = {}, 0
end

return M
