--- `:checkhealth amp`
local M = {}
local H = {}

-- Neovim before 0.10 names these report_start, report_ok, ... (and 0.7 has
-- them in the "health" module only).
local health = {}
local vim_health = vim.health or require("health")
for _, name in ipairs({ "start", "ok", "warn", "error", "info" }) do
  health[name] = vim_health[name] or vim_health["report_" .. name]
end

function M.check()
  health.start("amp.nvim-rs: Neovim")
  if not H.check_neovim() then
    return -- too old: nothing else would work
  end

  health.start("amp.nvim-rs: native library")
  local loaded = H.check_native()

  health.start("amp.nvim-rs: server")
  local status = nil
  if loaded then
    status = H.check_server()
  else
    health.error("cannot run without the native library (see above)")
  end

  health.start("amp.nvim-rs: lockfile")
  H.check_lockfile(status)

  health.start("amp.nvim-rs: agents")
  H.check_agents(status)

  health.start("amp.nvim-rs: optional tools")
  H.check_amp_cli()
  H.check_node()

  health.start("amp.nvim-rs: OpenCtx")
  H.check_openctx()
end

--- Every agent the same way: enabled, port, clients, discovery file.
function H.check_agents(status)
  local agents = status and status.running and status.agents
  if not agents then
    health.info("the server is not running")
    return
  end
  for _, id in ipairs(require("amp.core").agent_ids(status)) do
    local a = agents[id]
    if a.enabled then
      local file = a.discovery_file or a.lockfile
      local file_ok = file and vim.uv.fs_stat(file) ~= nil
      local n = tonumber(a.clients) or 0
      local line = ("%s: port %s, %d client%s, discovery file %s"):format(
        id,
        tostring(a.port),
        n,
        n == 1 and "" or "s",
        tostring(file)
      )
      if file_ok then
        health.ok(line)
      else
        health.warn(line .. " (missing)")
      end
    else
      health.info(("%s: off (agents.%s = false)"):format(id, id))
    end
  end
  if agents.mcp and agents.mcp.enabled then
    local entry = require("amp.mcp").server_config()
    local script = entry.args[3]
    if vim.fn.executable(entry.command) == 1 and vim.uv.fs_stat(script) then
      health.ok(("mcp: agents reach it with `%s %s` (:Amp mcp)"):format(entry.command, table.concat(entry.args, " ")))
    else
      health.error(("mcp: the stdio entry `%s %s` cannot run"):format(entry.command, script))
    end
  end
end

function H.check_neovim()
  local version = require("amp.version")
  local running = version.running()
  if not version.supported() then
    health.error(
      ("Neovim %s is too old: amp.nvim-rs needs Neovim %s or newer (supported: %s)"):format(
        running,
        version.min_text,
        version.range_text
      )
    )
    return false
  elseif version.untested() then
    health.warn(("Neovim %s is untested: amp.nvim-rs is verified on Neovim %s"):format(running, version.range_text), {
      "it should work; report what does not, with :checkhealth amp's output",
    })
  else
    health.ok(("Neovim %s (supported: %s)"):format(running, version.range_text))
  end
  return true
end

function H.check_native()
  local native = require("amp.native")
  local _, err = native.load()
  if err then
    health.error(err, {
      native.details() or "",
      ("or build it in a shell: cd %s && cargo build --release"):format(native.root()),
    })
    return false
  end
  health.ok("loaded " .. native.library_path())
  local version, verr = native.call("version")
  if verr then
    health.error("the library has no working version(): " .. verr, {
      ("rebuild it with :Amp build, or: cd %s && cargo build --release"):format(native.root()),
    })
    return false
  end
  health.ok("amp_core version " .. tostring(version))
  local c_api = native.call("bulk_c_api")
  if c_api == true then
    health.ok(
      "big buffer reads and edits use Neovim's C API (layouts verified on Neovim "
        .. require("amp.version").range_text
        .. ")"
    )
  elseif c_api == false then
    health.info(
      "big buffer reads and edits go through vim.api (slower): the C API path is used only on Neovim "
        .. require("amp.version").range_text
        .. ", unless AMP_NVIM_C_API=0"
    )
  end
  local missing = {}
  for _, name in ipairs({ "start", "stop", "status", "set_workspace_folders", "broadcast", "log" }) do
    if type(native.load()[name]) ~= "function" then
      table.insert(missing, name)
    end
  end
  if #missing > 0 then
    health.error("the library lacks: " .. table.concat(missing, ", "), {
      ("it is out of date; rebuild it with :Amp build, or: cd %s && cargo build --release"):format(native.root()),
    })
    return false
  end
  return true
