--- The environment that attaches an agent started from this Neovim (a
--- `:terminal`, `:Amp open`) to its server: what the served agents'
--- front-ends report, and loopback kept out of http proxies. Loaded when
--- an agent that needs variables is served (Amp alone needs none: its CLI
--- finds the lockfile), or by the terminal.
local M = {}
local H = {}

--- The environment that attaches an agent started from this Neovim to it:
--- each served agent's variables as its front-end reports them
--- (`status().agents[<agent>].env`: Claude Code and OpenCode read
--- CLAUDE_CODE_SSE_PORT / OPENCODE_EDITOR_SSE_PORT, Gemini CLI
--- GEMINI_CLI_IDE_SERVER_PORT, GEMINI_CLI_IDE_WORKSPACE_PATH and
--- GEMINI_CLI_IDE_PID, ...); loopback must not go through an http proxy.
--- Empty when the server is not running. `status` defaults to the
--- server's `require("amp").status()`.
---@param status? table
---@return table<string, string>
function M.env(status)
  status = status or require("amp").status()
  local env = {}
  local agents = status.running and type(status.agents) == "table" and status.agents or {}
  for _, agent in pairs(agents) do
    if type(agent) == "table" and agent.enabled ~= false and type(agent.env) == "table" then
      for name, value in pairs(agent.env) do
        env[name] = tostring(value)
      end
    end
  end
  if env.GEMINI_CLI_IDE_SERVER_PORT and H.gemini_needs_same_container_hint() then
    env.REMOTE_CONTAINERS = "true"
  end
  if next(env) then
    for _, name in ipairs({ "no_proxy", "NO_PROXY" }) do
      -- The value before this plugin added to it (H.env_saved), so a
      -- restart does not add the loopback names twice.
      env[name] = M.with_loopback(H.env_before(name))
    end
  end
  return env
end

--- The loopback hosts an agent's requests to this Neovim go to: they must
--- never go through an http proxy (Gemini's carry a bearer token).
M.loopback_hosts = { "127.0.0.1", "localhost", "::1" }

--- `no_proxy` with each of M.loopback_hosts as an entry of its own: the
--- value is a comma-separated list, and only an exact entry counts
--- (`127.0.0.10` or `my127.0.0.1.example` do not exempt 127.0.0.1). Entries
--- already there are kept as they are, in their order.
---@param current string|nil
---@return string
function M.with_loopback(current)
  local entries, seen = {}, {}
  for entry in (current or ""):gmatch("[^,]+") do
    entry = vim.trim(entry)
    if entry ~= "" then
      entries[#entries + 1] = entry
      seen[entry:lower()] = true
    end
  end
  for _, host in ipairs(M.loopback_hosts) do
    if not seen[host] then
      entries[#entries + 1] = host
    end
  end
  return table.concat(entries, ",")
end

--- Inside a container (`/.dockerenv`, `/run/.containerenv`) Gemini CLI dials
--- `host.docker.internal`, where an IDE outside the container would listen,
--- unless it runs over SSH (`SSH_CONNECTION`) or in a dev container
--- (`REMOTE_CONTAINERS`, `VSCODE_REMOTE_CONTAINERS_SESSION`). A terminal of
--- this Neovim shares its container, so its server is on 127.0.0.1: say
--- so with `REMOTE_CONTAINERS`, which Gemini CLI 0.61 reads for nothing else.
---@return boolean
function H.gemini_needs_same_container_hint()
  for _, name in ipairs({ "SSH_CONNECTION", "VSCODE_REMOTE_CONTAINERS_SESSION", "REMOTE_CONTAINERS" }) do
    local value = H.env_before(name)
    if value and value ~= "" then
      return false
    end
  end
  local uv = vim.uv or vim.loop
  return uv.fs_stat("/.dockerenv") ~= nil or uv.fs_stat("/run/.containerenv") ~= nil
end

-- Variables this plugin set in Neovim's environment: name -> { before = value
-- or nil, set = the value set }.
H.env_saved = {}

function H.env_before(name)
  local saved = H.env_saved[name]
  if saved then
    return saved.before
  end
  return vim.env[name]
end

--- Puts the variables of `M.env(status)` into Neovim's own environment,
--- so that terminals Neovim starts (`:terminal`, jobs) attach to it, in
--- place of those set before (M.clear() takes them out again).
---@param status? table
function M.apply(status)
  local env = M.env(status)
  M.clear()
  for name, value in pairs(env) do
    H.env_saved[name] = { before = vim.env[name], set = value }
    vim.env[name] = value
  end
end

--- Whether M.apply() set any variable that is still to be taken out.
---@return boolean
function M.applied()
  return next(H.env_saved) ~= nil
end

--- Undoes M.apply(): each variable gets its value from before, unless
--- someone changed it since (then it is theirs).
function M.clear()
  for name, saved in pairs(H.env_saved) do
    if vim.env[name] == saved.set then
      vim.env[name] = saved.before
    end
  end
  H.env_saved = {}
end

return M
