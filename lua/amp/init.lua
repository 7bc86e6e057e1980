--- amp.nvim-rs: the Amp editor server for Neovim (a Rust library in a Lua shell).
---
--- Public API (see `:help amp-api`):
---   require("amp").setup(opts)   validate + merge options, start if `auto_start`
---   require("amp").start()       -> true, port | false, err
---   require("amp").stop()        -> true | false, err
---   require("amp").restart()     -> true, port | false, err
---   require("amp").status()      -> { running, port, lockfile, workspace_folders, clients, last_error, version }
---   require("amp").is_running()  -> boolean
---   require("amp").get_config()  -> the merged configuration
---   require("amp").statusline()  -> "" | "amp" | "amp: 1 agent" (cached, no native call)
---   require("amp").mcp_server_config() -> { command, args }: the MCP server's stdio entry
---
--- This file is what `setup()` in a config loads while Neovim starts, so it
--- is kept small: the work is in lua/amp/core.lua, loaded after start-up
--- or by the first call that needs it.
local M = {}
local P = {}

-- On a Neovim older than the plugin supports, every function says so in one
-- line (once) and does nothing: setup() in a shared config must not fail.
-- (has() first: amp.version is loaded only to say why the plugin is off.)
if vim.fn.has("nvim-0.10") == 0 and not require("amp.version").check() then
  local function off()
    return false, "amp: needs Neovim " .. require("amp.version").min_text .. " or newer"
  end
  return setmetatable({
    setup = function() end,
    status = function()
      return { running = false, last_error = select(2, off()) }
    end,
    is_running = function()
      return false
    end,
    get_config = function()
      return {}
    end,
    statusline = function()
      return ""
    end,
  }, {
    __index = function()
      return off
    end,
  })
end

P.pending = nil ---@type { opts: table?, resolved: boolean?, config: amp.Config? }? setup() waiting for VimEnter
P.waiting = false -- the VimEnter autocommand exists

local function core()
  return require("amp.core")
end

--- Configure the plugin. Safe to call again: autocmds are not duplicated, and a
--- running server is restarted only if its options changed.
--- Raises an error naming the option when `opts` is invalid.
---
--- Called while Neovim starts (from init.lua), setup() only keeps `opts`:
--- checking them, loading the library, OpenCtx and the server wait until
--- just after VimEnter, so they add nothing to start-up and no thread of
--- the plugin creates directories while Neovim's start-up does (E739). An
--- invalid option is then shown as a one-line error. Any :Amp command or
--- API call before then does that work at once.
---@param opts? table see `:help amp-config`
function M.setup(opts)
  if vim.v.vim_did_enter ~= 1 and (opts == nil or type(opts) == "table") then
    P.pending = { opts = opts }
    if not P.waiting then
      P.waiting = true
      -- The library is mapped on a thread meanwhile.
      P.preload(opts)
      vim.api.nvim_create_autocmd("VimEnter", {
        once = true,
        desc = "amp: start after Neovim's start-up",
        callback = function()
          vim.schedule(P.after_startup)
        end,
      })
    end
    return
  end
  local pending = { opts = opts }
  local ok, err = P.resolve(pending)
  if not ok then
    error(err, 2)
  end
  P.pending = pending
  M.finish_setup()
end

