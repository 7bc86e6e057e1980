--- Who is connected: one-line notices when an agent connects or goes away,
--- and the statusline's cached text.
---
--- Fed by the server's User events (lua/amp/init.lua). A connection counts
--- as an agent once it has stayed open for `M.settle_ms`: the Amp CLI keeps
--- its socket open, while a tool call of the diagnostics plugin
--- (`:Amp cli-plugin`) opens one for a single request; those come and go
--- without a notice.
local M = {}
local H = {}

--- How long a connection must stay open to count as an agent (ms).
M.settle_ms = 250

H.running = false
H.clients = {} ---@type table<integer, "pending"|"agent">
H.agents = 0
H.text = ""

---@return string
--- Recomputes the statusline's text (the count of unreviewed changes changed).
function M.refresh()
  H.update()
end

function M.statusline()
  return H.text
end

--- Number of connections that count as agents.
---@return integer
function M.agents()
  return H.agents
end

--- A server User event (AmpServerStarted, AmpServerStopped,
--- AmpClientConnected, AmpClientDisconnected) with its data.
function M.on_event(name, data, config)
  data = type(data) == "table" and data or {}
  local announce = config and config.notify and config.notify.connections
  if name == "AmpServerStarted" then
    H.running = true
  elseif name == "AmpServerStopped" then
    -- The server's own disconnect events do not outlive it.
    if H.agents > 0 and announce then
      H.echo(
        H.agents == 1 and "amp: the agent was disconnected (server stopped)"
          or ("amp: %d agents were disconnected (server stopped)"):format(H.agents)
      )
    end
    H.running = false
    H.clients = {}
    H.agents = 0
  elseif name == "AmpClientConnected" and data.id ~= nil then
    H.running = true
    local id = data.id
    H.clients[id] = "pending"
    local timer = vim.uv.new_timer()
    timer:start(M.settle_ms, 0, function()
      timer:close()
      vim.schedule(function()
        H.settled(id, announce)
      end)
    end)
  elseif name == "AmpClientDisconnected" and data.id ~= nil then
    local state = H.clients[data.id]
    H.clients[data.id] = nil
    if state == "agent" then
      H.agents = math.max(H.agents - 1, 0)
      if announce then
        H.echo(
          H.agents == 0 and "amp: the agent disconnected" or ("amp: an agent disconnected (%d left)"):format(H.agents)
        )
      end
    end
  end
  H.update()
end

-- A connection stayed open: an agent.
function H.settled(id, announce)
  if H.clients[id] ~= "pending" then
    return -- gone already (a one-request client) or the server stopped
  end
  H.clients[id] = "agent"
  H.agents = H.agents + 1
  if announce then
    H.echo(H.agents == 1 and "amp: an agent connected" or ("amp: an agent connected (%d connected)"):format(H.agents))
  end
  H.update()
end

function H.update()
  local text
  if not H.running then
    text = ""
  elseif H.agents == 0 then
    text = "amp"
  else
    text = ("amp: %d agent%s"):format(H.agents, H.agents == 1 and "" or "s")
  end
  local review = package.loaded["amp.review"]
  local unreviewed = review and review.count() or 0
  if unreviewed > 0 then
    text = (text == "" and "amp: " or (text == "amp" and "amp: " or (text .. ", "))) .. unreviewed .. " to review"
  end
  if text ~= H.text then
    H.text = text
    pcall(vim.cmd, "redrawstatus!")
  end
end

-- A status line in the message area (and :messages), not a vim.notify
-- alert: connecting is news, not a problem. One screen line, and only
-- when the screen has not scrolled for an earlier message: one more line
-- then would stop Neovim at a hit-enter prompt, where agent requests wait.
-- Tried again a little later (for 10 s), then dropped (the statusline
-- says it anyway).
function H.echo(msg, tries)
  tries = tries or 0
  if vim.fn.state("s") ~= "" or vim.api.nvim_get_mode().blocking then
    if tries < 100 then
      vim.defer_fn(function()
        H.echo(msg, tries + 1)
      end, 100)
    end
    return
  end
  local line = require("amp.notify").one_line(msg)
  vim.api.nvim_echo({ { line } }, true, {})
end

return M
