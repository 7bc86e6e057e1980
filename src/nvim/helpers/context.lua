-- For src/nvim/context.rs: the current selection and the visible files, read
-- per cursor move.

local api, fn = vim.api, vim.fn
-- getregionpos() as 0.11 has it, on 0.10 too (amp.compat, loaded on first
-- use: not on the start-up path).
local compat
local H = ... -- every helper (see src/nvim/lua.rs), for those of other files
local M = {}

--- The cursor or Visual selection of the current window, if it shows a file.
--- Returns name, cursor_only, then either (row, col, line) or a list of
--- regions { start_line, start_col, end_line, end_col } (1-based lines, byte
--- columns; end column inclusive as getregionpos() gives it) and the lines
--- from the first to the last region line, and the first line number.
function M.selection()
  local buf = api.nvim_get_current_buf()
  local name = H.file_of(buf)
  if not name then
    return nil
  end
  local mode = api.nvim_get_mode().mode
  local c = mode:byte(1)
  local kind = (c == 118 or c == 115) and "v" -- v, s
    or (c == 86 or c == 83) and "V" -- V, S
    or (c == 22 or c == 19) and "\22" -- CTRL-V, CTRL-S
    or nil
  if not kind then
    local cursor = api.nvim_win_get_cursor(0)
    return name, true, cursor[1], cursor[2], api.nvim_get_current_line()
  end
  compat = compat or require("amp.compat")
  local segments = compat.getregionpos(fn.getpos("v"), fn.getpos("."), { type = kind, eol = true })
  if #segments == 0 then
    return nil
  end
  local first = segments[1][1][2]
  local last = segments[#segments][2][2]
  local lines = api.nvim_buf_get_lines(buf, first - 1, last, false)
  local regions = {}
  if kind == "\22" then
    for i, seg in ipairs(segments) do
      regions[i] = { seg[1][2], seg[1][3], seg[2][2], seg[2][3] }
    end
  else
    local s, e = segments[1][1], segments[#segments][2]
    regions[1] = { s[2], s[3], e[2], e[3] }
  end
  return name, false, regions, lines, first
end

--- Names of the files shown in the current tab page's (non-floating)
--- windows, in window order, with duplicates.
function M.visible_files()
  local out = {}
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if api.nvim_win_get_config(win).relative == "" then
      local name = H.file_of(api.nvim_win_get_buf(win))
      if name then
        out[#out + 1] = name
      end
    end
  end
  return out
end

return M
