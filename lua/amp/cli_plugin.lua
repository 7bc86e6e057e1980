--- The Amp CLI plugin this repository ships (amp-plugin/amp-nvim-rs-diagnostics.ts):
--- it gives the agent Neovim's diagnostics, which the CLI asks only
--- JetBrains editors for. `:Amp cli-plugin install` copies it where the CLI
--- loads plugins from; see `:help amp-cli-plugin`.
local M = {}
local H = {}

M.name = "amp-nvim-rs-diagnostics.ts"

--- The plugin file in this repository.
---@return string
function M.source()
  return vim.fs.joinpath(require("amp.native").root(), "amp-plugin", M.name)
end

--- Where the Amp CLI loads system plugins from:
--- `$XDG_CONFIG_HOME/amp/plugins` (else `~/.config/amp/plugins`).
---@return string
function M.dir()
  local config = vim.env.XDG_CONFIG_HOME
  if not config or config == "" then
    config = vim.fs.joinpath(vim.env.HOME or vim.uv.os_homedir(), ".config")
  end
  return vim.fs.joinpath(config, "amp", "plugins")
end

---@return string
function M.target()
  return vim.fs.joinpath(M.dir(), M.name)
end

--- "missing", "current" or "outdated" (the installed copy differs from
--- this version's file).
---@return "missing"|"current"|"outdated"
---@return string|nil err
function M.state()
  local installed = H.read(M.target())
  if not installed then
    return "missing", nil
  end
  local shipped, err = H.read(M.source())
  if not shipped then
    return "outdated", err
  end
  return installed == shipped and "current" or "outdated", nil
end

--- Copy the plugin into the CLI's plugin directory (written to a temporary
--- file, then renamed into place).
---@return boolean ok
---@return string message
function M.install()
  local text, err = H.read(M.source())
  if not text then
    return false, ("amp: cannot read the CLI plugin %s: %s"):format(M.source(), err)
  end
  local dir = M.dir()
  pcall(vim.fn.mkdir, dir, "p")
  if not vim.uv.fs_stat(dir) then
    return false, ("amp: cannot create %s"):format(dir)
  end
  local target = M.target()
  local tmp = ("%s.%d.tmp"):format(target, vim.uv.os_getpid())
  local fd, oerr = io.open(tmp, "wb")
  if not fd then
    return false, ("amp: cannot write %s: %s"):format(tmp, oerr)
  end
  fd:write(text)
  fd:close()
  local ok, rerr = vim.uv.fs_rename(tmp, target)
  if not ok then
    os.remove(tmp)
    return false, ("amp: cannot write %s: %s"):format(target, rerr)
  end
  return true, ("amp: installed the Amp CLI plugin %s; restart amp to load it"):format(vim.fn.fnamemodify(target, ":~"))
end

--- Remove the installed copy.
---@return boolean ok
---@return string message
function M.remove()
  local target = M.target()
  if not vim.uv.fs_stat(target) then
    return true, ("amp: the Amp CLI plugin is not installed (%s)"):format(vim.fn.fnamemodify(target, ":~"))
  end
  local ok, err = os.remove(target)
  if not ok then
    return false, ("amp: cannot remove %s: %s"):format(target, err)
  end
  return true, ("amp: removed %s"):format(vim.fn.fnamemodify(target, ":~"))
end

--- One line saying where the plugin is and whether it is current.
---@return string
function M.describe()
  local state = M.state()
  local where = vim.fn.fnamemodify(M.target(), ":~")
  if state == "current" then
    return ("amp: the Amp CLI plugin is installed (%s)"):format(where)
  elseif state == "outdated" then
    return ("amp: the Amp CLI plugin at %s is out of date: run :Amp cli-plugin install"):format(where)
  end
  return ("amp: the Amp CLI plugin is not installed (:Amp cli-plugin install puts it in %s)"):format(
    vim.fn.fnamemodify(M.dir(), ":~")
  )
end

function H.read(path)
  local fd, err = io.open(path, "rb")
  if not fd then
    return nil, err
  end
  local text = fd:read("*a")
  fd:close()
  return text, nil
end

return M
