--- The options of amp.nvim-rs, declared once: each option's dotted name,
--- default, type, bounds and a one-line help. `amp.config` builds its
--- defaults and its validation from this list, the native `start` options
--- come from the `rust` names, and tests/integration/test_config.py checks
--- that doc/amp.txt (:help amp-config) says the same.
---
--- An entry:
---   name     dotted path of the option ("server.max_clients")
---   default  its default (nil: none; a table is copied, never shared)
---   type     a key of `M.types` below: what the value must be ("commands":
---            a table of agent = command, each checked by amp.config)
---   expect   the words after "must be" in the error, when not the type's
---   min/max  inclusive bounds of a number (checked after the type)
---   rust     the key of the native `start` options it is given as (a
---            dotted one nests: "agents.amp" is `agents = { amp = ... }`)
---   help     one line: what it does (the full text is in :help amp-config)
---
--- The list is in the order options are checked: with several wrong, the
--- first one here is the one the error names.
local M = {}

M.log_levels = { "trace", "debug", "info", "warn", "error" }
M.review_layouts = { "tab", "split", "inline" }
M.terminal_positions = { "right", "left", "bottom", "top", "float" }
-- The agents `:Amp open` knows, and where their terminal may open.
M.terminal_agents = { "amp", "claude", "gemini", "qwen", "copilot", "opencode", "codex" }

