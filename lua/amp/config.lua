--- Options of amp.nvim-rs: defaults, validation and merging.
---
--- `require("amp").setup(opts)` calls `M.resolve(opts)`; the result is the merged,
--- validated configuration that `amp.start()` turns into the native `start` options.
--- See `:help amp-config`.
local M = {}
local H = {}

---@class amp.ServerConfig
---@field port integer 0 = let the OS choose a free port
---@field port_range? integer[] { min, max }: try these ports in order (overrides `port`)
---@field max_frame_bytes integer largest inbound message of any agent; bigger ones close the connection (1009) or get 413
---@field max_clients integer simultaneous agent connections
---@field send_queue integer outbound messages queued per client before it is dropped
---@field ping_interval_ms integer WebSocket ping keepalive period
---@field allowed_origins string[] `Origin` header values accepted (default: none)
---@field max_pending_handshakes integer connections still in their handshake; the oldest goes first
---@field handshake_timeout_ms integer a handshake not finished by then is dropped
---@field max_inflight_bytes integer bytes of requests in flight, all clients together

---@class amp.TerminalConfig
---@field default string the agent of `:Amp open` without an argument (a key of `cmd`)
---@field position "right"|"left"|"bottom"|"top"|"float" where the terminal window opens
---@field size number the window's width (right/left) or height (bottom/top): a fraction of the editor below 1, else columns/lines; a float's both
---@field cmd table<string, string[]> the command of each agent (any name: `:Amp open {name}`)

---@class amp.Config
---@field auto_start boolean start the server in `setup()`
---@field agents { amp: boolean, claude: boolean, gemini: boolean, mcp: boolean } the attach protocols served
---@field log_level "trace"|"debug"|"info"|"warn"|"error"
---@field log_file? string absolute path; default `stdpath("log") .. "/amp.log"`
---@field log_max_bytes integer the log file's cap; past it, it becomes `<file>.1`
---@field server amp.ServerConfig
---@field selection { interval_ms: integer }
---@field watch { enabled: boolean, debounce_ms: integer }
---@field edits { write_autocmds: "all"|"post"|"none", max_file_bytes: integer }
---@field install { url?: string }
---@field notify { connections: boolean }
---@field review { edit_file: boolean, timeout_ms: integer, layout: "tab"|"split"|"inline", open_key: string|false, keys: table<string, string|false> }
---@field terminal amp.TerminalConfig
---@field openctx { enabled: boolean, providers: table<string, boolean|table>, timeout_ms: integer, startup_timeout_ms: integer, max_file_bytes: integer, node_command: string, debounce_ms: integer }

