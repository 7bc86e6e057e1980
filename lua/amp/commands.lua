--- The `:Amp {subcommand} [args]` command: a table of subcommands plus dispatch
--- and completion. Other modules add subcommands with `M.register(name, spec)`.
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
  local names = vim.tbl_keys(M.commands)
  table.sort(names)
  return names
end

--- Entry point of `:Amp` (the table given to the command callback).
---@param cmd table see |nvim_create_user_command()|
function M.run(cmd)
  local name = cmd.fargs[1] or "status"
  local spec = M.commands[name]
  if not spec then
    H.error(
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
    return H.filter(M.names(), arglead)
  end
  local spec = M.commands[words[1]]
  if not spec or not spec.complete then
    return {}
  end
  return H.filter(spec.complete(arglead, vim.list_slice(words, 1, index - 1)) or {}, arglead)
end

-- Subcommands ---------------------------------------------------------------

M.register("start", {
  desc = "start the server",
  run = function()
    local amp = require("amp")
    if amp.is_running() then
      H.info("amp: already running: " .. H.status_text():gsub("^amp: running, ", ""))
      return
    end
    local ok = amp.start()
    if ok then
      H.info("amp: started: " .. H.status_text():gsub("^amp: running, ", ""))
    end
  end,
})

M.register("stop", {
  desc = "stop the server and remove its lockfile",
  run = function()
    local amp = require("amp")
    if not amp.is_running() then
      H.info("amp: the server is not running")
      return
    end
    if amp.stop() then
      H.info("amp: server stopped")
    end
  end,
})

M.register("restart", {
  desc = "stop and start the server",
  run = function()
    local ok, port = require("amp").restart()
    if ok then
      H.info(("amp: server listening on 127.0.0.1:%s"):format(port))
    end
  end,
})

M.register("build", {
  desc = "build the native library (cargo build --release) in the background",
  run = function()
    require("amp.build").run(function(ok)
      if ok then
        require("amp").after_build()
      end
    end)
  end,
})

M.register("install", {
  desc = "download the prebuilt native library of this release (checksum-verified), else build it",
  run = function()
    require("amp.install").run(function(ok)
      if ok then
        require("amp").after_build()
      end
    end)
  end,
})

M.register("status", {
  desc = "show the server's state",
  run = function()
    H.info(H.status_text())
  end,
})

M.register("log", {
  desc = "open the log file in a split",
  run = function(args)
    local path = require("amp").get_config().log_file
    if not vim.uv.fs_stat(path) then
      H.warn(("amp: no log file yet at %s"):format(path))
      return
    end
    -- The name as one literal argument (no escaping, no expansion).
    vim.api.nvim_cmd({ cmd = "split", args = { path }, mods = args.smods, magic = { file = false } }, {})
    -- The plugin's own buffer: never watched or reviewed as an agent's
    -- change (lua/amp/buffer.lua; its path is one of the own files too).
    require("amp.buffer").mark_own(vim.api.nvim_get_current_buf())
    -- The newest lines are the ones wanted.
    vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(0), 0 })
  end,
})

local CLI_PLUGIN_ACTIONS = { "install", "remove", "status" }

M.register("cli-plugin", {
  desc = "the Amp CLI plugin that gives the agent Neovim's diagnostics: install, remove, status",
  complete = function(arglead)
    return H.filter(CLI_PLUGIN_ACTIONS, arglead)
  end,
  run = function(args)
    local action = args.fargs[1] or "status"
    local plugin = require("amp.cli_plugin")
    if action == "status" then
      H.info(plugin.describe())
    elseif action == "install" or action == "remove" then
      local ok, msg = plugin[action]()
      if ok then
        H.info(msg)
      else
        H.error(msg)
      end
    else
      H.error(
        ("amp: use %s: there is no cli-plugin action '%s'"):format(table.concat(CLI_PLUGIN_ACTIONS, ", "), action)
      )
    end
  end,
})

M.register("send", {
  desc = "send {text} to the agent as a message",
  complete = function(arglead)
    return H.complete_mention(arglead)
  end,
  run = function(args)
    if args.text == "" then
      H.error("amp: usage: :Amp send {text}")
      return
    end
    require("amp.message").send_message(args.text)
  end,
})

