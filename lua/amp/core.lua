--- The plugin's state and work behind `require("amp")` (lua/amp/init.lua,
--- which stays small so that `setup()` during start-up loads little): the
--- server's start and stop, the autocommands, errors. What `setup()` with
--- options does besides (the review key, OpenCtx, the log's settings, a
--- restart for changed options) is in lua/amp/configure.lua: `setup({})`
--- at start-up loads neither it nor the configuration's modules.
local M = {}
local H = {}

-- Loaded on first use: setup() during start-up does not need it.
local native = setmetatable({}, {
  __index = function(self, key)
    local mod = require("amp.native")
    setmetatable(self, { __index = mod })
    return mod[key]
  end,
})

H.config = nil ---@type amp.Config? the resolved configuration (nil: the defaults, resolved when asked)
H.user_opts = nil ---@type table? the options of the last setup()
H.setup_done = false -- setup() ran (after_build repeats it)
H.configured = false -- a setup() with options ran (amp.configure then has state a later one updates)
H.server_opts = nil ---@type table|false|nil the running server's native options (false: the library's defaults)
H.last_error = nil ---@type string? last error seen on the Lua side
H.reported = {} ---@type table<string, true> errors already shown for automatic actions
H.augroup = nil ---@type integer?
H.last_port = nil ---@type integer? port of this session's previous server

--- Whether `opts` are no options at all (`setup()`, `setup({})`): the
--- configuration is then the defaults, and the server's options the
--- library's own.
---@param opts? table
---@return boolean
function M.no_options(opts)
  return opts == nil or (type(opts) == "table" and next(opts) == nil)
end

--- `setup()`'s work after start-up (see lua/amp/init.lua): `config` is
--- `opts` resolved by amp.config, or nil for no options (the defaults,
--- resolved only when something asks for them). Loads the library, then
--- starts, restarts or configures as the options say.
---@param opts? table the user's options (kept for after_build)
---@param config? amp.Config
function M.setup(opts, config)
  H.user_opts = opts
  H.config = config
  H.setup_done = true
  -- The log is the plugin's own file: never watched, reviewed or reported
  -- (amp.buffer reads the list when it loads; not at start-up).
  local buffer = package.loaded["amp.buffer"]
  if buffer then
    buffer.set_own_files(M.own_files())
  end
  H.create_autocmds()
  local _, load_err = native.load()
  if load_err then
    if H.library_on_its_way() then
      -- :Amp install / :Amp build runs (e.g. as a plugin manager's build
      -- step, which would take an error line as its failure): it loads the
      -- library and starts what setup() asked for when it is done.
      H.last_error = load_err
      return
    end
    -- Without the library nothing else can work: one line saying what to
    -- run (:Amp build starts what setup() asked for once it is built).
    M.fail(load_err, true)
    return
  end
  if not config and not H.configured then
    -- No options, and none before: the schema's defaults start the server
    -- (a running one has them already), map no review key and name no
    -- OpenCtx provider, so there is nothing else to do
    -- (tests/integration/test_config.py checks the schema says so).
    if not M.is_running() then
      H.start({ automatic = true })
    end
    return
  end
  H.configured = true
  require("amp.configure").apply(H.get_config())
end

--- Whether :Amp install or :Amp build is running (both load the library
--- and call after_build() when they are done).
function H.library_on_its_way()
  local install, build = package.loaded["amp.install"], package.loaded["amp.build"]
  return (install ~= nil and install.running()) or (build ~= nil and build.running())
end

--- After `:Amp build` built the library: do what `setup()` could not do
--- without it (OpenCtx, and the server if `auto_start`).
function M.after_build()
  if H.setup_done and not M.is_running() then
    local configure = package.loaded["amp.configure"]
    if configure then
      configure.forget_openctx()
    end
    require("amp").setup(H.user_opts)
  end
end

