-- For src/nvim/files.rs: the loaded buffers' names, names for messages.

local api, fn = vim.api, vim.fn
local H = ... -- every helper (see src/nvim/lua.rs), for those of other files
local M = {}

--- The names of all loaded buffers that have one (what `find_buffer` can
--- find with `loaded_only`), and the files among them (see `file_of`).
function M.loaded_buffers()
  local names, files = {}, {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(buf) then
      local name = api.nvim_buf_get_name(buf)
      if name ~= "" then
        names[#names + 1] = name
      end
      files[#files + 1] = H.file_of(buf)
    end
  end
  return names, files
end

--- A path relative to the current directory or home, for messages.
function M.short_name(path)
  return fn.fnamemodify(path, ":~:.")
end

return M
