--- Options of amp.nvim-rs: defaults, validation and merging.
---
--- `require("amp").setup(opts)` calls `M.resolve(opts)`; the result is the merged,
--- validated configuration that `amp.start()` turns into the native `start` options.
--- The options themselves (defaults, types, bounds) are declared once in
--- lua/amp/config/schema.lua. See `:help amp-config`.
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
---@field agents { amp: boolean, claude: boolean, gemini: boolean, qwen: boolean, mcp: boolean, copilot: boolean, codex: boolean, tap: boolean } the attach protocols served
---@field tap { url: string } the tap gateway's address (agents.tap)
---@field codex { unofficial_ide_context: boolean }
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

-- The schema is loaded when something needs it: checking options the user
-- gave, or reading one of these fields. The defaults need neither
-- (lua/amp/config/defaults.lua has what they need): building the schema
-- is most of this module's cost.
local schema ---@type table?
local from_schema = {
  schema = "options",
  log_levels = "log_levels",
  terminal_agents = "terminal_agents",
  terminal_positions = "terminal_positions",
  review_layouts = "review_layouts",
}
setmetatable(M, {
  __index = function(_, key)
    if from_schema[key] or key == "defaults" then
      H.load_schema()
      return rawget(M, key)
    end
  end,
})

--- "server.max_clients" -> { "server", "max_clients" } (string.find, not
--- gmatch: this runs for every option when the schema loads).
function H.split(dotted)
  local parts, from = {}, 1
  while true do
    local dot = dotted:find(".", from, true)
    parts[#parts + 1] = dotted:sub(from, dot and dot - 1 or nil)
    if not dot then
      return parts
    end
    from = dot + 1
  end
end

--- Set `value` at `path` in `tbl`, making the tables on the way.
function H.set(tbl, path, value)
  for i = 1, #path - 1 do
    local key = path[i]
    tbl[key] = tbl[key] or {}
    tbl = tbl[key]
  end
  tbl[path[#path]] = value
end

--- The value at `path` in `tbl` (nil when a table on the way is missing).
function H.get(tbl, path)
  for i = 1, #path do
    if type(tbl) ~= "table" then
      return nil
    end
    tbl = tbl[path[i]]
  end
  return tbl
end

--- Loads the schema (once) and what is built from it: the fields in
--- `from_schema`, `M.defaults`, and each option's path split once.
function H.load_schema()
  if schema then
    return schema
  end
  schema = require("amp.config.schema")
  for field, key in pairs(from_schema) do
    rawset(M, field, schema[key])
  end
  -- Each option's path in the configuration table.
  H.paths = {}
  for i, option in ipairs(schema.options) do
    H.paths[i] = H.split(option.name)
  end
  --- Every option at its default, from the schema (see :help amp-config).
  ---@type amp.Config
  local defaults = {}
  -- Keys that a table may hold besides those in the defaults (their default is nil).
  H.optional_keys = {}
  for i, option in ipairs(schema.options) do
    H.set(defaults, H.paths[i], H.copy(option.default))
    if option.default == nil then
      H.optional_keys[option.name] = true
    end
  end
  rawset(M, "defaults", defaults)
  H.command_type = { check = schema.is_command, expect = "a non-empty list of strings" }
  return schema
end

-- lua/amp/config/defaults.lua: the defaults, and the native options of a
-- configuration, without the schema (generated from it; test_config.py
-- checks that it is current).
local generated = require("amp.config.defaults")
-- The deep copy and the normalizing every configuration gets (with the
-- generated defaults: `setup({})` at start-up loads that file alone).
H.copy = generated.copy
H.normalize = generated.normalize

--- The agents `:Amp open` can start: the known ones first, then every
--- other name in `terminal.cmd`, sorted.
---@param config? amp.Config
---@return string[]
function M.agent_names(config)
  H.load_schema()
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
  if user == nil or next(user) == nil then
    -- The defaults, which are valid (tests/integration/test_config.py
    -- validates them): `setup({})`'s work at start-up is a table
    -- constructor, without the schema.
    return generated.resolved(), nil, nil
  end
  H.load_schema()
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
    "codex",
    "tap",
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
  -- Over new tables of the defaults, the same resolve({}) returns (H.merge,
  -- not vim.tbl_deep_extend: the same for these plain tables, and a
  -- fraction of its cost on the start-up path).
  local config = H.merge(generated.defaults(), user)
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
  H.load_schema()
  for i, option in ipairs(schema.options) do
    local err = H.check(option, H.get(config, H.paths[i]), config)
    if err then
      return false, err
    end
  end
  -- Agents beyond the known ones (their commands are checked last).
  local cmd = config.terminal.cmd
  for _, agent in ipairs(M.agent_names(config)) do
    if not vim.list_contains(M.terminal_agents, agent) then
      local err = H.check_value("terminal.cmd." .. tostring(agent), cmd[agent], H.command_type)
      if err then
        return false, err
      end
    end
  end
  return true, nil
end

--- The options native `start` takes from the configuration, under their
--- native names (each option's `rust` in the schema), copied.
---@param config amp.Config resolved
---@return table
function M.native_options(config)
  return generated.native(config, H.copy)
end

--- The error naming `option` when `value` does not fit it, else nil.
function H.check(option, value, config)
  if option.type == "commands" then
    -- Each known agent's command, named in the error.
    for _, agent in ipairs(M.terminal_agents) do
      local err = H.check_value("terminal.cmd." .. agent, value[agent], H.command_type)
      if err then
        return err
      end
    end
    return nil
  end
  return H.check_value(option.name, value, schema.types[option.type], option, config)
end

function H.check_value(name, value, kind, option, config)
  if not kind.check(value, config) then
    local expect = (option and option.expect) or kind.expect
    if type(expect) == "function" then
      expect = expect(config)
    end
    return ("amp: setup: %s must be %s, got %s"):format(name, expect, H.show(value))
  end
  local min, max = option and option.min, option and option.max
  if min and value < min then
    return ("amp: setup: %s must be at least %d, got %s"):format(name, min, H.show(value))
  end
  if max and value > max then
    return ("amp: setup: %s must be at most %d, got %s"):format(name, max, H.show(value))
  end
  return nil
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
  H.load_schema()
  return H.unknown_keys(config, M.defaults, "")
end

-- Helpers -------------------------------------------------------------------

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

function H.show(value)
  if type(value) == "string" then
    -- %q writes a newline as backslash + newline: a two-line message.
    return (("%q"):format(value):gsub("\\\n", "\\n"))
  end
  return vim.inspect(value, { newline = " ", indent = "" })
end

return M