--- Start the server (uses the defaults if `setup()` was never called).
--- The native side fires `User AmpServerStarted` (`data = { port, lockfile }`)
--- once the lockfile is written.
---@param automatic? boolean started by setup(), not asked for (its errors are shown once)
---@return boolean ok
---@return integer|string port_or_err the port, or the error message
function M.start(automatic)
  return H.start({ automatic = automatic == true })
end

--- Stop the server and remove its lockfile. Idempotent.
--- The native side fires `User AmpServerStopped` (`data = { port }`) if it was running.
---@return boolean ok
---@return string|nil err
function M.stop()
  if not native.loaded() then
    return true, nil -- the library never loaded, so no server can be running
  end
  H.detach_features()
  H.clear_agent_env()
  local _, err = native.call("stop")
  H.server_opts = nil
  if err then
    M.fail(err, false)
    return false, err
  end
  return true, nil
end

--- Stop, then start again (picking up the current options and cwd).
---@return boolean ok
---@return integer|string port_or_err
function M.restart()
  local ok, err = M.stop()
  if not ok then
    return false, err
  end
  return M.start()
end

--- The native status table, or `{ running = false, last_error = ... }` when the
--- library cannot be loaded.
---@return { running: boolean, port?: integer, lockfile?: string, workspace_folders?: string[], clients?: integer, last_error?: string, version?: string }
function M.status()
  local status, err = native.call("status")
  if err or type(status) ~= "table" then
    return { running = false, last_error = err or H.last_error }
  end
  status.running = status.running == true
  if status.last_error == nil or status.last_error == vim.NIL then
    status.last_error = H.last_error
  end
  return status
end

---@return boolean
function M.is_running()
  if not native.loaded() then
    return false
  end
  -- (Not status().running: the whole status table is not needed here.)
  return native.call("running") == true
end

--- The merged configuration (defaults when `setup()` was not called).
---@return amp.Config
function M.get_config()
  return H.get_config()
end

--- The plugin's own files (its log, the log's rotated copy, the build
--- log) as the configuration names them (lua/amp/buffer.lua).
---@return string[]
function M.own_files()
  local log_file = H.get_config().log_file
  return { log_file, log_file .. ".1", H.dirname(log_file) .. "/amp-build.log" }
end

--- The running server's native options, as amp.configure made them, or
--- false when it runs with the library's defaults (nil: none running).
---@return table|false|nil
function M.server_options()
  return H.server_opts
end

-- Helpers -------------------------------------------------------------------

function H.get_config()
  if not H.config then
    H.config = require("amp.config.defaults").resolved()
  end
  return H.config
end

function H.start(how)
  H.create_autocmds()
  if M.is_running() then
    local status = M.status()
    return true, status.port
  end

  local _, load_err = native.load()
  if load_err then
    M.fail(load_err, how.automatic)
    return false, load_err
  end
  -- What the server depends on (a change takes a restart): with no
  -- options the library's own defaults (status().options shows what it
  -- enforces; tests/integration/test_config.py checks they are the
  -- schema's, the log file included), so `start` then gets the session's
  -- fields alone and no configuration module is loaded.
  local server_part = false
  if not M.no_options(H.user_opts) then
    server_part = require("amp.configure").server_part(H.get_config())
  end
  local result, err = native.call("start", H.session_opts(server_part))
  if err or type(result) ~= "table" then
    err = "amp: see :Amp log: the server did not start: " .. (err or "start() returned no port")
    M.fail(err, how.automatic)
    return false, err
  end
  H.last_port = tonumber(result.port)
  H.server_opts = server_part
  H.last_error = nil
  H.agent_env(result.env)
  H.attach_features(how.automatic)
  return true, result.port
end

--- The agents in `status.agents` in the order they are listed to the user:
--- Amp first, then by name.
---@param status table
---@return string[]
function M.agent_ids(status)
  local ids = vim.tbl_keys(type(status.agents) == "table" and status.agents or {})
  table.sort(ids, function(a, b)
    if (a == "amp") ~= (b == "amp") then
      return a == "amp"
    end
    return a < b
  end)
  return ids
end

