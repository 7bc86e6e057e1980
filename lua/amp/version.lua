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

local running_version = nil

--- `:version`'s first line ("NVIM v0.11.4"), Neovim's `longVersion`, read
--- through LuaJIT's FFI on the versions the tests run on (where it is a
--- `char *`), without formatting all of `:version`; nil elsewhere.
local function long_version()
  local ok, ffi = pcall(require, "ffi")
  local newest = ("nvim-%d.%d"):format(M.verified_max[1], M.verified_max[2] + 1)
  if not ok or vim.fn.has(newest) == 1 then
    return nil
  end
  pcall(ffi.cdef, "extern char *longVersion;")
  local found, text = pcall(function()
    return ffi.string(ffi.C.longVersion)
  end)
  return found and text or nil
end

--- The running Neovim's version, `{ major, minor, patch }` (cached). Not
--- `vim.version()`: it builds all of `api_info()`, about a millisecond of
--- the main thread each call.
---@return { major: integer, minor: integer, patch: integer }
function M.nvim()
  if not running_version then
    local text = long_version() or vim.fn.execute("version")
    local major, minor, patch = text:match("NVIM v(%d+)%.(%d+)%.(%d+)")
    running_version = { major = tonumber(major) or 0, minor = tonumber(minor) or 0, patch = tonumber(patch) or 0 }
  end
  return running_version
end

--- Whether the running version is newer than any the tests ran on.
---@return boolean
function M.untested()
  local v = M.nvim()
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
