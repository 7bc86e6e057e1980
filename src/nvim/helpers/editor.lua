-- For src/nvim/editor.rs: the open buffers, saving one, selecting text
-- (the editor's tools).

local api = vim.api
local M = {}

--- The buffers that hold files (listed, normal buffers with a name):
--- { { name, current, modified, filetype }, ... }
function M.open_buffers()
  local current = api.nvim_get_current_buf()
  local out = {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == "" and vim.bo[buf].buflisted then
      local name = api.nvim_buf_get_name(buf)
      if name ~= "" then
        out[#out + 1] = { name, buf == current, vim.bo[buf].modified, vim.bo[buf].filetype }
      end
    end
  end
  return out
end

function M.buffer_modified(buf)
  return vim.bo[buf].modified
end

--- Writes `buf` with :write (its autocommands run as for the user's :w);
--- nil, or why it failed.
function M.save_buffer(buf)
  local ok, err = pcall(api.nvim_buf_call, buf, function()
    api.nvim_cmd({ cmd = "write" }, { output = true })
  end)
  return not ok and tostring(err) or nil
end

-- openFile's startText / endText: selects from the first startText to the
-- first endText after it (or to the end of startText; to the end of that
-- line with to_eol) in the current buffer. Whether startText was found.
function M.select_text(start_text, end_text, to_eol)
  local lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  local text = table.concat(lines, "\n")
  local s = text:find(start_text, 1, true)
  if not s then
    return false
  end
  local last = s + #start_text - 1
  if end_text and end_text ~= "" then
    local e = text:find(end_text, s + #start_text, true)
    if e then
      last = e + #end_text - 1
    end
  end
  -- 1-based byte offset -> (1-based row, 0-based byte column)
  local function at(offset)
    local base = 0
    for row, line in ipairs(lines) do
      if offset <= base + #line + 1 then
        return row, math.max(math.min(offset - base - 1, #line - 1), 0)
      end
      base = base + #line + 1
    end
    return #lines, math.max(#lines[#lines] - 1, 0)
  end
  local srow, scol = at(s)
  local erow, ecol = at(last)
  if to_eol then
    ecol = math.max(#lines[erow] - 1, 0)
  end
  local mode = vim.api.nvim_get_mode().mode:sub(1, 1)
  if mode == "v" or mode == "V" or mode == "\22" then
    vim.cmd("normal! \27")
  end
  vim.api.nvim_win_set_cursor(0, { srow, scol })
  vim.cmd("normal! v")
  vim.api.nvim_win_set_cursor(0, { erow, ecol })
  return true
end

return M
