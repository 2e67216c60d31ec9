-- Inserting a suggestion, or the next word or line of it, at the cursor.
local M = {}

--- The leading part of `text` that an accept of `kind` ("all", "word" or "line") takes.
function M.part(text, kind)
  if kind == "word" then
    -- Blanks (line breaks included), then one word or one run of punctuation.
    return text:match("^%s*[%w_]+") or text:match("^%s*[^%w_%s]+") or text
  elseif kind == "line" then
    -- Up to the end of the current line; at a line break, the break and the next line.
    return text:match("^[^\n]+") or text:match("^\n[^\n]*") or text
  end
  return text
end

--- Inserts `text` (may span lines) at (row, col) of the current window's buffer and puts the
--- cursor right after it. row and col are 0-based, col in bytes.
--- @return integer, integer row and col of the end of the insertion
function M.insert(bufnr, row, col, text)
  local lines = vim.split(text, "\n", { plain = true })
  vim.api.nvim_buf_set_text(bufnr, row, col, row, col, lines)
  local end_row = row + #lines - 1
  local end_col = (#lines == 1 and col or 0) + #lines[#lines]
  vim.api.nvim_win_set_cursor(0, { end_row + 1, end_col })
  return end_row, end_col
end

return M
