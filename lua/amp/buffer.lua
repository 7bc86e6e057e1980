--- The one rule for "is this buffer a file": a valid, normal buffer (not a
--- terminal, help, quickfix or scratch buffer: 'buftype' is empty) whose
--- name is an absolute path, not a URL (`oil://`, `fugitive://`), and not
--- one of the plugin's own files (its log: the server appends to it, and
--- that is no agent's change to watch, review or report to an agent).
--- The Lua helpers of the library use this module too (src/nvim/helpers/shared.lua).
local M = {}

local api = vim.api
local opts = { buf = 0 }

--- The plugin's own files (path -> true) and buffers (number -> true).
M.own_files = {}
M.own_buffers = {}

--- The file `buf` shows, or nil.
---@param buf integer
---@return string|nil
function M.file_of(buf)
  if not api.nvim_buf_is_valid(buf) or M.own_buffers[buf] then
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
    or M.own_files[name]
  then
    return nil
  end
  return name
end

--- The plugin's own files: the log, its rotated copy and the build log.
--- Replaces the previous set.
---@param paths string[]
function M.set_own_files(paths)
  local set = {}
  for _, path in ipairs(paths) do
    set[path] = true
  end
  M.own_files = set
end

-- The list setup() made before this module was loaded (lua/amp/core.lua).
if package.loaded["amp.core"] then
  M.set_own_files(package.loaded["amp.core"].own_files())
end

--- Marks `buf` as one of the plugin's own (until it is wiped out).
---@param buf integer
function M.mark_own(buf)
  if M.own_buffers[buf] then
    return
  end
  M.own_buffers[buf] = true
  api.nvim_create_autocmd("BufWipeout", {
    buffer = buf,
    once = true,
    desc = "amp: forget the plugin's own buffer",
    callback = function()
      M.own_buffers[buf] = nil
    end,
  })
end

return M
