-- For src/nvim/open.rs: showing a file and selecting in it.

local api = vim.api
-- vim.str_byteindex() as 0.11 has it, on 0.10 too (amp.compat, loaded on
-- first use: not on the start-up path).
local compat
local M = {}

--- Shows `path` in the current tab page (its window if one shows it, else
--- :edit) and selects lines/columns (1-based; columns in UTF-16 units).
function M.open_path(path, start_line, start_col, end_line, end_col)
  local shown
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if api.nvim_buf_get_name(api.nvim_win_get_buf(win)) == path then
      shown = win
      break
    end
  end
  if shown then
    api.nvim_set_current_win(shown)
  else
    -- Never through a command line: vim.cmd runs each line of its text as a
    -- command, so a file name with a newline would run the rest (fnameescape
    -- does not help). nvim_cmd passes the name as one argument, taken
    -- literally (no %, #, ` or wildcard expansion).
    api.nvim_cmd({ cmd = "edit", args = { path }, magic = { file = false } }, {})
  end
  if not start_line then
    return
  end
  local mode = api.nvim_get_mode().mode:sub(1, 1)
  if mode == "v" or mode == "V" or mode == "\22" then
    vim.cmd("normal! \27")
  end
  local function pos(line, col)
    local count = api.nvim_buf_line_count(0)
    line = math.max(1, math.min(line, count))
    if not col then
      return { line, 0 }
    end
    local text = api.nvim_buf_get_lines(0, line - 1, line, false)[1] or ""
    compat = compat or require("amp.compat")
    local ok, byte = pcall(compat.byteindex_utf16, text, math.max(col - 1, 0))
    return { line, ok and math.min(byte, #text) or 0 }
  end
  api.nvim_win_set_cursor(0, pos(start_line, start_col))
  if end_line then
    vim.cmd("normal! " .. ((start_col or end_col) and "v" or "V"))
    api.nvim_win_set_cursor(0, pos(end_line, end_col))
  end
  vim.cmd("normal! zv")
end

return M
