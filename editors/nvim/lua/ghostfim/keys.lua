-- ghostfim's Insert mode keys, and what each key does when there is nothing to act on: it runs
-- the mapping that was on the key before (the user's own, nvim-cmp's <Tab>, LazyVim's <A-j>),
-- or the key itself when there was none. Feeding the bare key instead would bypass them.
local M = {}

local DESC_PREFIX = "ghostfim: "

-- saved[bufnr][lhs]: the buffer-local mapping ghostfim's key replaced in that buffer, or false.
-- A global mapping is not saved: it is looked up when the key is pressed, so a plugin that maps
-- the key after ghostfim attached (cmp's setup() often runs later) is still the fallback.
local saved = {}
-- normalized[lhs]: the key as the keymap lists spell it ("<M-l>", "<Tab>", "<Space>x").
local normalized = {}

local function termcodes(keys)
  return vim.api.nvim_replace_termcodes(keys, true, true, true)
end

-- `buffer` is 1 or the buffer number for a buffer-local mapping (maparg() and the keymap lists
-- differ), 0 for a global one.
local function is_local(mapping)
  return mapping.buffer ~= nil and mapping.buffer ~= 0
end

local function is_ours(mapping)
  return is_local(mapping) and type(mapping.desc) == "string"
    and mapping.desc:sub(1, #DESC_PREFIX) == DESC_PREFIX
end

-- Neovim 0.7's maparg() gives a Lua callback as a number; the keymap lists give the function.
local function with_callback(mapping, list)
  for _, entry in ipairs(list) do
    if entry.lhs == mapping.lhs then
      return entry
    end
  end
  return mapping
end

--- The Insert mode mapping of `lhs` that is in effect in bufnr (buffer-local first), or nil.
local function mapping_in(bufnr, lhs)
  local info = vim.api.nvim_buf_call(bufnr, function()
    return vim.fn.maparg(lhs, "i", false, true)
  end)
  if type(info) ~= "table" or info.lhs == nil then
    return nil
  end
  if is_local(info) then
    return with_callback(info, vim.api.nvim_buf_get_keymap(bufnr, "i"))
  end
  return with_callback(info, vim.api.nvim_get_keymap("i"))
end
M.mapping_in = mapping_in

local function global_mapping(lhs)
  local spelled = normalized[lhs] or lhs
  for _, entry in ipairs(vim.api.nvim_get_keymap("i")) do
    if entry.lhs == spelled then
      return entry
    end
  end
  return nil
end
M.global_mapping = global_mapping

-- Runs `mapping` as Neovim would have when its key was pressed: a Lua callback is called (an
-- expr one's result is fed as keys), an expr rhs is evaluated, a plain rhs is fed; remapped
-- unless it was a noremap mapping. Fed with "i" so that keys typed after this one stay after it.
local function replay(mapping, lhs)
  local keys
  if type(mapping.callback) == "function" then
    local result = mapping.callback()
    if mapping.expr ~= 1 then
      return
    end
    keys = type(result) == "string" and result or ""
    -- 0.8+ records replace_keycodes; 0.7's vim.keymap.set wrapped the callback to do it.
    if mapping.replace_keycodes == 1 then
      keys = termcodes(keys)
    end
  else
    -- The rhs was translated when it was defined (an expr one too: '<C-n>' in quotes is a
    -- key, <SNR> names the script); maparg() shows it spelled out, so translate it back.
    keys = termcodes(mapping.rhs or "")
    if mapping.expr == 1 then
      keys = vim.api.nvim_eval(keys)
      keys = type(keys) == "string" and keys or tostring(keys)
    end
  end
  if keys == "" then
    return
  end
  -- `imap <Tab> <Tab>`-style: remapping its own key would run ghostfim's mapping forever.
  local remap = mapping.noremap ~= 1 and keys ~= termcodes(lhs)
  vim.api.nvim_feedkeys(keys, remap and "mi" or "ni", false)
end

--- What `lhs` does in bufnr when ghostfim has nothing to do with it.
function M.fallback(bufnr, lhs)
  local previous = saved[bufnr] and saved[bufnr][lhs]
  if not previous then
    previous = global_mapping(lhs)
  end
  if previous and not is_ours(previous) then
    return replay(previous, lhs)
  end
  -- No mapping: the key itself, as if typed (so abbreviations and the like still apply).
  vim.api.nvim_feedkeys(termcodes(lhs), "nit", false)
end

--- Maps `lhs` in Insert mode in bufnr to `action` (a function returning whether it acted) and
--- remembers the buffer-local mapping it replaces, for the fallback and for unmap().
function M.map(bufnr, lhs, action, name)
  saved[bufnr] = saved[bufnr] or {}
  if saved[bufnr][lhs] == nil then
    local previous = mapping_in(bufnr, lhs)
    -- Only a buffer-local mapping is shadowed for good; ours (mapped again after a restart)
    -- is not the user's.
    if previous and (not is_local(previous) or is_ours(previous)) then
      previous = nil
    end
    saved[bufnr][lhs] = previous or false
  end
  vim.keymap.set("i", lhs, function()
    if not action() then
      M.fallback(bufnr, lhs)
    end
  end, { buffer = bufnr, desc = DESC_PREFIX .. name })
  local ours = mapping_in(bufnr, lhs)
  if ours then
    normalized[lhs] = ours.lhs
  end
end

--- Removes ghostfim's mapping of `lhs` in bufnr and puts back the buffer-local one it replaced.
function M.unmap(bufnr, lhs)
  if not vim.api.nvim_buf_is_valid(bufnr) then
    saved[bufnr] = nil
    return
  end
  pcall(vim.keymap.del, "i", lhs, { buffer = bufnr })
  local previous = saved[bufnr] and saved[bufnr][lhs]
  if previous then
    local opts = {
      noremap = previous.noremap == 1, silent = previous.silent == 1,
      expr = previous.expr == 1, nowait = previous.nowait == 1,
      desc = previous.desc,
      callback = type(previous.callback) == "function" and previous.callback or nil,
    }
    if previous.replace_keycodes == 1 then
      opts.replace_keycodes = true
    end
    pcall(vim.api.nvim_buf_set_keymap, bufnr, "i", previous.lhs, previous.rhs or "", opts)
  end
  if saved[bufnr] then
    saved[bufnr][lhs] = nil
  end
end

--- Forgets bufnr (wiped out).
function M.forget(bufnr)
  saved[bufnr] = nil
end

local function describe(mapping)
  local what
  if type(mapping.desc) == "string" and mapping.desc ~= "" then
    what = string.format("%q", mapping.desc)
  elseif mapping.rhs and mapping.rhs ~= "" then
    what = mapping.rhs
  else
    what = "a Lua function"
  end
  return (mapping.expr == 1 and "an expr mapping: " or "") .. what
end

--- Keymap conflicts, for :checkhealth: the configured keys that something else maps as well.
--- `keymaps` is action -> lhs|false; `buffers` the attached buffers.
--- @return table list of { lhs, action, kind = "fallback"|"shadowed", text }
function M.conflicts(keymaps, buffers)
  local found = {}
  local actions = vim.tbl_keys(keymaps)
  table.sort(actions)
  for _, action in ipairs(actions) do
    local lhs = keymaps[action]
    if lhs then
      local global = global_mapping(lhs)
      if global and not is_ours(global) then
        table.insert(found, { lhs = lhs, action = action, kind = "fallback", text = string.format(
          "%s (%s) is also mapped globally, to %s: it runs when there is no suggestion",
          lhs, action, describe(global)) })
      end
      for _, bufnr in ipairs(buffers) do
        if vim.api.nvim_buf_is_valid(bufnr) then
          local previous = saved[bufnr] and saved[bufnr][lhs]
          if previous then
            table.insert(found, { lhs = lhs, action = action, kind = "fallback",
              text = string.format("%s (%s) was mapped in buffer %d, to %s: it runs when " ..
                "there is no suggestion", lhs, action, bufnr, describe(previous)) })
          end
          local now = mapping_in(bufnr, lhs)
          if now and not is_ours(now) then
            table.insert(found, { lhs = lhs, action = action, kind = "shadowed",
              text = string.format("%s (%s) in buffer %d is mapped over ghostfim's key, to " ..
                "%s: ghostfim's %s does not run (choose another key in keymaps.%s)", lhs,
                action, bufnr, describe(now), action, action) })
          end
        end
      end
    end
  end
  return found
end

return M
