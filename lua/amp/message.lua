--- Messages from the editor to the connected agent (amp.nvim compatible).
---
---   require("amp.message").send_message("explain this file")   -- submitted
---   require("amp.message").send_to_prompt("@src/main.rs#L10")  -- appended
---
--- The text is typed into the agent's terminal (a bracketed paste, and
--- Enter for send_message): the shipping Amp CLI ignores the protocol's
--- `userSentMessage` / `appendToPrompt`, and other agents' protocols have
--- none. The terminal is, in this order: the one `:Amp open` started
--- (lua/amp/terminal.lua), else the terminal a connected agent runs in, a
--- `:terminal` of this Neovim or a tmux pane (lua/amp/route.lua). With no
--- such terminal, connected clients get the protocol's notification and
--- one line says that no terminal was found and names `:Amp open`; with no
--- agent at all, one line says so. Nothing waits for an agent to come.
--- See `:help amp-send`.
local M = {}
local H = {}

--- Send a message to the agent as if the user typed and submitted it.
--- Returns true when it was typed into an `:Amp open` terminal, false and
--- why when it could not be sent, nil while the agent's terminal is looked
--- for (then `on_done(ok, why)` tells; the outcome is shown in one line).
---@param message string
---@param on_done? fun(ok: boolean, why: string|nil)
---@return boolean|nil ok
---@return string|nil why
function M.send_message(message, on_done)
  return H.send("userSentMessage", message, true, on_done)
end

--- Append text to the agent's prompt without submitting it (as
--- send_message returns).
---@param message string
---@param on_done? fun(ok: boolean, why: string|nil)
---@return boolean|nil ok
---@return string|nil why
function M.send_to_prompt(message, on_done)
  return H.send("appendToPrompt", message, false, on_done)
end

--- `:Amp ref`'s `@file#Lx-Ly`: appended to the prompt with a space on each
--- side when typed (it may follow text in the prompt), as it is over the
--- protocol.
---@param ref string
---@param on_done? fun(ok: boolean, why: string|nil)
---@return boolean|nil ok
---@return string|nil why
function M.send_reference(ref, on_done)
  return H.send("appendToPrompt", ref, false, on_done, " " .. ref .. " ")
end

-- Sends go one after the other, in the order they were asked for: finding
-- the agent's terminal takes a moment, and a message's Enter must come
-- before the next text.
H.queue = {} ---@type fun(done: fun())[]
H.busy = false

function H.enqueue(job)
  table.insert(H.queue, job)
  if H.busy then
    return
  end
  H.busy = true
  local function step()
    local next_job = table.remove(H.queue, 1)
    if not next_job then
      H.busy = false
      return
    end
    next_job(step)
  end
  step()
end

--- `typed`: the text as typed into a terminal, when it differs.
function H.send(name, message, submit, on_done, typed)
  on_done = on_done or function() end
  if type(message) ~= "string" or message:match("^%s*$") then
    return H.refuse("amp: give the text to send: the message is empty", on_done)
  end
  local result
  H.enqueue(function(done)
    H.deliver(name, message, submit, typed, function(ok, why)
      result = { ok, why }
      on_done(ok, why)
    end, done)
  end)
  if result then
    return result[1], result[2]
  end
  return nil, nil
end

--- Delivers one message: `on_result(ok, why)` once it is typed (or
--- refused), `settled()` once the next one may go.
function H.deliver(name, message, submit, typed, on_result, settled)
  -- Only loaded once :Amp open ran: no terminal runs before.
  local terminal = package.loaded["amp.terminal"]
  local term = terminal and terminal.target()
  if term then
    return on_result(terminal.paste(term, typed or message, submit, settled))
  end
  local amp = require("amp")
  if not amp.is_running() then
    H.refuse("amp: start the server with :Amp start, or run :Amp open: nothing is running", on_result)
    return settled()
  end
  local route = require("amp.route")
  route.find(function(routes)
    local target = routes[1]
    if not target then
      H.by_protocol(name, message, on_result)
      return settled()
    end
    route.deliver(target, typed or message, submit, function(ok, err)
      if ok then
        require("amp.notify").notify(("amp: typed into %s"):format(route.describe(target)), vim.log.levels.INFO)
        on_result(true, nil)
      else
        H.refuse(("amp: run :Amp open to type into the agent: %s"):format(err or "the paste failed"), on_result)
      end
      settled()
    end)
  end)
end

--- No terminal to type into: the protocol's notification for the clients
--- that read it, and one line that says what reached nothing.
function H.by_protocol(name, message, on_done)
  local reached, err = require("amp.native").call("broadcast", name, { message = message })
  if err then
    return H.refuse("amp: could not send the message: " .. err, on_done)
  end
  reached = tonumber(reached) or 0
  if reached == 0 then
    return H.refuse("amp: run :Amp open to start an agent: none is connected, so nothing was sent", on_done)
  end
  return H.refuse(
    ("amp: run :Amp open to type into the agent: no terminal of it found (%s sent to %d client%s)"):format(
      name,
      reached,
      reached == 1 and "" or "s"
    ),
    on_done
  )
end

function H.refuse(reason, on_done)
  require("amp.notify").notify(reason, vim.log.levels.WARN)
  on_done(false, reason)
  return false, reason
end

return M