M.register("prompt", {
  desc = "append [text], or the lines of the range, to the agent's prompt",
  complete = function(arglead)
    return H.complete_mention(arglead)
  end,
  run = function(args)
    local text = args.text
    if text == "" and args.range > 0 then
      text = table.concat(vim.api.nvim_buf_get_lines(0, args.line1 - 1, args.line2, false), "\n")
    end
    if text == "" then
      H.error("amp: usage: :Amp prompt {text}, or :'<,'>Amp prompt for selected lines")
      return
    end
    require("amp.message").send_to_prompt(text)
  end,
})

M.register("ref", {
  desc = "append @file#Lx-Ly (the range, or the whole file) to the agent's prompt",
  run = function(args)
    local ref, err = H.file_reference(0, args)
    if not ref then
      H.error(err)
      return
    end
    -- Claude Code / OpenCode connected to this Neovim take an at_mentioned
    -- (they show the reference in their prompt themselves), unless the
    -- text goes to another agent's :Amp open terminal. Otherwise the
    -- reference is typed into the agent's prompt (amp.message).
    local terminal = package.loaded["amp.terminal"]
    local term = terminal and terminal.target()
    local claude_like = not term or term.agent == "claude" or term.agent == "opencode"
    if claude_like and H.claude_mention(args) > 0 then
      return
    end
    require("amp.message").send_reference(ref)
  end,
})

M.register("buffer", {
  desc = "append the current buffer's text to the agent's prompt",
  run = function()
    local text = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n")
    if text == "" then
      H.error("amp: nothing to send: the buffer is empty")
      return
    end
    require("amp.message").send_to_prompt(text)
  end,
})

M.register("open", {
  desc = "open (or hide, or show again) an agent's CLI in a terminal attached to this Neovim",
  complete = function(arglead, words)
    local terminal = require("amp.terminal")
    if #words <= 1 then
      return H.filter(terminal.available(), arglead)
    end
    return H.filter(terminal.suggested_args(words[2]), arglead)
  end,
  run = function(args)
    -- `:Amp open [agent] [args...]`; `:Amp open --continue` is the default agent's.
    local agent, extra = args.fargs[1], vim.list_slice(args.fargs, 2)
    if agent and agent:sub(1, 1) == "-" then
      agent, extra = nil, args.fargs
    end
    require("amp.terminal").toggle(agent, extra)
  end,
})

M.register("mcp", {
  desc = "show the MCP server entry to add to an agent's configuration (JSON, TOML) in a scratch buffer",
  run = function()
    require("amp.mcp").show()
  end,
})

-- A buffer whose file changed on disk while it had unsaved changes
-- (lua/amp/files.lua): compare, take the disk's text, or keep yours.
M.register("diff", {
  desc = "compare the buffer with the file on disk",
  run = function()
    H.report(require("amp.files").diff())
  end,
})

M.register("take", {
  desc = "replace the buffer with the file on disk",
  run = function()
    local mod, err = require("amp.native").load()
    if not mod then
      H.error(err)
      return
    end
    H.report(require("amp.files").take(mod))
  end,
})

M.register("keep", {
  desc = "keep the buffer's text and write it over the file on disk",
  run = function()
    H.report(require("amp.files").keep())
  end,
})

-- Agents' proposals and the changes they made on disk, hunk by hunk
-- (lua/amp/review/).
M.register("review", {
  desc = "open an agent's proposal or review the changes agents made, hunk by hunk",
  run = function(args)
    require("amp.review").command(args.text)
  end,
  complete = function(arglead)
    return H.filter(require("amp.review").complete(), arglead)
  end,
})

-- OpenCtx (lua/amp/openctx.lua): annotations, mentions and context items.
local ANNOTATION_ACTIONS = { "toggle", "refresh", "list", "hover", "open" }

M.register("annotations", {
  desc = "OpenCtx annotations: toggle, refresh, list, hover, open",
  complete = function(arglead)
    return vim.tbl_filter(function(a)
      return vim.startswith(a, arglead)
    end, ANNOTATION_ACTIONS)
  end,
  run = function(args)
    local action = args.fargs[1] or "list"
    local openctx = require("amp.openctx")
    if action == "toggle" then
      openctx.toggle()
    elseif action == "refresh" then
      openctx.reset()
    elseif action == "list" then
      openctx.list()
    elseif action == "hover" then
      openctx.hover()
    elseif action == "open" then
      openctx.open()
    else
      H.error(
        ("amp: use %s: there is no annotations action '%s'"):format(table.concat(ANNOTATION_ACTIONS, ", "), action)
      )
    end
  end,
})

M.register("mention", {
  desc = "pick an OpenCtx mention and send its content to the agent",
  run = function(args)
    require("amp.openctx").mention(args.text ~= "" and args.text or nil)
  end,
})

