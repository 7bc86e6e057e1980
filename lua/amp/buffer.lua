--- The one rule for "is this buffer a file": a valid, normal buffer (not a
--- terminal, help, quickfix or scratch buffer: 'buftype' is empty) whose
--- name is an absolute path, not a URL (`oil://`, `fugitive://`).
--- src/nvim/helpers.lua uses this module too.
local M = {}

local api = vim.api
local opts = { buf = 0 }

--- The file `buf` shows, or nil.
---@param buf integer
---@return string|nil
function M.file_of(buf)
  if not api.nvim_buf_is_valid(buf) then
    return nil
  end
  opts.buf = buf
  if api.nvim_get_option_value("buftype", opts) ~= "" then
    return nil
  end
  local name = api.nvim_buf_get_name(buf)
  if
    name == ""
    or name:byte(1) ~= 47 --[[ "/" ]]
    or name:find("://", 1, true)
  then
    return nil
  end
  return name
end

return M
