--- Messages from the editor to the connected agent (amp.nvim compatible).
---
---   require("amp.message").send_message("explain this file")   -- userSentMessage
---   require("amp.message").send_to_prompt("@src/main.rs#L10")  -- appendToPrompt
---
--- When an agent runs in a terminal started by `:Amp open` (lua/amp/terminal.lua),
--- the text is typed into that terminal instead (bracketed paste, and Enter
--- for send_message): the shipping Amp CLI ignores both notifications, and
--- other agents' protocols have none. See `:help amp-terminal`.
local M = {}
local H = {}

--- Send a message to the agent as if the user typed and submitted it.
--- With no agent connected it waits (bounded) and goes to the next one.
---@param message string
---@return boolean ok true when an agent got it now
---@return string|nil reason why it was not sent now
function M.send_message(message)
  local routed, ok, err = H.to_terminal(message, true)
  if routed then
    return ok, err
  end
  return H.broadcast("userSentMessage", message)
end

--- Append text to the agent's prompt without submitting it.
---@param message string
---@return boolean ok
---@return string|nil reason why nothing was sent
function M.send_to_prompt(message)
  local routed, ok, err = H.to_terminal(message, false)
  if routed then
    return ok, err
  end
  return H.broadcast("appendToPrompt", message)
end

-- The terminal path: true (and the result) when an agent's terminal runs.
function H.to_terminal(message, submit)
  if type(message) ~= "string" or message == "" then
    return false
  end
  -- Only loaded once :Amp open ran: no terminal runs before.
  local terminal = package.loaded["amp.terminal"]
  local term = terminal and terminal.target()
  if not term then
    return false
  end
  return true, terminal.paste(term, message, submit)
end

function H.broadcast(name, message)
  if type(message) ~= "string" or message == "" then
    return H.refuse("amp: nothing to send (empty message)")
  end
  local amp = require("amp")
  if not amp.is_running() then
    return H.refuse("amp: the server is not running (start it with :Amp start)")
  end
  local reached, err = require("amp.native").call("broadcast", name, { message = message })
  if err then
    return H.refuse("amp: could not send the message: " .. err)
  end
  if type(reached) ~= "number" or reached < 1 then
    -- Kept for the next agent (bounded; lua/amp/connection.lua), and said so.
    local kept, text = require("amp.connection").wait(name, message)
    require("amp.notify").notify(text, kept and vim.log.levels.INFO or vim.log.levels.WARN)
    return false, text
  end
  return true, nil
end

function H.refuse(reason)
  require("amp.notify").notify(reason, vim.log.levels.WARN)
  return false, reason
end

return M