end

function H.check_server()
  local amp = require("amp")
  local status = amp.status()
  if not status.running then
    health.warn("the server is not running", {
      "start it with :Amp start, or call require('amp').setup({ auto_start = true })",
    })
    if status.last_error then
      health.error("last error: " .. status.last_error)
    end
    return status
  end
  local listening = {}
  for _, id in ipairs(require("amp.core").agent_ids(status)) do
    local a = status.agents[id]
    if a.enabled then
      listening[#listening + 1] = ("%s on 127.0.0.1:%s"):format(id, tostring(a.port))
    end
  end
  if #listening > 0 then
    health.ok("listening: " .. table.concat(listening, ", "))
  else
    health.warn("running, but every agent is off", { "turn one on: setup({ agents = { amp = true } })" })
  end
  health.info("workspace folders: " .. table.concat(status.workspace_folders or {}, ", "))
  local clients = require("amp.connection").agents()
  if clients > 0 then
    health.ok(("%d agent%s connected: %s"):format(clients, clients == 1 and "" or "s", require("amp").statusline()))
  else
    health.info("no agent connected: run `amp` (or `:Amp open`) in a terminal inside the workspace")
  end
  if status.last_error then
    health.warn("last error: " .. status.last_error)
  end
  health.info("log file: " .. amp.get_config().log_file)
  return status
end

function H.check_lockfile(status)
  local dir = status and status.running and status.lockfile and vim.fs.dirname(status.lockfile) or H.lock_dir()
  local stat = vim.uv.fs_stat(dir)
  if not stat then
    local parent = H.existing_parent(dir)
    if parent and vim.uv.fs_access(parent, "W") then
      health.info(("lock directory %s does not exist yet; it is created when the server starts"):format(dir))
    else
      health.error(
        ("lock directory %s does not exist and cannot be created (%s is not writable)"):format(
          dir,
          parent or "no parent directory"
        )
      )
    end
  elseif stat.type ~= "directory" then
    health.error(("%s should be the lock directory but is a %s"):format(dir, stat.type))
  elseif not vim.uv.fs_access(dir, "W") then
    health.error(("lock directory %s is not writable"):format(dir))
  else
    local mode = stat.mode % 512
    if mode % 64 ~= 0 then
      health.warn(("lock directory %s has mode %o; expected 700 (other users can list it)"):format(dir, mode))
    else
      health.ok(("lock directory %s exists and is writable"):format(dir))
    end
  end

  if not (status and status.running) then
    health.info("no lockfile: the server is not running")
    return
  end
  if not (status.agents and status.agents.amp and status.agents.amp.enabled) then
    health.info("no Amp lockfile: Amp is off (agents.amp = false)")
    return
  end
  local path = status.lockfile
  local fstat = path and vim.uv.fs_stat(path)
  if not fstat then
    health.error(("the lockfile %s is missing: agents cannot find this editor"):format(tostring(path)), {
      "restart the server with :Amp restart",
    })
    return
  end
  local mode = fstat.mode % 512
  if mode == 384 then -- 0600
    health.ok(("lockfile %s (mode 600)"):format(path))
  else
    health.error(("lockfile %s has mode %o; expected 600 (it holds the auth token)"):format(path, mode))
  end
  H.check_lockfile_content(path, status)
end

function H.check_lockfile_content(path, status)
  local fd = io.open(path, "r")
  if not fd then
    health.error("cannot read the lockfile " .. path)
    return
  end
  local text = fd:read("*a")
  fd:close()
  local ok, data = pcall(vim.json.decode, text)
  if not ok or type(data) ~= "table" then
    health.error("the lockfile is not valid JSON: " .. path)
    return
  end
  local missing = {}
  for _, field in ipairs({ "port", "authToken", "pid", "workspaceFolders", "ideName" }) do
    if data[field] == nil then
      table.insert(missing, field)
    end
  end
  if #missing > 0 then
    health.error("the lockfile lacks " .. table.concat(missing, ", "))
    return
  end
  if data.port ~= status.port then
    health.error(("the lockfile says port %s, the server listens on %s"):format(data.port, status.port))
  elseif data.pid ~= vim.fn.getpid() then
    health.error(("the lockfile's pid %s is not this Neovim's (%d)"):format(data.pid, vim.fn.getpid()))
  else
    health.ok(("lockfile names %s, workspace %s"):format(data.ideName, table.concat(data.workspaceFolders, ", ")))
  end
end

-- The agent: the `amp` CLI, and the plugin that gives it Neovim's diagnostics.
function H.check_amp_cli()
  if vim.fn.executable("amp") == 1 then
    health.ok("amp (the Amp CLI) found: " .. vim.fn.exepath("amp"))
  else
    health.warn("amp (the Amp CLI) not found on PATH", {
      "install it (npm install -g @ampcode/cli) and run `amp` in a terminal inside your project",
    })
  end
  local plugin = require("amp.cli_plugin")
  local state = plugin.state()
  local where = vim.fn.fnamemodify(plugin.target(), ":~")
  if state == "current" then
    health.ok("the Amp CLI plugin for diagnostics is installed: " .. where)
  elseif state == "outdated" then
    health.warn("the Amp CLI plugin at " .. where .. " is out of date", { "run :Amp cli-plugin install" })
  else
    health.info(
      "the agent gets Neovim's diagnostics only through the Amp CLI plugin: :Amp cli-plugin install (see :help amp-cli-plugin)"
    )
  end
end

function H.check_node()
  if vim.fn.executable("node") == 1 then
    health.ok("node found: " .. vim.fn.exepath("node"))
  else
    health.warn("node not found on PATH", { "install Node.js 20 or newer (needed for OpenCtx providers)" })
  end
end

-- OpenCtx: each provider's `meta`, asked off the main thread (vim.wait keeps
-- Neovim's event loop running), within a bound; the Node command when a
-- JavaScript provider is configured.
function H.check_openctx()
  local ok, config = pcall(require("amp").get_config)
  local openctx = require("amp.openctx")
  local opts = ok and type(config) == "table" and config.openctx or nil
  if type(opts) ~= "table" or opts.enabled == false then
    health.info("OpenCtx is turned off (openctx.enabled = false)")
    return
  end
  if vim.tbl_isempty(opts.providers or {}) then
    health.info("no providers configured (openctx.providers; see :help amp-openctx)")
    return
  end
  if not openctx.enabled() then
    health.error("the OpenCtx client is not running (see :messages and :Amp log)")
    return
  end
  local done = nil
  openctx.check(function(result)
    done = result
  end)
  local bound = (opts.startup_timeout_ms or 15000) + (opts.timeout_ms or 2000) + 1000
  vim.wait(bound, function()
    return done ~= nil
  end, 20)
  if done == nil then
    health.error(("providers did not answer within %d ms"):format(bound))
    return
  end
  local js = vim.tbl_filter(function(p)
    return p.kind == "JavaScript module"
  end, done.providers or {})
  if #js > 0 then
    H.check_node_command(opts.node_command, #js)
  end
  for _, p in ipairs(done.providers or {}) do
    if p.ok then
      local features = #(p.features or {}) > 0 and table.concat(p.features, ", ") or "nothing"
      health.ok(("%s (%s): %s, offers %s"):format(p.uri, p.kind, p.name ~= "" and p.name or "no name", features))
    else
      health.error(("%s (%s): meta failed: %s"):format(p.uri, p.kind, p.error))
    end
  end
end

-- The command that runs JavaScript providers (openctx.node_command, not the
-- `node` on PATH).
function H.check_node_command(command, count)
  local advice = { "set openctx.node_command to a Node.js 20 (or newer) executable" }
  if vim.fn.executable(command) ~= 1 then
    health.error(
      ("openctx.node_command %q is not executable (%d JavaScript provider(s) need it)"):format(command, count),
      advice
    )
    return
  end
  local ok, job = pcall(vim.system, { command, "--version" }, { text = true })
  local res = ok and job:wait(5000) or nil
  if res and res.code == 0 then
    health.ok(("openctx.node_command %q: %s"):format(command, vim.trim(res.stdout or "")))
  else
    health.error(
      ("openctx.node_command %q does not run: %s"):format(command, res and vim.trim(res.stderr or "") or tostring(job)),
      advice
    )
  end
end

-- Where lockfiles live: $AMP_DATA_HOME/amp/ide, $XDG_DATA_HOME/amp/ide, ~/.local/share/amp/ide.
function H.lock_dir()
  local base = vim.env.AMP_DATA_HOME
  if not base or base == "" then
    base = vim.env.XDG_DATA_HOME
  end
  if not base or base == "" then
    base = vim.fs.joinpath(vim.uv.os_homedir() or "~", ".local", "share")
  end
  return vim.fs.joinpath(base, "amp", "ide")
end

function H.existing_parent(path)
  for dir in vim.fs.parents(path) do
    if vim.uv.fs_stat(dir) then
      return dir
    end
  end
end

return M
