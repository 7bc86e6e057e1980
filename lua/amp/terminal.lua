--- `:Amp open [agent]`: an agent's CLI in a terminal window of this Neovim,
--- started in the workspace with the environment that attaches it to this
--- Neovim, toggled by the same command; and delivery of `:Amp send` /
--- `prompt` / `ref` / `buffer` into that terminal (bracketed paste), for
--- agents whose protocol cannot put text into their prompt. See
--- `:help amp-terminal`.
local M = {}
local H = {}

--- The agents `:Amp open` knows by default (any other named in
--- `terminal.cmd` can be opened too: M.names()).
M.agents = require("amp.config").terminal_agents

--- Every agent `:Amp open` can start: those named in `terminal.cmd`.
---@return string[]
function M.names()
  return require("amp.config").agent_names(require("amp").get_config())
end

---@class amp.Terminal
---@field agent string
---@field buf integer the terminal buffer
---@field job integer its job (channel) id
---@field exited boolean the job has exited

---@type table<string, amp.Terminal>
H.terms = {}
--- The agents in the order their terminal was last opened, shown or
--- entered, the latest last: the one text goes to.
H.order = {}

--- Open the agent's terminal, or hide it when it is shown, or show it
--- again when hidden; a terminal whose job exited is started anew.
---@param agent? string default: `terminal.default`
---@param args? string[] arguments added to the agent's command when it starts
---@return boolean ok
---@return string|nil err
function M.toggle(agent, args)
  local config = require("amp").get_config().terminal
  agent = agent or config.default
  args = args or {}
  if not vim.list_contains(M.names(), agent) then
    return H.fail(
      ("amp: use one of %s (or name it in terminal.cmd); there is no agent '%s'"):format(
        table.concat(M.names(), ", "),
        agent
      )
    )
  end
  local term = H.terms[agent]
  if term and H.alive(term) then
    local win = H.window_of(term.buf)
    if #args > 0 then
      -- Arguments are for a start: a running agent is shown, not restarted.
      if not win then
        H.show(term, config)
      end
      require("amp.notify").notify(
        ("amp: exit %s first to start it with %s: it is running"):format(agent, table.concat(args, " ")),
        vim.log.levels.WARN
      )
      return false, "running"
    end
    if win then
      return H.hide(win)
    end
    H.show(term, config)
    return true, nil
  end
  return H.start(agent, config, term, args)
end

--- Arguments `:Amp open {agent}` completes after the agent: common ones of
--- each CLI (any other argument is passed as well).
M.args = {
  amp = { "threads", "continue", "new", "--mode", "--no-ide" },
  claude = { "--continue", "--resume", "--model", "--permission-mode", "--fork-session" },
  gemini = { "--resume", "latest", "--model", "--approval-mode" },
  qwen = { "--continue", "--resume", "--model", "--approval-mode" },
  copilot = { "--continue", "--resume", "--model", "--name" },
  opencode = { "--continue", "--session", "--model" },
  codex = { "resume", "--last", "--model", "--sandbox", "--ask-for-approval" },
}

--- Completion of `:Amp open {agent} ...`.
---@param agent string
---@return string[]
function M.suggested_args(agent)
  local config = require("amp").get_config().terminal
  if agent and agent:sub(1, 1) == "-" then
    agent = config.default
  end
  return M.args[agent] or {}
end

--- The agents whose command is executable (for completion).
---@return string[]
function M.available()
  local cmds = require("amp").get_config().terminal.cmd
  return vim.tbl_filter(function(agent)
    local cmd = cmds[agent]
    return type(cmd) == "table" and type(cmd[1]) == "string" and vim.fn.executable(cmd[1]) == 1
  end, M.names())
end

--- The running terminal text goes to: the one last opened, shown or
--- entered whose job still runs; nil when none runs.
---@return amp.Terminal|nil
function M.target()
  for i = #H.order, 1, -1 do
    local term = H.terms[H.order[i]]
    if term and H.alive(term) then
      return term
    end
  end
  return nil
end

--- The running terminal of `agent`, if any.
---@param agent string
---@return amp.Terminal|nil
function M.get(agent)
  local term = H.terms[agent]
  if term and H.alive(term) then
    return term
  end
  return nil