---@type amp.Config
M.defaults = {
  -- Start the server as soon as `setup()` runs.
  auto_start = true,
  -- The terminal agents served, all from the same editor state. `claude`
  -- (Claude Code, and OpenCode's TUI) writes ~/.claude/ide/<port>.lock
  -- ($CLAUDE_CONFIG_DIR/ide/ when set) and opens a second loopback port;
  -- `gemini` (Gemini CLI) writes $TMPDIR/gemini/ide/gemini-ide-server-<pid>-<port>.json
  -- and opens another (:help amp-gemini); `mcp` serves the editor's tools
  -- to any agent over MCP (:help amp-mcp). Each is off unless asked for.
  agents = { amp = true, claude = false, gemini = false, mcp = false },
  -- Minimum level written to the log file: "trace"|"debug"|"info"|"warn"|"error".
  log_level = "info",
  -- Log file; nil means vim.fn.stdpath("log") .. "/amp.log".
  log_file = nil,
  -- Cap of the log file (bytes): past it the file is renamed `<file>.1`
  -- (replacing the previous one) and a new one is started.
  log_max_bytes = 10 * 1024 * 1024,
  server = {
    -- TCP port on 127.0.0.1; 0 lets the OS pick a free one.
    port = 0,
    -- { min, max }: try each port of the range in order (overrides `port`).
    port_range = nil,
    -- Largest inbound message of any agent (bytes): a bigger WebSocket
    -- message closes with 1009, a bigger HTTP body gets 413.
    max_frame_bytes = 64 * 1024 * 1024,
    -- Clients of one agent connected at the same time.
    max_clients = 32,
    -- Outbound messages queued per client.
    send_queue = 1024,
    -- WebSocket ping keepalive period (milliseconds).
    ping_interval_ms = 30000,
    -- `Origin` header values accepted; any other Origin is refused (403).
    allowed_origins = {},
    -- Connections between accept and a finished WebSocket handshake; when
    -- one more comes, the oldest is dropped (a flood of half-open
    -- connections cannot use up file descriptors).
    max_pending_handshakes = 16,
    -- A handshake not finished within this long is dropped (milliseconds).
    handshake_timeout_ms = 2000,
    -- Bytes of requests in flight, all clients together, from the read of
    -- a message until its answer is sent (counted twice: text and decoded
    -- form); past it, connections are not read until answers go out.
    max_inflight_bytes = 256 * 1024 * 1024,
  },
  selection = {
    -- Debounce of selection updates sent to the agent (milliseconds).
    interval_ms = 10,
  },
  watch = {
    -- Reload buffers whose files change on disk (the agent's edits); a
    -- buffer with unsaved changes is kept and you are told (:Amp diff).
    enabled = true,
    -- Wait this long after the last write to a file before reloading it.
    debounce_ms = 20,
  },
  edits = {
    -- Autocommands run when an agent's edit is written with Neovim's :write:
    -- "post" runs BufWritePost (LSP, gitsigns see the save) but not
    -- BufWritePre (formatters leave the agent's text alone); "all" or "none".
    write_autocmds = "post",
    -- readFile and editFile refuse files (and texts) bigger than this (bytes).
    max_file_bytes = 32 * 1024 * 1024,
  },
  notify = {
    -- A one-line notice when an agent connects or disconnects.
    connections = true,
  },
  review = {
    -- Amp's editFile opens a review of the change and answers the agent
    -- only when you decide (see :help amp-review).
    edit_file = false,
    -- A review of an editFile not decided by then is closed and the agent
    -- told so (milliseconds).
    timeout_ms = 300000,
    -- Where :Amp review shows a review: "tab" (a tab page of its own),
    -- "split" (beside the current window, which shows the old text; the
    -- agent's terminal stays in view) or "inline" (one new window: the new
    -- text with the removed lines shown between its lines).
    layout = "tab",
    -- A normal-mode key that opens the next review (as :Amp review does);
    -- false: none. A proposal never opens by itself.
    open_key = false,
    -- Buffer-local keys in a review (false: no mapping). ]c and [c move
    -- between hunks as in any diff.
    keys = { accept_hunk = "ga", reject_hunk = "gr", accept_all = "gA", reject_all = "gR" },
  },
  terminal = {
    -- The agent `:Amp open` starts without an argument.
    default = "amp",
    -- Where its window opens: "right", "left", "bottom", "top" or "float".
    position = "right",
    -- Width (right/left) or height (bottom/top) of the window: below 1 a
    -- fraction of the editor's, else columns or lines. A float: both.
    size = 0.4,
    -- The command of each agent, as a list (program, then arguments).
    -- Claude Code starts in "default" permission mode: it then asks the
    -- editor to review each edit (openDiff); its own default ("auto" in
    -- 2.1) edits files without asking.
    cmd = {
      amp = { "amp" },
      claude = { "claude", "--permission-mode", "default" },
      gemini = { "gemini" },
      opencode = { "opencode" },
      -- Agents without an attach protocol of their own: they get the
      -- editor's tools over MCP (agents.mcp; :help amp-mcp).
      cursor = { "cursor-agent" },
      crush = { "crush" },
      goose = { "goose", "session" },
      kiro = { "kiro-cli", "chat" },
    },
  },
  install = {
    -- Where `:Amp install` downloads release files from ("{version}" is
    -- replaced); nil: the GitHub releases of the repository the plugin was
    -- cloned from.
    url = nil,
  },
  openctx = {
    -- Ask OpenCtx providers for annotations, mentions and items.
    enabled = true,
    -- Provider URI -> true | settings table | false (disabled). See :help amp-openctx.
    providers = {},
    -- Deadline of each provider call (milliseconds).
    timeout_ms = 2000,
    -- Deadline of a provider's start-up (milliseconds): Node importing a
    -- module (downloaded first when remote), an MCP server's handshake (npx
    -- may install it first). The call that follows has timeout_ms.
    startup_timeout_ms = 15000,
    -- Files bigger than this are not annotated.
    max_file_bytes = 1024 * 1024,
    -- The Node.js executable that runs JavaScript providers.
    node_command = "node",
    -- Wait this long after typing stops before asking for annotations again.
    debounce_ms = 300,
  },
}

M.log_levels = { "trace", "debug", "info", "warn", "error" }
-- The agents `:Amp open` knows, and where their terminal may open.
M.terminal_agents = { "amp", "claude", "gemini", "opencode" }

--- The agents `:Amp open` can start: the known ones first, then every
--- other name in `terminal.cmd`, sorted.
---@param config? amp.Config
---@return string[]
function M.agent_names(config)
  local cmd = (config or M.defaults).terminal.cmd
  local names, seen = {}, {}
  for _, name in ipairs(M.terminal_agents) do
    if cmd[name] ~= nil then
      names[#names + 1], seen[name] = name, true
    end
  end
  local others = {}
  for name in pairs(cmd) do
    if not seen[name] then
      others[#others + 1] = tostring(name)
    end
  end
  table.sort(others)
  return vim.list_extend(names, others)
end
M.terminal_positions = { "right", "left", "bottom", "top", "float" }
M.review_layouts = { "tab", "split", "inline" }

--- Merge `user` over the defaults and validate the result.
---@param user? table
---@return amp.Config|nil config
---@return string|nil err a readable message naming the option, e.g.
---  "amp: setup: server.max_clients must be a positive integer, got -1"
---@return string|nil warning options that were ignored, if any
function M.resolve(user)
  if user ~= nil and type(user) ~= "table" then
    return nil, ("amp: setup: options must be a table, got %s"):format(H.show(user))
  end
  user = user or {}
  -- Checked before merging: a non-table here would make tbl_deep_extend lose it.
  for _, key in ipairs({
    "agents",
    "server",
    "selection",
    "watch",
    "edits",
    "install",
    "notify",
    "review",
    "openctx",
    "terminal",
  }) do
    if user[key] ~= nil and type(user[key]) ~= "table" then
      return nil, ("amp: setup: %s must be a table, got %s"):format(key, H.show(user[key]))
    end
  end
  -- amp.nvim (Lua) takes `port_range` at the top level; accept it there too.
  if user.port_range ~= nil and not (user.server and user.server.port_range ~= nil) then
    user = vim.deepcopy(user)
    user.server = user.server or {}
    user.server.port_range = user.port_range
    user.port_range = nil
  end
  -- (H.copy / H.merge, not vim.deepcopy / vim.tbl_deep_extend: the same
  -- for these plain tables, and a fraction of their cost on the start-up
  -- path.)
  local config = H.merge(H.copy(M.defaults), user)
  -- Lists replace the default instead of being merged index by index.
  for _, key in ipairs({ "port_range", "allowed_origins" }) do
    if user.server and user.server[key] ~= nil then
      config.server[key] = H.copy(user.server[key])
    end
  end
  local user_cmd = nil
  if type(user.terminal) == "table" then
    user_cmd = user.terminal.cmd
  end
  if user_cmd ~= nil and type(user_cmd) ~= "table" then
    return nil, ("amp: setup: terminal.cmd must be a table, got %s"):format(H.show(user_cmd))
  end
  for agent, cmd in pairs(user_cmd or {}) do
    config.terminal.cmd[agent] = H.copy(cmd)
  end
  local unknown = M.unknown(config)
  local ok, err = M.validate(config)
  if not ok then
    -- One line for both: a second message would replace the first.
    if #unknown > 0 then
      err = ("%s; unknown: %s"):format(err, table.concat(unknown, ", "))
    end
    return nil, err
  end
  local warning
  if #unknown > 0 then
    warning = ("amp: setup: ignoring unknown option%s %s (see :help amp-config)"):format(
      #unknown > 1 and "s" or "",
      table.concat(unknown, ", ")
    )
  end
  return H.normalize(config), nil, warning
end

--- Validate a full configuration table (defaults already merged in).
---@param config table
---@return boolean ok
---@return string|nil err
function M.validate(config)
  local checks = {
    { "auto_start", config.auto_start, H.is_boolean, "a boolean" },
    { "agents.amp", config.agents.amp, H.is_boolean, "a boolean" },
    { "agents.claude", config.agents.claude, H.is_boolean, "a boolean" },
    { "agents.gemini", config.agents.gemini, H.is_boolean, "a boolean" },
    { "agents.mcp", config.agents.mcp, H.is_boolean, "a boolean" },
    { "log_level", config.log_level, H.is_log_level, "one of " .. table.concat(M.log_levels, "|") },
    { "log_file", config.log_file, H.optional(H.is_nonempty_string), "nil or a file path" },
    { "log_max_bytes", config.log_max_bytes, H.is_positive_int, "a positive integer", 4096 },
    { "server.port", config.server.port, H.is_port_or_zero, "an integer between 0 and 65535" },
    {
      "server.port_range",
      config.server.port_range,
      H.optional(H.is_port_range),
      "nil or { min, max } with 1 <= min <= max <= 65535",
    },
    -- Bounds (min/max) are those the native side accepts.
    {
      "server.max_frame_bytes",
      config.server.max_frame_bytes,
      H.is_positive_int,
      "a positive integer",
      1024,
      4294967295,
    },
    { "server.max_clients", config.server.max_clients, H.is_positive_int, "a positive integer", 1, 10000 },
    { "server.send_queue", config.server.send_queue, H.is_positive_int, "a positive integer", 1, 1000000 },
    {
      "server.ping_interval_ms",
      config.server.ping_interval_ms,
      H.is_positive_int,
      "a positive integer",
      100,
      3600000,
    },
    { "server.allowed_origins", config.server.allowed_origins, H.is_string_list, "a list of strings" },
    {
      "server.max_pending_handshakes",
      config.server.max_pending_handshakes,
      H.is_positive_int,
      "a positive integer",
      1,
      10000,
    },
    {
      "server.handshake_timeout_ms",
      config.server.handshake_timeout_ms,
      H.is_positive_int,
      "a positive integer",
      100,
      60000,
    },
    {
      "server.max_inflight_bytes",
      config.server.max_inflight_bytes,
      H.is_positive_int,
      "a positive integer",
      1048576,
      4294967295,
    },
    {
      "selection.interval_ms",
      config.selection.interval_ms,
      H.is_non_negative_int,
      "a non-negative integer",
      0,
      10000,
    },
    { "watch.enabled", config.watch.enabled, H.is_boolean, "a boolean" },
    { "watch.debounce_ms", config.watch.debounce_ms, H.is_non_negative_int, "a non-negative integer", 0, 10000 },
    { "edits.write_autocmds", config.edits.write_autocmds, H.is_write_autocmds, '"all", "post" or "none"' },
    { "notify.connections", config.notify.connections, H.is_boolean, "a boolean" },
    { "review.edit_file", config.review.edit_file, H.is_boolean, "a boolean" },
    { "review.timeout_ms", config.review.timeout_ms, H.is_positive_int, "a positive integer", 1000, 86400000 },
    {
      "review.layout",
      config.review.layout,
      H.one_of(M.review_layouts),
      "one of " .. table.concat(M.review_layouts, "|"),
    },
    { "review.open_key", config.review.open_key, H.is_key_or_false, "a key (a non-empty string) or false" },
    { "review.keys", config.review.keys, H.is_key_map, "a table of key names to keys (strings) or false" },
    { "install.url", config.install.url, H.optional(H.is_nonempty_string), "nil or a URL" },
    { "edits.max_file_bytes", config.edits.max_file_bytes, H.is_positive_int, "a positive integer", 1, 1099511627776 },
    {
      "terminal.default",
      config.terminal.default,
      function(v)
        return type(v) == "string" and config.terminal.cmd[v] ~= nil
      end,
      "an agent named in terminal.cmd (" .. table.concat(M.agent_names(config), "|") .. ")",
    },
    {
      "terminal.position",
      config.terminal.position,
      H.one_of(M.terminal_positions),
      "one of " .. table.concat(M.terminal_positions, "|"),
    },
    { "terminal.size", config.terminal.size, H.is_positive_number, "a positive number", 0, 10000 },
    { "terminal.cmd.amp", config.terminal.cmd.amp, H.is_command, "a non-empty list of strings" },
    { "terminal.cmd.claude", config.terminal.cmd.claude, H.is_command, "a non-empty list of strings" },
    { "terminal.cmd.gemini", config.terminal.cmd.gemini, H.is_command, "a non-empty list of strings" },
    { "terminal.cmd.opencode", config.terminal.cmd.opencode, H.is_command, "a non-empty list of strings" },
    { "openctx.enabled", config.openctx.enabled, H.is_boolean, "a boolean" },
    {
      "openctx.providers",
      config.openctx.providers,
      H.is_provider_map,
      "a table of provider URI = true|false|{settings}",
    },
    -- (Each entry is checked when OpenCtx starts: a bad one is skipped with a warning.)
    { "openctx.timeout_ms", config.openctx.timeout_ms, H.is_positive_int, "a positive integer", 1, 600000 },
    {
      "openctx.startup_timeout_ms",
      config.openctx.startup_timeout_ms,
      H.is_positive_int,
      "a positive integer",
      1,
      600000,
    },
    { "openctx.max_file_bytes", config.openctx.max_file_bytes, H.is_non_negative_int, "a non-negative integer" },
    { "openctx.node_command", config.openctx.node_command, H.is_nonempty_string, "a command name or path" },
    { "openctx.debounce_ms", config.openctx.debounce_ms, H.is_non_negative_int, "a non-negative integer", 0, 60000 },
  }
  for _, agent in ipairs(M.agent_names(config)) do
    local cmd = config.terminal.cmd[agent]
    if not (type(agent) == "string" and H.is_command(cmd)) then
      table.insert(checks, { "terminal.cmd." .. tostring(agent), cmd, H.is_command, "a non-empty list of strings" })
    end
  end
  for _, check in ipairs(checks) do
    local name, value, predicate, expected, min, max = unpack(check, 1, 6)
    if not predicate(value) then
      return false, ("amp: setup: %s must be %s, got %s"):format(name, expected, H.show(value))
    end
    if min and value < min then
      return false, ("amp: setup: %s must be at least %d, got %s"):format(name, min, H.show(value))
    end
    if max and value > max then
      return false, ("amp: setup: %s must be at most %d, got %s"):format(name, max, H.show(value))
    end
  end
  return true, nil
end

--- A deep copy of an options table (metatables kept): vim.deepcopy's
--- result for these tables, at a fraction of its cost.
---@generic T
---@param value T
---@return T
function M.copy(value)
  return H.copy(value)
end

--- Options in `config` that amp.nvim-rs does not know (they are ignored).
---@param config table
---@return string[] names, e.g. { "server.prot" }
function M.unknown(config)
  return H.unknown_keys(config, M.defaults, "")
end

-- Helpers -------------------------------------------------------------------

--- A deep copy of an options table (no cycles); metatables are kept
--- (`vim.empty_dict()` must stay one).
function H.copy(value)
  if type(value) ~= "table" then
    return value
  end
  local out = {}
  for k, v in pairs(value) do
    out[k] = H.copy(v)
  end
  return setmetatable(out, getmetatable(value))
end

--- Whether `vim.tbl_deep_extend` would merge into `value` rather than
--- replace it: a table that is empty or not a list.
local function mergeable(value)
  return type(value) == "table" and (next(value) == nil or not vim.islist(value))
end

--- `vim.tbl_deep_extend("force", dst, src)` for plain tables, in place:
--- tables that are both mergeable are merged key by key, anything else
--- from `src` replaces (a copy).
function H.merge(dst, src)
  for k, v in pairs(src) do
    if mergeable(v) and mergeable(dst[k]) then
      H.merge(dst[k], v)
    else
      dst[k] = H.copy(v)
    end
  end
  return dst
end

-- Keys that a table may hold besides those in the defaults (their default is nil).
H.optional_keys = { log_file = true, ["server.port_range"] = true, ["install.url"] = true }

function H.unknown_keys(tbl, defaults, prefix)
  local found = {}
  for key, value in pairs(tbl) do
    local name = prefix .. tostring(key)
    local default = defaults[key]
    -- Any agent may be named in terminal.cmd (checked by M.validate).
    if default == nil and not H.optional_keys[name] and prefix ~= "terminal.cmd." then
      table.insert(found, name)
    elseif type(default) == "table" and not vim.islist(default) and type(value) == "table" then
      vim.list_extend(found, H.unknown_keys(value, default, name .. "."))
    end
  end
  table.sort(found)
  return found
end

function H.normalize(config)
  if config.log_file == nil then
    config.log_file = vim.fs.joinpath(vim.fn.stdpath("log"), "amp.log")
  end
  config.log_file = vim.fn.fnamemodify(vim.fs.normalize(config.log_file), ":p")
  config.log_level = config.log_level:lower()
  local range = config.server.port_range
  if range ~= nil then
    config.server.port_range = { range.min or range[1], range.max or range[2] }
  end
  return config
end

function H.show(value)
  if type(value) == "string" then
    -- %q writes a newline as backslash + newline: a two-line message.
    return (("%q"):format(value):gsub("\\\n", "\\n"))
  end
  return vim.inspect(value, { newline = " ", indent = "" })
end

function H.optional(predicate)
  return function(value)
    return value == nil or predicate(value)
  end
end

-- A table; its entries are checked one by one when OpenCtx starts (a bad
-- entry disables itself only, as in the reference client).
function H.is_provider_map(value)
  return type(value) == "table"
end

function H.is_key_or_false(value)
  return value == false or (type(value) == "string" and value ~= "")
end

function H.is_key_map(value)
  if type(value) ~= "table" then
    return false
  end
  for name, key in pairs(value) do
    if type(name) ~= "string" or not (key == false or (type(key) == "string" and key ~= "")) then
      return false
    end
  end
  return true
end

function H.one_of(values)
  return function(value)
    return vim.list_contains(values, value)
  end
end

function H.is_positive_number(value)
  return type(value) == "number" and value > 0 and value < math.huge
end

-- A command: { program, args... }, every item a string, the program not empty.
function H.is_command(value)
  return H.is_string_list(value) and #value > 0 and value[1] ~= ""
end

function H.is_boolean(value)
  return type(value) == "boolean"
end

function H.is_write_autocmds(value)
  return value == "all" or value == "post" or value == "none"
end

function H.is_integer(value)
  return type(value) == "number" and value == math.floor(value) and value > -math.huge and value < math.huge
end

function H.is_positive_int(value)
  return H.is_integer(value) and value > 0
end

function H.is_non_negative_int(value)
  return H.is_integer(value) and value >= 0
end

function H.is_port_or_zero(value)
  return H.is_integer(value) and value >= 0 and value <= 65535
end

function H.is_port(value)
  return H.is_integer(value) and value >= 1 and value <= 65535
end

function H.is_port_range(value)
  if type(value) ~= "table" then
    return false
  end
  local min, max = value.min or value[1], value.max or value[2]
  return H.is_port(min) and H.is_port(max) and min <= max
end

function H.is_nonempty_string(value)
  return type(value) == "string" and value ~= ""
end

function H.is_log_level(value)
  return type(value) == "string" and vim.list_contains(M.log_levels, value:lower())
end

function H.is_string_list(value)
  if type(value) ~= "table" or (next(value) ~= nil and not vim.islist(value)) then
    return false
  end
  for _, item in ipairs(value) do
    if type(item) ~= "string" then
      return false
    end
  end
  return true
end

return M
