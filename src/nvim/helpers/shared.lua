-- Helpers more than one Rust module calls (src/nvim/mod.rs, files.rs,
-- annotations.rs) and the other helper files use.

local api = vim.api
local M = {}

--- The file a buffer shows, or nil (lua/amp/buffer.lua: the one rule).
M.file_of = require("amp.buffer").file_of

--- The buffer (loaded or not, or only loaded) named one of `names`.
function M.find_buffer(names, loaded_only)
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if not loaded_only or api.nvim_buf_is_loaded(buf) then
      local name = api.nvim_buf_get_name(buf)
      for _, want in ipairs(names) do
        if name ~= "" and name == want then
          return buf
        end
      end
    end
  end
  return nil
end

function M.get_var(buf, name)
  local ok, value = pcall(api.nvim_buf_get_var, buf, name)
  return ok and value or nil
end

function M.del_var(buf, name)
  pcall(api.nvim_buf_del_var, buf, name)
end

return M
