--- `:Amp` subcommands that send text to the agent (lua/amp/message.lua):
--- send, prompt, ref, buffer.
local commands = require("amp.commands")
local H = {}

commands.register("send", {
  desc = "send {text} to the agent as a message",
  complete = function(arglead)
    return H.complete_mention(arglead)
  end,
  run = function(args)
    if args.text == "" then
      commands.error("amp: usage: :Amp send {text}")
      return
    end
    require("amp.message").send_message(args.text)
  end,
})

commands.register("prompt", {
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
      commands.error("amp: usage: :Amp prompt {text}, or :'<,'>Amp prompt for selected lines")
      return
    end
    require("amp.message").send_to_prompt(text)
  end,
})

commands.register("ref", {
  desc = "append @file#Lx-Ly (the range, or the whole file) to the agent's prompt",
  run = function(args)
    local ref, err = H.file_reference(0, args)
    if not ref then
      commands.error(err)
      return
    end
    -- Claude Code / OpenCode (at_mentioned) and Copilot CLI
    -- (add_selection) connected to this Neovim take the reference through
    -- their protocol (they show it in their prompt themselves), unless the
    -- text goes to another agent's :Amp open terminal. Otherwise the
    -- reference is typed into the agent's prompt (amp.message).
    local terminal = package.loaded["amp.terminal"]
    local term = terminal and terminal.target()
    local mentions = not term or vim.list_contains(H.MENTIONS, term.agent)
    if mentions and H.mention(args) > 0 then
      return
    end
    require("amp.message").send_reference(ref)
  end,
})

commands.register("buffer", {
  desc = "append the current buffer's text to the agent's prompt",
  run = function()
    local text = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n")
    if text == "" then
      commands.error("amp: nothing to send: the buffer is empty")
      return
    end
    require("amp.message").send_to_prompt(text)
  end,
})

-- Helpers -------------------------------------------------------------------

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

-- `@partial` completes to `@path` of files under the cwd.
function H.complete_mention(arglead)
  if arglead:sub(1, 1) ~= "@" then
    return {}
  end
  return vim.tbl_map(function(file)
    return "@" .. file
  end, vim.fn.getcompletion(arglead:sub(2), "file"))
end

--- The agents (`:Amp open` names) whose protocol takes a reference.
H.MENTIONS = { "claude", "opencode", "copilot" }

--- Sends the range (or the whole buffer) to the connected clients whose
--- protocol takes a reference (Claude's at_mentioned, Copilot's
--- add_selection); returns how many it reached.
function H.mention(args)
  local agents = require("amp").status().agents or {}
  local connected = false
  for _, id in ipairs({ "claude", "copilot" }) do
    local a = agents[id]
    connected = connected or (type(a) == "table" and a.enabled and (tonumber(a.clients) or 0) > 0)
  end
  if not connected then
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