M.register("context", {
  desc = "send OpenCtx items matching a message to the agent",
  run = function(args)
    if args.text == "" then
      H.error("amp: usage: :Amp context {message}")
      return
    end
    require("amp.openctx").context(args.text)
  end,
})

-- Helpers -------------------------------------------------------------------

-- Shows the error of an `ok, err[, level]` result (an error unless `level` says otherwise).
function H.report(ok, err, level)
  if not ok and err then
    require("amp.notify").notify(err, level or vim.log.levels.ERROR)
  end
end

--- `@path#L10-L20` for the range, `@path#L10` for one line, `@path` with no range.
--- The path is relative to the cwd when the file is under it.
---@return string|nil ref
---@return string|nil err
function H.file_reference(buf, args)
  local name = require("amp.buffer").file_of(buf)
  if not name then
    return nil, "amp: go to the buffer of a file first: :Amp ref needs one"
  end
  local path = vim.fs.normalize(vim.fn.fnamemodify(name, ":p"))
  path = require("amp.compat").relpath(vim.fn.getcwd(), path) or path
  if args.range == 0 then
    return "@" .. path, nil
  end
  if args.line1 == args.line2 then
    return ("@%s#L%d"):format(path, args.line1), nil
  end
  return ("@%s#L%d-L%d"):format(path, args.line1, args.line2), nil
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

-- `@partial` completes to `@path` of files under the cwd.
function H.complete_mention(arglead)
  if arglead:sub(1, 1) ~= "@" then
    return {}
  end
  return vim.tbl_map(function(file)
    return "@" .. file
  end, vim.fn.getcompletion(arglead:sub(2), "file"))
end

function H.filter(items, prefix)
  return vim.tbl_filter(function(item)
    return vim.startswith(item, prefix)
  end, items)
end

--- Sends at_mentioned for the range (or the whole buffer) to connected
--- Claude clients; returns how many it reached.
function H.claude_mention(args)
  local claude = (require("amp").status().agents or {}).claude
  if not (claude and claude.enabled and (claude.clients or 0) > 0) then
    return 0
  end
  local name = vim.api.nvim_buf_get_name(0)
  if name == "" then
    return 0
  end
  local first, last = 0, math.max(vim.api.nvim_buf_line_count(0) - 1, 0)
  if args.range > 0 then
    first, last = args.line1 - 1, args.line2 - 1
  end
  local reached = require("amp.native").call("at_mentioned", vim.fn.fnamemodify(name, ":p"), first, last)
  return tonumber(reached) or 0
end

--- The status on one line, most important first (it is cut to fit the
--- screen: a longer message would stop Neovim at a hit-enter prompt, where
--- agent requests wait). Everything else: require("amp").status() and
--- :checkhealth amp.
function H.status_text()
  local status = require("amp").status()
  local parts = { status.running and "amp: running" or "amp: not running" }
  if status.running then
    local served = 0
    for _, id in ipairs(require("amp.core").agent_ids(status)) do
      local agent = status.agents[id]
      if agent.enabled then
        served = served + 1
        local n = tonumber(agent.clients) or 0
        parts[#parts + 1] = ("%s on :%s, %d client%s"):format(id, agent.port, n, n == 1 and "" or "s")
      end
    end
    if served == 0 then
      parts[#parts + 1] = "no agent enabled (agents = { ... })"
    end
  end
  local err = status.last_error
  if err ~= nil and err ~= vim.NIL then
    -- (The error is a message of its own: one "amp: " prefix is enough.)
    parts[#parts + 1] = "last error: " .. tostring(err):gsub("^amp: ", "")
  end
  if status.running and status.workspace_folders and status.workspace_folders[1] then
    parts[#parts + 1] = vim.fn.fnamemodify(status.workspace_folders[1], ":~")
  end
  -- The library's version; none when it is not loaded.
  if type(status.version) == "string" then
    parts[#parts + 1] = "v" .. status.version
  end
  return table.concat(parts, ", ")
end

-- One line each (amp.notify): a longer message stops Neovim at a hit-enter
-- prompt, where agent requests wait.
function H.info(msg)
  require("amp.notify").notify(msg, vim.log.levels.INFO)
end

function H.warn(msg)
  require("amp.notify").notify(msg, vim.log.levels.WARN)
end

function H.error(msg)
  require("amp.notify").notify(msg, vim.log.levels.ERROR)
end

return M
