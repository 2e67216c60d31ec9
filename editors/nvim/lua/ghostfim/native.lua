-- Neovim 0.12+ requests and draws inline completions itself (vim.lsp.inline_completion).
-- When it is there (and `native` is on) ghostfim leaves ghost text to it and adds only what it
-- lacks: accepting a word or a line, and dismissing. Streamed ghostfim/ghostText updates are not
-- shown in this mode: Neovim's renderer only knows the request's answer. Neovim does not tell
-- when it draws an item or drops it, so the server hears only of accepts from here: the item's
-- command after a full one (our on_accept replaces Neovim's insertion, which would run it), and
-- the part taken after a word or a line.
local client = require("ghostfim.client")
local edit = require("ghostfim.edit")
local signals = require("ghostfim.signals")

local M = {}

local function inline_completion()
  local ok, mod = pcall(require, "vim.lsp.inline_completion")
  if ok and type(mod) == "table" and type(mod.enable) == "function"
      and type(mod.get) == "function" then
    return mod
  end
  return nil
end

function M.available()
  return inline_completion() ~= nil
end

function M.namespace()
  return vim.api.nvim_get_namespaces()["nvim.lsp.inline_completion"]
end

function M.has_suggestion(bufnr)
  local ns = M.namespace()
  return ns ~= nil and #vim.api.nvim_buf_get_extmarks(bufnr, ns, 0, -1, { limit = 1 }) > 0
end

function M.attach(bufnr)
  inline_completion().enable(M.enabled, { bufnr = bufnr })
end

M.enabled = true

function M.set_enabled(enabled, buffers)
  M.enabled = enabled
  for _, bufnr in ipairs(buffers) do
    inline_completion().enable(enabled, { bufnr = bufnr })
  end
end

-- Neovim's own accept inserts the whole item at the position it was requested for, which
-- repeats any characters typed since; insert only what is still ahead of the cursor.
-- Returns what of the item's text is now in the buffer (typed over it, then inserted) and
-- whether that is all of it; nil for a snippet.
local function insert_rest(bufnr, item, kind)
  local text = item.insert_text
  if type(text) ~= "string" then
    return nil
  end
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  row = row - 1
  local typed = ""
  local start = item.range and item.range.start
  if start and start.row == row and start.col <= col then
    local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ""
    local before = line:sub(start.col + 1, col)
    if text:sub(1, #before) == before then
      typed = before
    end
  end
  local rest = text:sub(#typed + 1)
  local part = edit.part(rest, kind)
  edit.insert(bufnr, row, col, part)
  return typed .. part, #part == #rest
end

-- Tells the server what the accept took: a full accept runs the item's command through the
-- client it came from (another server's items have their own), a part is reported to ghostfim.
local function report(bufnr, item, taken, all)
  if all then
    local lsp_client = item.command and vim.lsp.get_client_by_id(item.client_id)
    if lsp_client then
      lsp_client:exec_cmd(item.command, { bufnr = bufnr })
    end
  elseif item.client_id == client.id then
    signals.partially_accepted(item, item.insert_text, taken)
  end
end

--- @return boolean whether there was a suggestion to accept
function M.accept(bufnr, kind)
  if not M.has_suggestion(bufnr) then
    return false
  end
  return inline_completion().get({
    bufnr = bufnr,
    on_accept = function(item)
      local taken, all = insert_rest(bufnr, item, kind)
      if taken then
        report(bufnr, item, taken, all)
      end
    end,
  })
end

--- @return boolean whether there was something to dismiss
function M.dismiss(bufnr)
  if not M.has_suggestion(bufnr) then
    return false
  end
  -- There is no public "hide": turning it off and on for the buffer drops the shown item and
  -- its pending requests; the next keystroke asks again.
  inline_completion().enable(false, { bufnr = bufnr })
  inline_completion().enable(true, { bufnr = bufnr })
  return true
end

--- Not offered by Neovim's implementation: the key falls through.
function M.trigger()
  return false
end

function M.on_edit() end
function M.clear() end
function M.on_ghost_text() end
-- Neovim's inline completion asks again on the next keystroke; nothing to do when ready.
function M.on_ready() end

return M
