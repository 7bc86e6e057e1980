--- The `:Amp {subcommand} [args]` command: a table of subcommands plus dispatch
--- and completion. Each feature adds its subcommands with
--- `M.register(name, spec)` from its `<feature>/commands.lua` (see
--- `M.features`), and so may a user's config.
---
--- A spec is `{ run = function(args), complete? = function(arglead, args) -> string[], desc? = string }`.
--- `run` receives:
---   args.fargs  the words after the subcommand
---   args.text   the raw text after the subcommand (spacing kept)
---   args.range, args.line1, args.line2, args.smods  as in |nvim_create_user_command()|
local M = {}
local H = {}

---@class amp.CommandArgs
---@field name string the subcommand
---@field fargs string[] words after the subcommand
---@field text string raw text after the subcommand
---@field range integer 0, 1 or 2 (number of range items given)
---@field line1 integer
---@field line2 integer
---@field smods table command modifiers (:vertical, :tab, ...)

---@class amp.Subcommand
---@field run fun(args: amp.CommandArgs)
---@field complete? fun(arglead: string, args: string[]): string[]
---@field desc? string

---@type table<string, amp.Subcommand>
M.commands = {}

--- Add (or replace) a subcommand.
---@param name string
---@param spec amp.Subcommand
function M.register(name, spec)
  -- Not vim.validate(): its argument forms differ between 0.10 and 0.11+.
  local function check(what, value, kind, optional)
    if type(value) ~= kind and not (optional and value == nil) then
      error(("amp: commands.register: %s must be a %s, got %s"):format(what, kind, type(value)), 3)
    end
  end
  check("name", name, "string")
  check("spec", spec, "table")
  check("spec.run", spec.run, "function")
  check("spec.complete", spec.complete, "function", true)
  M.commands[name] = spec
end

--- Sorted names of every subcommand.
---@return string[]
function M.names()
  local seen = {}
  for name in pairs(M.commands) do
    seen[name] = true
  end
  for _, feature in ipairs(M.features) do
    for _, name in ipairs(feature.names) do
      seen[name] = true
    end
  end
  local names = vim.tbl_keys(seen)
  table.sort(names)
  return names
end

--- Entry point of `:Amp` (the table given to the command callback).
---@param cmd table see |nvim_create_user_command()|
function M.run(cmd)
  local name = cmd.fargs[1] or "status"
  local spec = H.spec(name)
  if not spec then
    M.error(
      ("amp: see :Amp <Tab> for the subcommands; there is no %q (%s)"):format(name, table.concat(M.names(), ", "))
    )
    return
  end
  if name ~= "build" and name ~= "install" then
    -- What setup() left for after start-up, if it has not run yet.
    require("amp").finish_setup()
  end
  spec.run({
    name = name,
    fargs = vim.list_slice(cmd.fargs, 2),
    text = (cmd.args or ""):match("^%s*%S+%s+(.-)%s*$") or "",
    range = cmd.range or 0,
    line1 = cmd.line1,
    line2 = cmd.line2,
    smods = cmd.smods or {},
  })
end

--- Completion of `:Amp`: subcommand names, then the subcommand's own arguments.
---@param arglead string
---@param cmdline string
---@param cursorpos integer
---@return string[]
function M.complete(arglead, cmdline, cursorpos)
  local words = H.words_before_cursor(cmdline, cursorpos)
  -- words[1] is the subcommand; the word under the cursor is `arglead`.
  local index = #words + 1
  if arglead ~= "" then
    index = #words
  end
  if index <= 1 then
    return M.filter(M.names(), arglead)
  end
  local spec = H.spec(words[1])
  if not spec or not spec.complete then
    return {}
  end
  return M.filter(spec.complete(arglead, vim.list_slice(words, 1, index - 1)) or {}, arglead)
end

-- Feature modules ----------------------------------------------------------

-- Each feature registers its own subcommands (with M.register) in a
-- `<feature>/commands.lua`, required the first time one of its subcommands
-- runs or completes its arguments. The names are listed here too, so that
-- completing subcommand names (`:Amp <Tab>`) or an unknown name's error
-- loads none of them (test_commands.py checks that each module registers
-- exactly the names listed).
M.features = {
  { module = "amp.server.commands", names = { "start", "stop", "restart", "build", "install", "status", "log" } },
  { module = "amp.cli_plugin.commands", names = { "cli-plugin" } },
  { module = "amp.message.commands", names = { "send", "prompt", "ref", "buffer" } },
  { module = "amp.terminal.commands", names = { "open" } },
  { module = "amp.mcp.commands", names = { "mcp" } },
  { module = "amp.tap.commands", names = { "tap" } },
  { module = "amp.files.commands", names = { "diff", "take", "keep" } },
  { module = "amp.review.commands", names = { "review" } },
  { module = "amp.openctx.commands", names = { "annotations", "mention", "context" } },
}

--- The spec of subcommand `name`, its feature module loaded if need be.
---@param name string
---@return amp.Subcommand|nil
function H.spec(name)
  local spec = M.commands[name]
  if spec then
    return spec
  end
  for _, feature in ipairs(M.features) do
    if vim.list_contains(feature.names, name) and not package.loaded[feature.module] then
      H.load(feature)
      return M.commands[name]
    end
  end
  return nil
end

--- Require a feature's module; a subcommand registered before under one of
--- its names (by a user's config) keeps that registration.
function H.load(feature)
  local before = {}
  for _, name in ipairs(feature.names) do
    before[name] = M.commands[name]
  end
  require(feature.module)
  for name, spec in pairs(before) do
    M.commands[name] = spec
  end
end

-- Helpers of the feature modules ----------------------------------------------

-- Shows the error of an `ok, err[, level]` result (an error unless `level` says otherwise).
function M.report(ok, err, level)
  if not ok and err then
    require("amp.notify").notify(err, level or vim.log.levels.ERROR)
  end
end

--- The items that start with `prefix`.
---@param items string[]
---@param prefix string
---@return string[]
function M.filter(items, prefix)
  return vim.tbl_filter(function(item)
    return vim.startswith(item, prefix)
  end, items)
end

-- One line each (amp.notify): a longer message stops Neovim at a hit-enter
-- prompt, where agent requests wait.
function M.info(msg)
  require("amp.notify").notify(msg, vim.log.levels.INFO)
end

function M.warn(msg)
  require("amp.notify").notify(msg, vim.log.levels.WARN)
end

function M.error(msg)
  require("amp.notify").notify(msg, vim.log.levels.ERROR)
end

-- Words typed after `:Amp` and before the cursor (ranges and modifiers removed).
function H.words_before_cursor(cmdline, cursorpos)
  local line = cmdline:sub(1, cursorpos)
  local ok, parsed = pcall(vim.api.nvim_parse_cmd, line, {})
  if ok and parsed.args then
    return parsed.args
  end
  local rest = line:match("Amp%s+(.*)$") or ""
  return vim.split(vim.trim(rest), "%s+", { trimempty = true })
end

return M
