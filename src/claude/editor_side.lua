-- Editor reads and writes of the Claude Code front-end (main thread only;
-- compiled once by src/claude/editor_side.rs). No Ex command is built from
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

return M
