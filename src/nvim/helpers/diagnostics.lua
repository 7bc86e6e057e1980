-- For src/nvim/diagnostics.rs: vim.diagnostic's entries with their lines.

local api = vim.api
local M = {}

--- Every vim.diagnostic entry of buffers named in `prefixes` (a file or a
--- directory; nil: all), with the lines their positions index.
function M.diagnostics(prefixes)
  local function under(name)
    if not prefixes then
      return true
    end
    for _, p in ipairs(prefixes) do
      if name == p or (name:sub(1, #p) == p and (p:sub(-1) == "/" or name:byte(#p + 1) == 47)) then
        return true
      end
    end
    return false
  end
  local out, names = {}, {}
  for _, d in ipairs(vim.diagnostic.get(nil)) do
    local buf = d.bufnr
    if names[buf] == nil then
      names[buf] = api.nvim_buf_is_valid(buf) and api.nvim_buf_get_name(buf) or ""
    end
    local name = names[buf]
    if name ~= "" and under(name) then
      local loaded = api.nvim_buf_is_loaded(buf)
      local lnum, end_lnum = d.lnum or 0, d.end_lnum or d.lnum or 0
      local line, end_line, offset, end_offset = "", "", 0, 0
      if loaded then
        local count = api.nvim_buf_line_count(buf)
        if lnum < count then
          line = api.nvim_buf_get_lines(buf, lnum, lnum + 1, false)[1] or ""
          offset = api.nvim_buf_get_offset(buf, lnum)
        end
        if end_lnum == lnum then
          end_line, end_offset = line, offset
        elseif end_lnum < count then
          end_line = api.nvim_buf_get_lines(buf, end_lnum, end_lnum + 1, false)[1] or ""
          end_offset = api.nvim_buf_get_offset(buf, end_lnum)
        end
      end
      -- The fields of core::editor::RawDiagnostic (src/nvim/diagnostics.rs).
      out[#out + 1] = {
        path = name,
        lnum = lnum,
        col = d.col or 0,
        end_lnum = end_lnum,
        end_col = d.end_col or d.col or 0,
        severity = d.severity or 1,
        message = d.message or "",
        source = d.source,
        line = line,
        end_line = end_line,
        line_offset = offset,
        end_line_offset = end_offset,
      }
    end
  end
  return out
end

return M