--- Runs on a thread of its own (its own Lua state: no upvalues). First
--- compiles the start path's `modules` (one a line) under `root` and
--- sends their byte code to `compiled` (when given); then maps the first
--- library of `candidates` (one a line) under `root` that exists with
--- dlopen(`flags`), through LuaJIT's FFI, and makes its tokio runtime.
local function map_library(root, candidates, flags, modules, compiled)
  if compiled then
    -- One message: an async handle's sends may be merged into one.
    local parts = {}
    for name in modules:gmatch("[^\n]+") do
      local chunk = loadfile(root .. "/lua/" .. name:gsub("%.", "/") .. ".lua")
      if chunk then
        local code = string.dump(chunk)
        parts[#parts + 1] = name .. "\n" .. #code .. "\n" .. code
      end
    end
    compiled:send(table.concat(parts))
  end
  local ok, ffi = pcall(require, "ffi")
  if not ok then
    return
  end
  pcall(ffi.cdef, "void *dlopen(const char *filename, int flags); void *dlsym(void *handle, const char *symbol);")
  for rel in candidates:gmatch("[^\n]+") do
    local f = io.open(root .. "/" .. rel, "rb")
    if f then
      f:close()
      local lib = ffi.C.dlopen(root .. "/" .. rel, flags)
      -- Its tokio runtime made here too (src/nvim/runtime.rs), when the
      -- library has the function.
      local prewarm = lib ~= nil and ffi.C.dlsym(lib, "amp_core_prewarm") or nil
      if prewarm ~= nil then
        ffi.cast("void (*)(void)", prewarm)()
      end
      return
    end
  end
end

--- Maps the native library into the process on a thread while Neovim
--- starts, so that its load after VimEnter (lua/amp/native.lua) finds it
--- mapped and relocated: dlopen of the library is ~0.5-2 ms of the main
--- thread otherwise. RTLD_NOW | RTLD_NODELETE: it is never unloaded anyway,
--- and the thread's Lua state must not unmap it when it ends. Best effort:
--- without LuaJIT's FFI, or on another system than Linux and macOS, the
--- load does it all. (Here, not in amp.native: that module is not loaded
--- before VimEnter.)
---
--- The same thread first compiles the modules `setup(opts)` loads after
--- VimEnter: the main thread then loads their byte code (P.take_compiled)
--- instead of finding and compiling their files (~0.3 ms; with
--- `vim.loader` ~0.1 ms, its lookup and cache read).
function P.preload(opts)
  local flags = ({ Linux = 0x1002, OSX = 0x82 })[jit and jit.os or ""]
  if not flags then
    return
  end
  -- <root>/lua/amp/init.lua -> <root>, as amp.native finds it (string
  -- patterns: vim.fs may not be loaded yet).
  local source = debug.getinfo(1, "S").source:gsub("^@", "")
  local root = (vim.uv.fs_realpath(source) or source):match("^(.*)/lua/amp/init%.lua$")
  if not root then
    return
  end
  -- The same files, in the same order, as amp.native's M.candidates.
  local candidates = "target/release/libamp_core.so\ntarget/release/libamp_core.dylib\n"
    .. "target/debug/libamp_core.so\nlua/amp_core.so"
  -- (Options add the configuration's modules. The test is
  -- core.no_options's, which is not loaded yet.)
  local modules = "amp.native\namp.core"
  if type(opts) == "table" and next(opts) ~= nil then
    modules = modules .. "\namp.config\namp.config.schema\namp.config.defaults\namp.configure"
  end
  local compiled
  compiled = vim.uv.new_async(function(blob)
    compiled:close()
    P.take_compiled(blob)
  end)
  if not pcall(vim.uv.new_thread, map_library, root, candidates, flags, modules, compiled) then
    compiled:close()
  end
end

--- The byte code of the start path's modules compiled by map_library:
--- each becomes the loader `require` finds first (package.preload) for a
--- module not loaded yet, used once (a module required again after
--- package.loaded was cleared is read from its file).
---@param blob string `name \n size \n code`, repeated
function P.take_compiled(blob)
  local at = 1
  while at <= #blob do
    local name, size, code_at = blob:match("^([^\n]+)\n(%d+)\n()", at)
    if not name then
      return
    end
    local code = blob:sub(code_at, code_at + size - 1)
    at = code_at + size
    if package.loaded[name] == nil and package.preload[name] == nil then
      package.preload[name] = function(...)
        package.preload[name] = nil
        return assert(load(code))(...)
      end
    end
  end
end

--- setup()'s deferred work after VimEnter, in slices that each yield to
--- the event loop (a key typed meanwhile is handled between them): the
--- options, then the library (its loader: luaopen), then the server. Any
--- :Amp command or API call in between does the rest at once.
function P.after_startup()
  local pending = P.pending
  if not pending or not P.resolve_now(pending) then
    return
  end
  vim.schedule(function()
    if P.pending ~= pending then
      return -- done meanwhile, or another setup()
    end
    -- (A failure is reported by core.setup, in the next slice.)
    require("amp.native").load()
    vim.schedule(M.finish_setup)
  end)
end

--- Resolves `pending.opts` once: `pending.config` is then the merged and
--- checked options, or nil for no options (the defaults: nothing to
--- resolve, see lua/amp/core.lua). A warning (unknown options) is shown.
---@return boolean ok
---@return string? err
function P.resolve(pending)
  if not pending.resolved and not core().no_options(pending.opts) then
    local config, err, warning = require("amp.config").resolve(pending.opts)
    if warning then
      require("amp.notify").notify(warning, vim.log.levels.WARN)
    end
    if not config then
      return false, err
    end
    pending.config = config
  end
  pending.resolved = true
  return true
end

--- P.resolve for a setup() that ran during start-up: too late to raise,
--- so an error is said in one line and that setup() dropped.
function P.resolve_now(pending)
  local ok, err = P.resolve(pending)
  if not ok then
    if P.pending == pending then
      P.pending = nil
    end
    require("amp.notify").notify(err, vim.log.levels.ERROR)
  end
  return ok
end

--- The part of `setup()` that waits for the end of start-up; runs once per
--- `setup()`, at the latest right after VimEnter, earlier when an :Amp
--- command or an API function needs it.
function M.finish_setup()
  local pending = P.pending
  if pending and P.resolve_now(pending) then
    P.pending = nil
    core().setup(pending.opts, pending.config)
  end
end

--- After `:Amp build` built the library: do what `setup()` could not do
--- without it (OpenCtx, and the server if `auto_start`).
function M.after_build()
  M.finish_setup()
  core().after_build()
end

--- Start the server (uses the defaults if `setup()` was never called).
--- The native side fires `User AmpServerStarted` (`data = { port, lockfile }`)
--- once the lockfile is written.
---@return boolean ok
---@return integer|string port_or_err the port, or the error message
function M.start()
  M.finish_setup()
  return core().start()
end

--- Stop the server and remove its lockfile. Idempotent.
--- The native side fires `User AmpServerStopped` (`data = { port }`) if it was running.
---@return boolean ok
---@return string|nil err
function M.stop()
  M.finish_setup()
  return core().stop()
end

--- Stop, then start again (picking up the current options and cwd); the
--- port is kept when it can be (see `:help :Amp-restart`).
---@return boolean ok
---@return integer|string port_or_err
function M.restart()
  M.finish_setup()
  return core().restart()
end

--- The native status table, or `{ running = false, last_error = ... }` when the
--- library cannot be loaded.
---@return { running: boolean, port?: integer, lockfile?: string, workspace_folders?: string[], clients?: integer, last_error?: string, version?: string }
function M.status()
  M.finish_setup()
  return core().status()
end

---@return boolean
function M.is_running()
  M.finish_setup()
  return core().is_running()
end

--- The merged configuration (defaults when `setup()` was not called).
---@return amp.Config
function M.get_config()
  M.finish_setup()
  return core().get_config()
end

--- The stdio entry point of Neovim's MCP server, for an agent's MCP
--- configuration: `{ command = "/usr/bin/nvim", args = { "--clean", "-l",
--- "<plugin>/lua/amp/mcp/stdio.lua" } }` (see `:help amp-mcp`).
---@return { command: string, args: string[] }
function M.mcp_server_config()
  return require("amp.mcp").server_config()
end

--- A short text for the statusline: "" when the server is not running,
--- "amp" while it waits for an agent, "amp: 1 agent" / "amp: 2 agents"
--- when agents are connected. Cached: kept up to date by the server's User
--- events, so calling it on every redraw costs a table lookup.
---   vim.o.statusline = "%f %= %{v:lua.require'amp'.statusline()} "
---@return string
function M.statusline()
  return require("amp.connection").statusline()
end

return M