--- Terminals Neovim starts (`:terminal`, jobs) attach to this Neovim: the
--- agent variables go into Neovim's own environment while the server runs
--- (lua/amp/agent_env.lua). `served`: the served agents' own variables as
--- `start` returned them, when known: none (Amp alone, the default) and
--- none set before is nothing to do, and that module is not loaded.
---@param served? table<string, string>
function H.agent_env(served)
  local loaded = package.loaded["amp.agent_env"]
  if served and next(served) == nil and not (loaded and loaded.applied()) then
    return
  end
  require("amp.agent_env").apply(M.status())
end

--- Takes the agent variables out of Neovim's environment again.
function H.clear_agent_env()
  local loaded = package.loaded["amp.agent_env"]
  if loaded then
    loaded.clear()
  end
end

--- The options given to native `start` (see docs/architecture.md): a
--- copy of `server_part` (the configuration's native options; none for
--- the library's defaults) and what the session adds. The editor's name
--- ("Neovim (nvim 0.11.4)"), the plugin's version and the default log
--- file are the library's own (src/nvim/ide_name.rs, src/nvim/log_file.rs);
--- the library makes the log's directory (on this thread: see src/core/log.rs).
---@param server_part table|false
function H.session_opts(server_part)
  local opts = {}
  for key, value in pairs(server_part or {}) do
    opts[key] = value
  end
  opts.workspace_folders = { vim.fn.getcwd() }
  opts.preferred_port = H.preferred_port()
  opts.plugin_directory = native.root()
  opts.read_options = H.read_options()
  opts.nvim_program = vim.v.progpath
  return opts
end

--- The port of this session's previous server, tried first so a restart
--- (or :Amp stop, :Amp start) keeps it: the Amp CLI reconnects only to the
--- port it knew. Only when the options allow that port (any port with
--- `server.port = 0`, or one within `server.port_range`); 0 otherwise.
function H.preferred_port()
  local port = H.last_port
  if not port then
    return 0
  end
  local server = H.get_config().server
  local range = server.port_range
  if range then
    return (port >= range[1] and port <= range[2]) and port or 0
  end
  return server.port == 0 and port or 0
end

--- The directory of an absolute path ("/a/b" -> "/a", "/a" -> "/"): a
--- string pattern, as vim.fs is not loaded at start-up for this. (The
--- log file's path is absolute and normalized: see amp.config.defaults.)
function H.dirname(path)
  return path:match("^(.*[^/])/+[^/]*$") or "/"
end

--- How Neovim reads files now: the server reads files no buffer has loaded
--- the same way (see src/filetext.rs).
function H.read_options()
  return {
    fileformats = vim.o.fileformats,
    fileencodings = vim.o.fileencodings,
  }
end

-- Modules that feed editor events to the running server: each has
-- `attach(native_module)` and `detach()`, and makes its autocmds in
-- `group`, for `events` (tests/integration/test_startup.py checks the
-- lists against what they make). Each is loaded and attached on the first
-- of its events after the server starts, not at start-up: until then
-- nothing it reports or watches has changed since `start` read the
-- editor's state. That first event is then run again for its autocmds.
H.features = {
  {
    module = "amp.context",
    group = "AmpEditorContext",
    events = {
      "ModeChanged",
      "BufEnter",
      "WinEnter",
      "CursorMoved",
      "CursorMovedI",
      "TextChanged",
      "TextChangedI",
      "BufWinEnter",
      "BufWinLeave",
      "WinNew",
      "TabEnter",
      "BufFilePost",
      "BufNew",
      "BufAdd",
      "BufReadPost",
      "FileType",
      "TermOpen",
      "OptionSet",
      "BufWipeout",
      "WinClosed",
    },
  },
  {
    module = "amp.files",
    group = "AmpFileWatch",
    events = { "BufReadPost", "BufNewFile", "BufFilePost", "BufUnload", "BufDelete", "BufWipeout", "BufWritePost" },
  },
}

function H.attach_features(automatic)
  local mod = native.load()
  for _, feature in ipairs(H.features) do
    if package.loaded[feature.module] then
      H.attach_feature(feature, mod, automatic)
    else
      vim.api.nvim_create_autocmd(feature.events, {
        group = vim.api.nvim_create_augroup(feature.group, { clear = true }),
        desc = ("amp: load %s on its first event"):format(feature.module),
        callback = function(ev)
          -- Its attach() replaces this group's autocmds with its own.
          if H.attach_feature(feature, mod, automatic) then
            H.replay(feature.group, ev)
          end
        end,
      })
    end
  end
end

--- Attaches one feature; false (said once) when it failed.
function H.attach_feature(feature, mod, automatic)
  local ok, err = pcall(function()
    require(feature.module).attach(mod)
  end)
  if not ok then
    pcall(vim.api.nvim_del_augroup_by_name, feature.group)
    M.fail(("amp: %s could not start: %s"):format(feature.module, err), automatic)
  end
  return ok
end

--- Runs `ev` again for the autocmds of `group` only: for the buffer it
--- fired for (buffer-local ones too), or for OptionSet its option.
function H.replay(group, ev)
  local opts = { group = group, modeline = false, data = ev.data }
  if ev.event == "OptionSet" then
    opts.pattern = ev.match
  else
    opts.buffer = ev.buf
  end
  pcall(vim.api.nvim_exec_autocmds, ev.event, opts)
end

function H.detach_features()
  for _, feature in ipairs(H.features) do
    local loaded = package.loaded[feature.module]
    if loaded and type(loaded.detach) == "function" then
      pcall(loaded.detach)
    end
    pcall(vim.api.nvim_del_augroup_by_name, feature.group)
  end
end

function H.create_autocmds()
  if H.augroup then
    return
  end
  H.augroup = vim.api.nvim_create_augroup("AmpServer", { clear = true })
  -- Connection notices and the statusline's cache (lua/amp/connection.lua,
  -- loaded on the first of them), and the tap gateway's one-line news
  -- (lua/amp/tap.lua). The start alone is no news: amp.connection, once
  -- loaded (by the statusline or a connection), reads that the server
  -- runs, and hears of later starts itself.
  vim.api.nvim_create_autocmd("User", {
    group = H.augroup,
    pattern = { "AmpServerStopped", "AmpClientConnected", "AmpClientDisconnected", "AmpTap" },
    desc = "amp: connection notices, statusline and tap gateway notices",
    callback = function(ev)
      if ev.match == "AmpTap" then
        require("amp.tap").on_event(ev.data)
      else
        require("amp.connection").on_event(ev.match, ev.data, H.get_config())
      end
    end,
  })
  vim.api.nvim_create_autocmd("VimLeavePre", {
    group = H.augroup,
    desc = "amp: stop the server and remove its lockfile",
    callback = function()
      M.stop()
    end,
  })
  vim.api.nvim_create_autocmd("DirChanged", {
    group = H.augroup,
    desc = "amp: update the lockfile's workspace folders",
    callback = function()
      if not M.is_running() then
        return
      end
      local _, err = native.call("set_workspace_folders", { vim.fn.getcwd() })
      if err then
        M.fail("amp: could not update the workspace folders: " .. err, true)
      end
      -- GEMINI_CLI_IDE_WORKSPACE_PATH follows the workspace.
      H.agent_env()
    end,
  })
  vim.api.nvim_create_autocmd("OptionSet", {
    group = H.augroup,
    pattern = { "fileformats", "fileencodings" },
    desc = "amp: read files no buffer has loaded as Neovim would",
    callback = function()
      if native.loaded() then
        native.call("set_read_options", H.read_options())
      end
    end,
  })
end

--- Show an error. Errors of automatic actions (auto_start, DirChanged) are shown
--- once per session; errors of explicit calls every time.
function M.fail(msg, automatic)
  H.last_error = msg
  if native.loaded() then
    native.call("log", "error", msg)
  end
  if automatic then
    if H.reported[msg] then
      return
    end
    H.reported[msg] = true
  end
  require("amp.notify").notify(msg, vim.log.levels.ERROR)
end

return M