end

--- Type `text` into the terminal as one bracketed paste (ESC[200~ ...
--- ESC[201~), so the agent takes it as pasted text, newlines included,
--- and not as keys; `submit`: then Enter. An ESC[201~ inside the text
--- would end the paste early (and the rest would be keys): it is removed.
--- `on_settled()`, if given, runs once the Enter went too (what is typed
--- next must come after it).
---@param term amp.Terminal
---@param text string
---@param submit boolean
---@param on_settled? fun()
---@return boolean ok
---@return string|nil err
function M.paste(term, text, submit, on_settled)
  on_settled = on_settled or function() end
  text = text:gsub("\27%[201~", ""):gsub("\r\n", "\r"):gsub("\n", "\r")
  local ok, err = pcall(vim.api.nvim_chan_send, term.job, "\27[200~" .. text .. "\27[201~")
  if not ok then
    on_settled()
    return H.fail(("amp: could not type into the %s terminal: %s"):format(term.agent, err))
  end
  if submit then
    -- Enter a moment later: a TUI may still be taking in the paste.
    vim.defer_fn(function()
      if H.alive(term) then
        pcall(vim.api.nvim_chan_send, term.job, "\r")
      end
      on_settled()
    end, M.submit_delay_ms)
  else
    on_settled()
  end
  return true, nil
end

--- The smallest float `terminal.position = "float"` opens (columns, lines),
--- when the editor has room for it.
M.float_min = { width = 80, height = 20 }

--- Delay between a paste and the Enter that submits it (ms).
M.submit_delay_ms = 100

--- The environment a terminal of `agent` starts with: the variables that
--- attach it to this Neovim (lua/amp/agent_env.lua's env(), for the agent's
--- protocol). Neovim adds $NVIM itself. OpenCode's terminal gets its port
--- variables empty: with one set it dials that port without the token,
--- which is refused; without, it reads this Neovim's Claude lockfile and
--- sends the token (lua/amp/opencode.lua).
---@param agent string
---@return table<string, string>
function M.env(agent)
  local all = require("amp.agent_env").env()
  local names = ({
    claude = { "CLAUDE_CODE_SSE_PORT", "ENABLE_IDE_INTEGRATION" },
    gemini = { "GEMINI_CLI_IDE_SERVER_PORT", "GEMINI_CLI_IDE_WORKSPACE_PATH", "GEMINI_CLI_IDE_PID" },
    qwen = { "QWEN_CODE_IDE_SERVER_PORT", "QWEN_CODE_IDE_WORKSPACE_PATH" },
  })[agent] or {}
  local env = {}
  for _, name in ipairs(names) do
    env[name] = all[name]
  end
  if agent == "opencode" then
    env = require("amp.opencode").env()
  elseif agent == "codex" then
    env = vim.deepcopy(H.codex_run().env or {})
  end
  if next(env) then
    env.no_proxy, env.NO_PROXY = all.no_proxy, all.NO_PROXY
  end
  return env
end

-- Helpers -------------------------------------------------------------------

function H.start(agent, config, old, args)
  local mcp_args, mcp_env = H.mcp_for_run(agent)
  local own_args = agent == "codex" and H.codex_run().args or {}
  local cmd = vim.deepcopy(config.cmd[agent])
  -- Codex takes its `-c` overrides before a subcommand (`codex resume`).
  cmd = vim.list_extend(vim.list_extend(vim.list_extend(cmd, own_args), mcp_args or {}), args or {})
  if vim.fn.executable(cmd[1]) ~= 1 then
    return H.fail(("amp: set terminal.cmd.%s or install %s: `%s` is not on PATH"):format(agent, cmd[1], cmd[1]))
  end
  if not H.warn_unattached(agent) then
    if agent == "amp" then
      H.warn_shared_folder()
    elseif agent == "opencode" then
      require("amp.opencode").before_start(vim.fn.getcwd())
    end
  end
  local buf = vim.api.nvim_create_buf(false, true)
  local old_win = old and vim.api.nvim_buf_is_valid(old.buf) and H.window_of(old.buf)
  if old_win then
    vim.api.nvim_win_set_buf(old_win, buf)
    vim.api.nvim_set_current_win(old_win)
  else
    H.open_window(buf, config)
  end
  if old and vim.api.nvim_buf_is_valid(old.buf) then
    pcall(vim.api.nvim_buf_delete, old.buf, { force = true })
  end
  local term = { agent = agent, buf = buf, job = 0, exited = false }
  local opts = {
    cwd = vim.fn.getcwd(),
    on_exit = function()
      term.exited = true
    end,
  }
  local env = vim.tbl_extend("force", M.env(agent), mcp_env or {})
  if next(env) then -- (an empty table is refused: E475)
    opts.env = env
  end
  local ok, job = pcall(require("amp.compat").term_start, cmd, opts)
  if not ok or type(job) ~= "number" or job <= 0 then
    pcall(vim.api.nvim_buf_delete, buf, { force = true })
    return H.fail(("amp: could not start %s: %s"):format(cmd[1], ok and tostring(job) or job))
  end
  term.job = job
  H.terms[agent] = term
  H.touch(agent)
  vim.b[buf].amp_agent = agent
  vim.api.nvim_create_autocmd({ "BufEnter", "TermEnter" }, {
    buffer = buf,
    desc = "amp: text goes to the agent's terminal last entered",
    callback = function()
      H.touch(agent)
    end,
  })
  vim.cmd.startinsert()
  return true, nil
end

function H.show(term, config)
  H.open_window(term.buf, config)
  H.touch(term.agent)
  vim.cmd.startinsert()
end

function H.hide(win)
  local ok, err = pcall(vim.api.nvim_win_hide, win)
  if not ok then
    return H.fail("amp: cannot hide the agent's terminal: " .. tostring(err):gsub("^.-(E%d+)", "%1"))
  end
  return true, nil
end

-- A window of the current tab page that shows `buf`.
function H.window_of(buf)
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if vim.api.nvim_win_get_buf(win) == buf then
      return win
    end
  end
  return nil
end

-- Opens a window on `buf` as `terminal.position` and `terminal.size` say
-- and makes it the current one.
function H.open_window(buf, config)
  local position, size = config.position, config.size
  local function measure(total)
    local n = size < 1 and math.floor(total * size) or math.floor(size)
    return math.max(1, math.min(n, total))
  end
  if position == "float" then
    -- Never smaller than M.float_min (an agent's TUI needs room: the Amp
    -- CLI exits at 32x8 with "Terminal is too small"), unless the editor
    -- itself is smaller; the border takes 2 columns and lines.
    local room_w, room_h = vim.o.columns - 2, vim.o.lines - vim.o.cmdheight - 2
    local width = math.max(measure(vim.o.columns), math.min(M.float_min.width, room_w))
    local height = math.max(measure(room_h), math.min(M.float_min.height, room_h))
    width, height = math.max(1, math.min(width, room_w)), math.max(1, math.min(height, room_h))
    return vim.api.nvim_open_win(buf, true, {
      relative = "editor",
      width = width,
      height = height,
      row = math.floor((vim.o.lines - height) / 2) - 1,
      col = math.floor((vim.o.columns - width) / 2),
      border = "rounded",
      style = "minimal",
    })
  end
  local opts = { split = position == "bottom" and "below" or position == "top" and "above" or position, win = -1 }
  if position == "left" or position == "right" then
    opts.width = measure(vim.o.columns)
  else
    opts.height = measure(vim.o.lines - vim.o.cmdheight)
  end
  return vim.api.nvim_open_win(buf, true, opts)
end

function H.alive(term)
  return not term.exited and vim.api.nvim_buf_is_valid(term.buf) and vim.fn.jobwait({ term.job }, 0)[1] == -1
end

function H.touch(agent)
  for i = #H.order, 1, -1 do
    if H.order[i] == agent then
      table.remove(H.order, i)
    end
  end
  table.insert(H.order, agent)
end

-- The protocol each agent attaches with; any other gets the editor's
-- tools over MCP (agents.mcp).
H.protocols = {
  amp = "amp",
  claude = "claude",
  opencode = "claude",
  gemini = "gemini",
  qwen = "qwen",
  copilot = "copilot",
  codex = "codex",
}

-- This Neovim's status of the front-end `id`, when it serves it.
function H.front(id)
  local status = require("amp").status()
  local front = status.running and type(status.agents) == "table" and status.agents[id] or nil
  return type(front) == "table" and front.enabled ~= false and front or nil
end

-- Whether this Neovim serves the front-end `id` (on a port, or a socket).
function H.serves(id)
  local front = H.front(id)
  return front ~= nil and (front.port ~= nil or front.socket ~= nil)
end

-- What this run of Codex gets from the Codex front-end (src/codex/launch.rs):
-- `-c` overrides that install and trust our apply_patch hook for this run
-- only, and the environment (a private TMPDIR, the hook's socket).
function H.codex_run()
  local front = H.front("codex")
  return front and type(front.open) == "table" and front.open or {}
end

-- The MCP server for this run of `agent`, where its CLI takes one on its
-- command line (lua/amp/mcp): when this Neovim serves MCP and not the
-- agent's own protocol.
function H.mcp_for_run(agent)
  local own = H.protocols[agent]
  if not H.serves("mcp") or (own and H.serves(own)) then
    return nil, nil
  end
  return require("amp.mcp").run_args(agent)
end

-- An agent whose protocol this Neovim does not serve starts unattached: said
-- in one line.
function H.warn_unattached(agent)
  local amp = require("amp")
  local status = amp.status()
  local served = H.protocols[agent] or "mcp"
  if served == "mcp" or (not H.serves(served) and H.serves("mcp")) then
    if H.serves("mcp") then
      return false
    end
    served = "mcp"
  end
  if H.serves(served) then
    return false
  end
  local action = status.running and ("set agents.%s = true"):format(served) or "run :Amp start"
  local why = status.running and ("this Neovim serves no %s protocol"):format(served) or "the server is not running"
  require("amp.notify").notify(
    ("amp: %s to attach %s: it starts unattached, %s"):format(action, agent, why),
    vim.log.levels.WARN
  )
  return true
end

-- The Amp CLI connects by itself only when one live editor's lockfile has
-- its directory (no variable names the editor): when another has this
-- workspace too, say so, and how to pick this one.
function H.warn_shared_folder()
  local status = require("amp").status()
  local own = type(status.lockfile) == "string" and status.lockfile or nil
  if not own then
    return
  end
  local cwd = vim.uv.fs_realpath(vim.fn.getcwd()) or vim.fn.getcwd()
  local others = 0
  for name, kind in vim.fs.dir(vim.fs.dirname(own)) do
    local path = vim.fs.joinpath(vim.fs.dirname(own), name)
    if kind == "file" and name:match("^%d+%.json$") and path ~= own then
      local lock = H.read_json(path)
      local pid = lock and tonumber(lock.pid)
      if pid and pid ~= vim.fn.getpid() and vim.uv.kill(pid, 0) == 0 and H.has_folder(lock, cwd) then
        others = others + 1
      end
    end
  end
  if others > 0 then
    local who = others == 1 and "another editor serves" or ("%d other editors serve"):format(others)
    require("amp.notify").notify(
      ("amp: pick this Neovim in amp (ctrl+o, Connect to IDE): %s this folder too"):format(who),
      vim.log.levels.WARN
    )
  end
end

function H.read_json(path)
  local fd = io.open(path, "rb")
  if not fd then
    return nil
  end
  local text = fd:read("*a")
  fd:close()
  local ok, value = pcall(vim.json.decode, text)
  return ok and type(value) == "table" and value or nil
end

function H.has_folder(lock, cwd)
  if type(lock.workspaceFolders) ~= "table" then
    return false
  end
  for _, folder in ipairs(lock.workspaceFolders) do
    if type(folder) == "string" and (vim.uv.fs_realpath(folder) or folder) == cwd then
      return true
    end
  end
  return false
end

function H.fail(msg)
  require("amp.notify").notify(msg, vim.log.levels.ERROR)
  return false, msg
end

return M
