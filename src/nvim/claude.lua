-- Editor reads and writes of the Claude Code front-end (main thread only;
-- compiled once by src/nvim/claude.rs; its openDiff reviews are
-- lua/amp/review.lua's). No Ex command is built from
-- a string: buffers are found by name and written with nvim_cmd's args.
local M = {}

local function file_buffers()
  local out = {}
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == "" and vim.bo[buf].buflisted then
      local name = vim.api.nvim_buf_get_name(buf)
      if name ~= "" then
        out[#out + 1] = { buf = buf, name = name }
      end
    end
  end
  return out
end

local function buffer_of(path)
  local wanted = vim.fs.normalize(path)
  for _, b in ipairs(file_buffers()) do
    if vim.fs.normalize(b.name) == wanted then
      return b.buf
    end
  end
  return nil
end

-- { { name, active, dirty, filetype }, ... }
function M.open_editors()
  local current = vim.api.nvim_get_current_buf()
  local out = {}
  for _, b in ipairs(file_buffers()) do
    out[#out + 1] = { b.name, b.buf == current, vim.bo[b.buf].modified, vim.bo[b.buf].filetype }
  end
  return out
end

-- nil when no buffer has the file, else whether it is modified.
function M.dirty(path)
  local buf = buffer_of(path)
  if not buf then
    return nil
  end
  return vim.bo[buf].modified
end

-- nil when no buffer has the file; true when written; false, err otherwise.
function M.save(path)
  local buf = buffer_of(path)
  if not buf then
    return nil
  end
  local ok, err = pcall(vim.api.nvim_buf_call, buf, function()
    vim.api.nvim_cmd({ cmd = "write" }, { output = true })
  end)
  if not ok then
    return false, tostring(err)
  end
  return true
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
