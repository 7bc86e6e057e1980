--- Who is connected: one-line notices when an agent connects or goes away,
--- and the statusline's cached text.
---
--- Fed by the server's User events (lua/amp/init.lua), the same for every
--- agent: their `data` names the agent (`agent` = "amp", "claude", ...;
--- `name` = "Amp", "Claude", ...). A connection counts as an agent once it
--- has stayed open for `M.settle_ms`: the Amp CLI keeps its socket open,
--- while a tool call of the diagnostics plugin (`:Amp cli-plugin`) opens
--- one for a single request; those come and go without a notice.
local M = {}
local H = {}

--- How long a connection must stay open to count as an agent (ms).
M.settle_ms = 250

H.running = false
H.clients = {} ---@type table<integer, { state: "pending"|"agent", name: string }>
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
    H.clients[id] = { state = "pending", name = H.name_of(data), agent = data.agent }
    local timer = vim.uv.new_timer()
    timer:start(M.settle_ms, 0, function()
      timer:close()
      vim.schedule(function()
        H.settled(id, announce)
      end)
    end)
  elseif name == "AmpClientDisconnected" and data.id ~= nil then
    local client = H.clients[data.id]
    H.clients[data.id] = nil
    if client and client.state == "agent" then
      H.agents = math.max(H.agents - 1, 0)
      if announce then
        H.echo(
          H.agents == 0 and ("amp: %s disconnected"):format(client.name)
            or ("amp: %s disconnected (%d left)"):format(client.name, H.agents)
        )
      end
    end
  end
  H.update()
end

--- The agent's name in an event's data ("Claude"), for notices.
function H.name_of(data)
  if type(data.name) == "string" and data.name ~= "" then
    return data.name
  end
  return type(data.agent) == "string" and data.agent or "an agent"
end

-- A connection stayed open: an agent.
function H.settled(id, announce)
  local client = H.clients[id]
  if not client or client.state ~= "pending" then
    return -- gone already (a one-request client) or the server stopped
  end
  client.state = "agent"
  H.agents = H.agents + 1
  if announce then
    H.echo(
      H.agents == 1 and ("amp: %s connected"):format(client.name)
        or ("amp: %s connected (%d agents)"):format(client.name, H.agents)
    )
  end
  H.update()
end

function H.update()
  local text = H.compose()
  if text ~= H.text then
    H.text = text
    pcall(vim.cmd, "redrawstatus!")
  end
end

--- The statusline's text for the current state.
function H.compose()
  local text
  if not H.running then
    text = ""
  elseif H.agents == 0 then
    text = "amp"
  else
    text = ("amp: %d agent%s (%s)"):format(H.agents, H.agents == 1 and "" or "s", H.names())
  end
  -- What waits for the user: proposals, then unreviewed changes.
  local review = package.loaded["amp.review"]
  local waiting = {}
  local proposals = review and review.proposal_count() or 0
  if proposals > 0 then
    table.insert(waiting, ("%d proposal%s"):format(proposals, proposals == 1 and "" or "s"))
  end
  local unreviewed = review and review.count() or 0
  if unreviewed > 0 then
    table.insert(waiting, unreviewed .. " to review")
  end
  if #waiting > 0 then
    text = ((text == "" or text == "amp") and "amp: " or (text .. ", ")) .. table.concat(waiting, ", ")
  end
  return text
end

--- The connected agents by name, "Amp, Claude" ("2 Amp" for two of one).
function H.names()
  local counts, order = {}, {}
  for _, client in pairs(H.clients) do
    if client.state == "agent" then
      if not counts[client.name] then
        order[#order + 1] = client.name
      end
      counts[client.name] = (counts[client.name] or 0) + 1
    end
  end
  table.sort(order)
  return table.concat(
    vim.tbl_map(function(name)
      return counts[name] == 1 and name or ("%d %s"):format(counts[name], name)
    end, order),
    ", "
  )
end

--- Connected agents of one kind (`agent` = "amp", "claude", ...) or of all.
---@param agent? string
---@return integer
function M.connected(agent)
  local n = 0
  for _, client in pairs(H.clients) do
    if client.state == "agent" and (agent == nil or client.agent == agent) then
      n = n + 1
    end
  end
  return n
end

-- One line of news (lua/amp/notify.lua).
function H.echo(msg)
  require("amp.notify").news(msg)
end

-- The server's start alone does not load this module (lua/amp/core.lua:
-- it is not on the start-up path): loaded later, by the statusline or
-- the first connection, it starts from the server's state, and hears of
-- the next starts itself (core.lua's autocmd passes on the other events).
do
  local core = package.loaded["amp.core"]
  if core and core.is_running() then
    H.running = true
    H.text = H.compose()
  end
  vim.api.nvim_create_autocmd("User", {
    group = vim.api.nvim_create_augroup("AmpConnection", { clear = true }),
    pattern = "AmpServerStarted",
    desc = "amp: statusline",
    callback = function(ev)
      local loaded = package.loaded["amp.core"]
      M.on_event(ev.match, ev.data, loaded and loaded.get_config())
    end,
  })
end

return M
