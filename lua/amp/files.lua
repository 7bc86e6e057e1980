--- Files changed on disk by the agent: keeps the native watcher aimed at the
--- loaded buffers, and offers `:Amp diff`, `:Amp take` and `:Amp keep` when a
--- buffer with unsaved changes meets a newer file on disk.
local M = {}

local AUGROUP = "AmpFileWatch"
local CONFLICT_VAR = "amp_disk_conflict"

---@param lib table the loaded native module
function M.attach(lib)
  local buffers_changed = lib.buffers_changed
  local group = vim.api.nvim_create_augroup(AUGROUP, { clear = true })
  vim.api.nvim_create_autocmd({ "BufReadPost", "BufNewFile", "BufFilePost" }, {
    group = group,
    desc = "amp: watch the files of loaded buffers",
    callback = function()
      buffers_changed()
    end,
  })
  -- These fire before the buffer is gone: look once it is.
  vim.api.nvim_create_autocmd({ "BufUnload", "BufDelete", "BufWipeout" }, {
    group = group,
    desc = "amp: stop watching files of unloaded buffers",
    callback = function()
      vim.schedule(function()
        buffers_changed()
      end)
    end,
  })
  vim.api.nvim_create_autocmd("BufWritePost", {
    group = group,
    desc = "amp: a write by Neovim is not an outside change",
    callback = function(ev)
      local name = vim.api.nvim_buf_get_name(ev.buf)
      if name ~= "" then
        lib.buffer_written(name)
      end
      pcall(vim.api.nvim_buf_del_var, ev.buf, CONFLICT_VAR)
      buffers_changed()
    end,
  })
end

function M.detach()
  pcall(vim.api.nvim_del_augroup_by_name, AUGROUP)
end

local function current_file()
  local buf = vim.api.nvim_get_current_buf()
  local name = require("amp.buffer").file_of(buf)
  if not name then
    return nil, "amp: go to the buffer of a file first: the current buffer is not one"
  end
  return buf, name
end

--- The current buffer and its file when its file changed on disk while it
--- had unsaved changes (b:amp_disk_conflict, set by the watcher); else
--- nil and the one line that says there is nothing to settle.
local function conflicted_file()
  local buf, name = current_file()
  if not buf then
    return nil, name
  end
  local ok, conflict = pcall(vim.api.nvim_buf_get_var, buf, CONFLICT_VAR)
  if not (ok and conflict == true) then
    return nil,
      ("amp: nothing to settle: %s did not change on disk while it had unsaved changes"):format(
        vim.fn.fnamemodify(name, ":~:.")
      ),
      vim.log.levels.INFO
  end
  return buf, name
end

local function close_disk_views(name)
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    local b = vim.api.nvim_win_get_buf(win)
    if vim.api.nvim_buf_get_name(b) == "amp://disk/" .. name then
      pcall(vim.api.nvim_win_close, win, true)
    end
  end
  pcall(vim.cmd, "diffoff!")
end

--- `:Amp diff`: the buffer against the file on disk, in a diff view. Take
--- hunks with the usual `do`/`dp` (`:help copy-diffs`).
function M.diff()
  local buf, name, level = conflicted_file()
  if not buf then
    return false, name, level
  end
  -- One disk view at a time (a second one could not take its name).
  close_disk_views(name)
  -- Without "b", readfile() drops the final newline's empty item and the
  -- '\r' of CRLF lines is stripped below, as a buffer shows them.
  local disk = vim.fn.readfile(name)
  local ft = vim.bo[buf].filetype
  vim.cmd("diffthis")
  vim.cmd("vertical leftabove new")
  local scratch = vim.api.nvim_get_current_buf()
  vim.bo[scratch].buftype = "nofile"
  vim.bo[scratch].bufhidden = "wipe"
  vim.bo[scratch].swapfile = false
  vim.api.nvim_buf_set_lines(
    scratch,
    0,
    -1,
    false,
    vim.tbl_map(function(l)
      return (l:gsub("\r$", ""))
    end, disk)
  )
  vim.bo[scratch].modifiable = false
  vim.bo[scratch].filetype = ft
  pcall(vim.api.nvim_buf_set_name, scratch, "amp://disk/" .. name)
  vim.cmd("diffthis")
  vim.cmd("wincmd p")
  return true
end

--- `:Amp take`: replace the buffer with the disk's text (one undo step).
function M.take(lib)
  local buf, name, level = conflicted_file()
  if not buf then
    return false, name, level
  end
  close_disk_views(name)
  local ok, err = pcall(lib.take_disk_version, name)
  if not ok then
    return false, tostring(err)
  end
  return true
end

--- `:Amp keep`: keep the buffer's text and write it over the disk's.
function M.keep()
  local buf, name, level = conflicted_file()
  if not buf then
    return false, name, level
  end
  close_disk_views(name)
  vim.cmd("write!")
  pcall(vim.api.nvim_buf_del_var, buf, CONFLICT_VAR)
  return true
end

return M
