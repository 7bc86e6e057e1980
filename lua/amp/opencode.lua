--- OpenCode (`:Amp open opencode`, |amp-opencode|): a client of the Claude
--- front-end. OpenCode 1.18 has two ways to find an editor: a port variable
--- (`CLAUDE_CODE_SSE_PORT` or `OPENCODE_EDITOR_SSE_PORT`), which it dials
--- with no token at all, and otherwise `~/.claude/ide/*.lock` (the home
--- directory's, whatever `CLAUDE_CONFIG_DIR` says): the lockfile whose
--- workspace folder holding its directory is the longest, then the newest,
--- dialled with the lockfile's token. This Neovim refuses a client without
--- the token (one policy for every agent), so OpenCode's terminal gets the
--- port variables empty and takes the lockfile route.
local M = {}
local H = {}

--- The variables by which OpenCode would dial a port without the token.
M.port_variables = { "CLAUDE_CODE_SSE_PORT", "OPENCODE_EDITOR_SSE_PORT" }

--- OpenCode's terminal environment: the port variables empty (OpenCode
--- counts an empty one as unset), over whatever Neovim's own has.
---@return table<string, string>
function M.env()
  local env = {}
  for _, name in ipairs(M.port_variables) do
    env[name] = ""
  end
  return env
end

--- Before OpenCode starts in `cwd`: makes this Neovim's lockfile the one
--- it takes, or says in one line why it may not. This Neovim's lockfile
--- becomes the newest (OpenCode's tie-break); another live editor whose
--- lockfile holds `cwd` as closely is named in a warning, as it may win
--- when OpenCode reconnects.
---@param cwd string
function M.before_start(cwd)
  local status = require("amp").status()
  local claude = status.running and type(status.agents) == "table" and status.agents.claude or nil
  local own = type(claude) == "table" and claude.lockfile or nil
  if type(own) ~= "string" then
    return
  end
  local dir = vim.fs.joinpath(vim.uv.os_homedir() or "", ".claude", "ide")
  if H.real(vim.fs.dirname(own)) ~= H.real(dir) then
    return H.warn(
      ("amp: opencode reads ~/.claude/ide only, this Neovim's lockfile is in %s (CLAUDE_CONFIG_DIR): it starts unattached"):format(
        vim.fs.dirname(own)
      )
    )
  end
  local score = H.score(H.read_json(own), cwd)
  if score == 0 then
    return H.warn(
      ("amp: opencode starts in %s, which this Neovim's workspace does not hold: it starts unattached"):format(cwd)
    )
  end
  local others = 0
  for name, kind in vim.fs.dir(dir) do
    local path = vim.fs.joinpath(dir, name)
    if kind == "file" and name:match("^%d+%.lock$") and path ~= own then
      local lock = H.read_json(path)
      local pid = lock and tonumber(lock.pid)
      if pid and pid ~= vim.fn.getpid() and vim.uv.kill(pid, 0) == 0 and H.score(lock, cwd) >= score then
        others = others + 1
      end
    end
  end
  -- The newest among equals: OpenCode takes this one.
  local sec, usec = vim.uv.gettimeofday()
  local now = sec + usec / 1e6
  vim.uv.fs_utime(own, now, now)
  if others > 0 then
    local who = others == 1 and "another editor serves" or ("%d other editors serve"):format(others)
    H.warn(
      ("amp: opencode attaches to this Neovim, but %s this folder too: it may take that one when it reconnects"):format(
        who
      )
    )
  end
end

--- OpenCode's score of a lockfile for `cwd`: the length of the longest
--- workspace folder holding `cwd` (0: none does, or not a WebSocket lockfile).
function H.score(lock, cwd)
  if type(lock) ~= "table" or (lock.transport ~= nil and lock.transport ~= "ws") then
    return 0
  end
  local best = 0
  for _, folder in ipairs(type(lock.workspaceFolders) == "table" and lock.workspaceFolders or {}) do
    if type(folder) == "string" and H.holds(folder, cwd) then
      best = math.max(best, #vim.fs.normalize(folder))
    end
  end
  return best
end

-- Whether `dir` is `path` or one of its ancestors (as path.relative does it: no symlinks resolved).
function H.holds(dir, path)
  dir, path = vim.fs.normalize(dir), vim.fs.normalize(path)
  return path == dir or vim.startswith(path, dir == "/" and "/" or dir .. "/")
end

function H.real(path)
  return vim.uv.fs_realpath(path) or path
end

function H.read_json(path)
  local fd = io.open(path, "rb")
  if not fd then
    return nil
  end
  local text = fd:read(64 * 1024)
  fd:close()
  local ok, value = pcall(vim.json.decode, text or "")
  return ok and type(value) == "table" and value or nil
end

function H.warn(msg)
  require("amp.notify").notify(msg, vim.log.levels.WARN)
end

return M
