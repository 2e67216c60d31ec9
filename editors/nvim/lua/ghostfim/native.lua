-- Neovim 0.12+ requests and draws inline completions itself (vim.lsp.inline_completion).
-- When it is there (and `native` is on) ghostfim leaves ghost text to it and adds only what it
-- lacks: accepting a word or a line, and dismissing. Streamed ghostfim/ghostText updates are not
-- shown in this mode: Neovim's renderer only knows the request's answer.
local edit = require("ghostfim.edit")

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
local function insert_rest(bufnr, item, kind)
  local text = item.insert_text
  if type(text) ~= "string" then
    return
  end
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  row = row - 1
  local start = item.range and item.range.start
  if start and start.row == row and start.col <= col then
    local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ""
    local typed = line:sub(start.col + 1, col)
    if text:sub(1, #typed) == typed then
      text = text:sub(#typed + 1)
    end
  end
  edit.insert(bufnr, row, col, edit.part(text, kind))
end

--- @return boolean whether there was a suggestion to accept
function M.accept(bufnr, kind)
  if not M.has_suggestion(bufnr) then
    return false
  end
  return inline_completion().get({
    bufnr = bufnr,
    on_accept = function(item)
      insert_rest(bufnr, item, kind)
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
