-- Drawing a suggestion as ghost text: extmarks in a namespace of our own, first line as virtual
-- text at the cursor, the other lines as virtual lines below it.
local M = {}

M.namespace = vim.api.nvim_create_namespace("ghostfim")
M.highlight = "GhostfimSuggestion"

-- Inline virtual text (text shown between buffer characters) exists from Neovim 0.10 on.
local has_inline_virt_text = vim.fn.has("nvim-0.10") == 1

-- Where the first line goes before 0.10. At the end of the line an overlay starts exactly at
-- the cursor and covers nothing ("eol" would leave a blank cell first). In the middle of a line
-- an overlay would hide the text after the cursor, so the suggestion goes after the line's end
-- instead: approximate, but nothing the user wrote disappears.
local function first_line_position(bufnr, row, col)
  if has_inline_virt_text then
    return "inline"
  end
  local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ""
  return col >= #line and "overlay" or "eol"
end

function M.define_highlight()
  vim.cmd("highlight default link " .. M.highlight .. " Comment")
end

-- Virtual text draws a tab as a single cell, which would misalign suggested indentation.
local function expand_tabs(bufnr, text)
  if not text:find("\t", 1, true) then
    return text
  end
  local width = vim.api.nvim_buf_get_option(bufnr, "tabstop")
  return (text:gsub("\t", string.rep(" ", width)))
end

function M.clear(bufnr)
  if vim.api.nvim_buf_is_valid(bufnr) then
    vim.api.nvim_buf_clear_namespace(bufnr, M.namespace, 0, -1)
  end
end

--- Shows `text` as if inserted at (row, col); row and col are 0-based, col in bytes.
function M.show(bufnr, row, col, text)
  M.clear(bufnr)
  local lines = vim.split(text, "\n", { plain = true })
  local opts = { hl_mode = "combine" }
  if lines[1] ~= "" then
    opts.virt_text = { { expand_tabs(bufnr, lines[1]), M.highlight } }
    opts.virt_text_pos = first_line_position(bufnr, row, col)
  end
  if #lines > 1 then
    opts.virt_lines = {}
    for i = 2, #lines do
      -- An empty chunk list would draw nothing, not an empty line.
      table.insert(opts.virt_lines, { { expand_tabs(bufnr, lines[i]), M.highlight } })
    end
  end
  vim.api.nvim_buf_set_extmark(bufnr, M.namespace, row, col, opts)
end

--- What is drawn in bufnr, rebuilt from the extmark (first line, "\n", virtual lines), or nil.
function M.shown_text(bufnr, namespace)
  local marks = vim.api.nvim_buf_get_extmarks(bufnr, namespace or M.namespace, 0, -1,
    { details = true })
  local mark = marks[1]
  if not mark then
    return nil
  end
  local details = mark[4]
  local function join(chunks)
    local parts = {}
    for _, chunk in ipairs(chunks or {}) do
      table.insert(parts, chunk[1])
    end
    return table.concat(parts)
  end
  local lines = { join(details.virt_text) }
  for _, virt_line in ipairs(details.virt_lines or {}) do
    table.insert(lines, join(virt_line))
  end
  return table.concat(lines, "\n"), mark[2], mark[3]
end

return M
