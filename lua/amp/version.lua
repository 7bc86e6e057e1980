--- Which Neovim versions amp.nvim-rs runs on. Written for every Neovim from
--- 0.7 on: it uses nothing newer than `vim.fn.has`, `vim.notify` and
--- `vim.version`, so an old Neovim gets one line instead of a stack trace.
local M = {}

--- The oldest supported minor version, and the newest the tests run on.
M.min = { 0, 10 }
M.verified_max = { 0, 12 }

M.min_text = ("%d.%d"):format(M.min[1], M.min[2])
M.range_text = ("%d.%d to %d.%d"):format(M.min[1], M.min[2], M.verified_max[1], M.verified_max[2])

--- Whether the running Neovim is new enough.
---@return boolean
function M.supported()
  return vim.fn.has(("nvim-%d.%d"):format(M.min[1], M.min[2])) == 1
end

--- The running version as "0.11.4".
---@return string
function M.running()
  local ok, v = pcall(vim.version)
  if ok and type(v) == "table" and v.major then
    return ("%d.%d.%d"):format(v.major, v.minor, v.patch)
  end
  return vim.fn.matchstr(vim.fn.execute("version"), [[NVIM v\zs[^ \n]*]])
end

--- Whether the running version is newer than any the tests ran on.
---@return boolean
function M.untested()
  local v = vim.version()
  return v.major > M.verified_max[1] or (v.major == M.verified_max[1] and v.minor > M.verified_max[2])
end

--- Tells once per session (one line, a warning: no error trace, no
--- hit-enter prompt) that this Neovim is too old; returns false then.
---@return boolean supported
function M.check()
  if M.supported() then
    return true
  end
  if not vim.g.amp_too_old_notified then
    vim.g.amp_too_old_notified = true
    vim.notify(
      ("amp: needs Neovim %s or newer; this is %s, so the plugin is off"):format(M.min_text, M.running()),
      vim.log.levels.WARN
    )
  end
  return false
end

return M