-- stylua: ignore start
M.options = {
  { name = "auto_start", default = true, type = "boolean",
    help = "Start the server as soon as setup() runs." },
  -- The terminal agents served, all from the same editor state. `claude`
  -- (Claude Code, and OpenCode's TUI) writes ~/.claude/ide/<port>.lock
  -- ($CLAUDE_CONFIG_DIR/ide/ when set) and opens a second loopback port;
  -- `gemini` (Gemini CLI) writes $TMPDIR/gemini/ide/gemini-ide-server-<pid>-<port>.json
  -- and opens another (:help amp-gemini); `qwen` (Qwen Code) writes
  -- ~/.qwen/ide/<port>.lock ($QWEN_HOME/ide/) and opens another (:help
  -- amp-qwen); `mcp` serves the editor's tools to any agent over MCP
  -- (:help amp-mcp); `copilot` (GitHub Copilot CLI) writes
  -- ~/.copilot/ide/<uuid>.lock ($COPILOT_HOME/ide/ when set) and listens
  -- on a private Unix socket (:help amp-copilot); `codex` (Codex CLI)
  -- reviews each apply_patch of a Codex started by `:Amp open codex`
  -- (:help amp-codex); `tap` offers the editor's tools to Copilot CLI
  -- sessions through a tap gateway (:help amp-tap). Each is off unless
  -- asked for.
  { name = "agents.amp", default = true, type = "boolean", rust = "agents.amp",
    help = "Serve Amp (its lockfile and WebSocket server)." },
  { name = "agents.claude", default = false, type = "boolean", rust = "agents.claude",
    help = "Serve Claude Code (and OpenCode): ~/.claude/ide lockfile, a second port." },
  { name = "agents.gemini", default = false, type = "boolean", rust = "agents.gemini",
    help = "Serve Gemini CLI: MCP over HTTP, a discovery file in $TMPDIR/gemini/ide." },
  { name = "agents.qwen", default = false, type = "boolean", rust = "agents.qwen",
    help = "Serve Qwen Code: Gemini's protocol, ~/.qwen/ide lockfile." },
  { name = "agents.mcp", default = false, type = "boolean", rust = "agents.mcp",
    help = "Serve the editor's tools to any MCP agent (:help amp-mcp)." },
  { name = "agents.copilot", default = false, type = "boolean", rust = "agents.copilot",
    help = "Serve GitHub Copilot CLI over a private Unix socket." },
  { name = "agents.codex", default = false, type = "boolean", rust = "agents.codex",
    help = "Review each apply_patch of the Codex `:Amp open codex` starts." },
  -- Serve Codex's `/ide` (active file, selection, open tabs) over its
  -- private, UNOFFICIAL IPC protocol, to the Codex `:Amp open codex`
  -- starts only. Any Codex update may change or drop it (:help amp-codex).
  { name = "codex.unofficial_ide_context", default = false, type = "boolean", rust = "codex_ide_context",
    help = "Serve Codex's /ide context over its private, unofficial protocol." },
  { name = "agents.tap", default = false, type = "boolean", rust = "agents.tap",
    help = "Offer the editor's tools to Copilot CLI through a tap gateway." },
  { name = "tap.url", default = "ws://localhost:9400", type = "tap_url", rust = "tap_url",
    help = "The tap gateway's address: ws:// on this machine." },
  { name = "log_level", default = "info", type = "log_level", rust = "log_level",
    help = "Lowest level written to the log file." },
  { name = "log_file", default = nil, type = "path", expect = "nil or a file path", rust = "log_file",
    help = 'Log file; nil: stdpath("log") .. "/amp.log".' },
  -- Past the cap the file is renamed `<file>.1` (replacing the previous
  -- one) and a new one is started.
  { name = "log_max_bytes", default = 10 * 1024 * 1024, type = "positive_int", min = 4096, rust = "log_max_bytes",
    help = "Cap of the log file (bytes)." },
  { name = "server.port", default = 0, type = "port", rust = "port",
    help = "TCP port on 127.0.0.1; 0 lets the OS pick a free one." },
  { name = "server.port_range", default = nil, type = "port_range", rust = "port_range",
    help = "{ min, max }: try each port of the range in order (overrides port)." },
  -- Bounds (min/max) are those the native side accepts.
  -- A bigger WebSocket message closes with 1009, a bigger HTTP body gets 413.
  { name = "server.max_frame_bytes", default = 64 * 1024 * 1024, type = "positive_int", min = 1024, max = 4294967295,
    rust = "max_frame_bytes", help = "Largest inbound message of any agent (bytes)." },
  { name = "server.max_clients", default = 32, type = "positive_int", min = 1, max = 10000, rust = "max_clients",
    help = "Clients of one agent connected at the same time." },
  { name = "server.send_queue", default = 1024, type = "positive_int", min = 1, max = 1000000, rust = "send_queue",
    help = "Outbound messages queued per client before it is dropped." },
  { name = "server.ping_interval_ms", default = 30000, type = "positive_int", min = 100, max = 3600000,
    rust = "ping_interval_ms", help = "WebSocket ping keepalive period (milliseconds)." },
  { name = "server.allowed_origins", default = {}, type = "string_list", rust = "allowed_origins",
    help = "Origin header values accepted; any other Origin is refused (403)." },
  -- When one more comes, the oldest is dropped: a flood of half-open
  -- connections cannot use up file descriptors.
  { name = "server.max_pending_handshakes", default = 16, type = "positive_int", min = 1, max = 10000,
    rust = "max_pending_handshakes", help = "Connections between accept and a finished handshake." },
  { name = "server.handshake_timeout_ms", default = 2000, type = "positive_int", min = 100, max = 60000,
    rust = "handshake_timeout_ms", help = "A handshake not finished within this long is dropped (milliseconds)." },
  -- From the read of a message until its answer is sent (counted twice:
  -- text and decoded form); past it, connections are not read until
  -- answers go out.
  { name = "server.max_inflight_bytes", default = 256 * 1024 * 1024, type = "positive_int", min = 1048576,
    max = 4294967295, rust = "max_inflight_bytes", help = "Bytes of requests in flight, all clients together." },
  { name = "selection.interval_ms", default = 10, type = "non_negative_int", min = 0, max = 10000,
    rust = "selection_interval_ms", help = "Debounce of selection updates sent to the agents (milliseconds)." },
  -- A buffer with unsaved changes is kept and you are told (:Amp diff).
  { name = "watch.enabled", default = true, type = "boolean", rust = "watch_files",
    help = "Reload buffers whose files change on disk (the agent's edits)." },
  { name = "watch.debounce_ms", default = 20, type = "non_negative_int", min = 0, max = 10000,
    rust = "watch_debounce_ms", help = "Wait this long after the last write to a file before reloading it." },
  -- "post" runs BufWritePost (LSP, gitsigns see the save) but not
  -- BufWritePre (formatters leave the agent's text alone).
  { name = "edits.write_autocmds", default = "post", type = "write_autocmds", rust = "write_autocmds",
    help = "Autocommands an agent's edit runs when written: all, post or none." },
  { name = "notify.connections", default = true, type = "boolean",
    help = "A one-line notice when an agent connects or disconnects." },
  -- (see :help amp-review)
  { name = "review.edit_file", default = false, type = "boolean", rust = "review_edit_file",
    help = "Amp's editFile opens a review and is answered when you decide." },
  { name = "review.timeout_ms", default = 300000, type = "positive_int", min = 1000, max = 86400000,
    rust = "review_timeout_ms", help = "An editFile review not decided by then is closed (milliseconds)." },
  -- "tab" (a tab page of its own), "split" (beside the current window,
  -- which shows the old text; the agent's terminal stays in view) or
  -- "inline" (one new window: the new text with the removed lines shown
  -- between its lines).
  { name = "review.layout", default = "tab", type = "review_layout",
    help = "Where :Amp review shows a review." },
  -- A proposal never opens by itself.
  { name = "review.open_key", default = false, type = "key_or_false",
    help = "A normal-mode key that opens the next review; false: none." },
  -- ]c and [c move between hunks as in any diff.
  { name = "review.keys", type = "key_map",
    default = { accept_hunk = "ga", reject_hunk = "gr", accept_all = "gA", reject_all = "gR" },
    help = "Buffer-local keys in a review (false: no mapping)." },
  -- nil: the GitHub releases of the repository the plugin was cloned from.
  { name = "install.url", default = nil, type = "path", expect = "nil or a URL",
    help = 'Where :Amp install downloads release files from ("{version}" is replaced).' },
  { name = "edits.max_file_bytes", default = 32 * 1024 * 1024, type = "positive_int", min = 1, max = 1099511627776,
    rust = "max_file_bytes", help = "readFile and editFile refuse files (and texts) bigger than this (bytes)." },
  { name = "terminal.default", default = "amp", type = "agent",
    help = "The agent :Amp open starts without an argument (a key of terminal.cmd)." },
  { name = "terminal.position", default = "right", type = "terminal_position",
    help = "Where the agent's window opens." },
  -- Below 1 a fraction of the editor's, else columns or lines. A float: both.
  { name = "terminal.size", default = 0.4, type = "positive_number", min = 0, max = 10000,
    help = "Width (right/left) or height (bottom/top) of the agent's window." },
  -- The command of each agent, as a list (program, then arguments); any
  -- other name may be added (`:Amp open {name}`). Claude Code starts in
  -- "default" permission mode and Qwen Code in "default" approval mode:
  -- they then ask the editor to review each edit (openDiff); their own
  -- defaults ("auto" in Claude Code 2.1 and Qwen Code 0.24) edit files
  -- without asking. Agents without an attach protocol of their own
  -- (cursor, crush, goose, kiro) get the editor's tools over MCP
  -- (agents.mcp; :help amp-mcp).
  { name = "terminal.cmd", type = "commands",
    default = {
      amp = { "amp" },
      claude = { "claude", "--permission-mode", "default" },
      gemini = { "gemini" },
      qwen = { "qwen", "--approval-mode", "default" },
      copilot = { "copilot" },
      opencode = { "opencode" },
      codex = { "codex" },
      cursor = { "cursor-agent" },
      crush = { "crush" },
      goose = { "goose", "session" },
      kiro = { "kiro-cli", "chat" },
    },
    help = "The command of each agent :Amp open starts (program, then arguments)." },
  { name = "openctx.enabled", default = true, type = "boolean",
    help = "Ask OpenCtx providers for annotations, mentions and items." },
  -- Each entry is checked when OpenCtx starts: a bad one is skipped with a
  -- warning.
  { name = "openctx.providers", default = {}, type = "provider_map",
    help = "Provider URI -> true | settings table | false (disabled)." },
  { name = "openctx.timeout_ms", default = 2000, type = "positive_int", min = 1, max = 600000,
    help = "Deadline of each provider call (milliseconds)." },
  -- Node importing a module (downloaded first when remote), an MCP
  -- server's handshake (npx may install it first). The call that follows
  -- has timeout_ms.
  { name = "openctx.startup_timeout_ms", default = 15000, type = "positive_int", min = 1, max = 600000,
    help = "Deadline of a provider's start-up (milliseconds)." },
  { name = "openctx.max_file_bytes", default = 1024 * 1024, type = "non_negative_int",
    help = "Files bigger than this are not annotated." },
  { name = "openctx.node_command", default = "node", type = "nonempty_string", expect = "a command name or path",
    help = "The Node.js executable that runs JavaScript providers." },
  { name = "openctx.debounce_ms", default = 300, type = "non_negative_int", min = 0, max = 60000,
    help = "Wait this long after typing stops before asking for annotations again." },
}
-- stylua: ignore end

-- Types -----------------------------------------------------------------------

local function is_integer(value)
  return type(value) == "number" and value == math.floor(value) and value > -math.huge and value < math.huge
end

local function is_port(value)
  return is_integer(value) and value >= 1 and value <= 65535
end

local function is_string_list(value)
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

local function one_of(values)
  return {
    check = function(value)
      return vim.list_contains(values, value)
    end,
    expect = "one of " .. table.concat(values, "|"),
  }
end

--- A command: { program, args... }, every item a string, the program not empty.
function M.is_command(value)
  return is_string_list(value) and #value > 0 and value[1] ~= ""
end

--- Each type: `check(value, config)` says whether `value` fits; `expect`
--- (a string, or a function of the configuration) says what it must be.
M.types = {
  boolean = {
    check = function(value)
      return type(value) == "boolean"
    end,
    expect = "a boolean",
  },
  positive_int = {
    check = function(value)
      return is_integer(value) and value > 0
    end,
    expect = "a positive integer",
  },
  non_negative_int = {
    check = function(value)
      return is_integer(value) and value >= 0
    end,
    expect = "a non-negative integer",
  },
  positive_number = {
    check = function(value)
      return type(value) == "number" and value > 0 and value < math.huge
    end,
    expect = "a positive number",
  },
  port = {
    check = function(value)
      return is_integer(value) and value >= 0 and value <= 65535
    end,
    expect = "an integer between 0 and 65535",
  },
  -- nil, { min, max } or { min = , max = }
  port_range = {
    check = function(value)
      if value == nil then
        return true
      end
      if type(value) ~= "table" then
        return false
      end
      local min, max = value.min or value[1], value.max or value[2]
      return is_port(min) and is_port(max) and min <= max
    end,
    expect = "nil or { min, max } with 1 <= min <= max <= 65535",
  },
  string_list = { check = is_string_list, expect = "a list of strings" },
  nonempty_string = {
    check = function(value)
      return type(value) == "string" and value ~= ""
    end,
    expect = "a non-empty string",
  },
  -- nil or a non-empty string (a file path, a URL)
  path = {
    check = function(value)
      return value == nil or (type(value) == "string" and value ~= "")
    end,
    expect = "nil or a non-empty string",
  },
  log_level = {
    check = function(value)
      return type(value) == "string" and vim.list_contains(M.log_levels, value:lower())
    end,
    expect = "one of " .. table.concat(M.log_levels, "|"),
  },
  review_layout = one_of(M.review_layouts),
  terminal_position = one_of(M.terminal_positions),
  write_autocmds = {
    check = function(value)
      return value == "all" or value == "post" or value == "none"
    end,
    expect = '"all", "post" or "none"',
  },
  -- ws://host[:port][/path] with host localhost, 127.0.0.1 or [::1].
  tap_url = {
    check = function(value)
      if type(value) ~= "string" then
        return false
      end
      local host = value:match("^ws://([^/?#]*)")
      if not host then
        return false
      end
      host = host:gsub(":%d+$", "")
      return host == "localhost" or host == "127.0.0.1" or host == "[::1]"
    end,
    expect = "a ws:// URL on this machine (localhost, 127.0.0.1 or [::1])",
  },
  key_or_false = {
    check = function(value)
      return value == false or (type(value) == "string" and value ~= "")
    end,
    expect = "a key (a non-empty string) or false",
  },
  key_map = {
    check = function(value)
      if type(value) ~= "table" then
        return false
      end
      for name, key in pairs(value) do
        if type(name) ~= "string" or not (key == false or (type(key) == "string" and key ~= "")) then
          return false
        end
      end
      return true
    end,
    expect = "a table of key names to keys (strings) or false",
  },
  -- A table; its entries are checked one by one when OpenCtx starts (a bad
  -- entry disables itself only, as in the reference client).
  provider_map = {
    check = function(value)
      return type(value) == "table"
    end,
    expect = "a table of provider URI = true|false|{settings}",
  },
  -- A name in terminal.cmd.
  agent = {
    check = function(value, config)
      return type(value) == "string" and config.terminal.cmd[value] ~= nil
    end,
    expect = function(config)
      return "an agent named in terminal.cmd (" .. table.concat(require("amp.config").agent_names(config), "|") .. ")"
    end,
  },
}

return M
