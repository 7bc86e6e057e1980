--- Where text for the agent can be typed when no `:Amp open` terminal runs:
--- the terminal the connected agent runs in. The shipping Amp CLI ignores
--- the protocol's `appendToPrompt` / `userSentMessage`, so `:Amp send`,
--- `prompt`, `ref` and `buffer` type the text into the agent's own
--- terminal, found from its connection:
---
---   1. the sockets connected to one of this Neovim's servers (ports from
---      `require("amp").status()`), from /proc/net/tcp and tcp6;
---   2. the processes holding them (/proc/<pid>/fd), kept when the
---      program is an agent's (`amp`, `claude`, `gemini`, `qwen`, `opencode`, or
---      the program of a `terminal.cmd`): a test client or a script that
---      holds a connection is no terminal to type into;
---   3. the agent's ancestors: a `:terminal` of this Neovim (its job), or a
---      tmux pane (the child of a "tmux: server" process, whose socket is
---      read from /proc/net/unix).
---
--- Steps 1-3 read /proc on a libuv worker thread, never on the main
--- thread; tmux runs as `vim.system` with an argument list (no shell):
--- `load-buffer` from stdin, then `paste-buffer -p` (a bracketed paste when
--- the program asked for one), then Enter for a message to submit.
--- Linux only (/proc); elsewhere no route is found. See `:help amp-send`.
local M = {}
local H = {}

--- The agents' program names (besides those of `terminal.cmd`).
M.programs = { "amp", "claude", "gemini", "qwen", "opencode" }

--- Runs on a worker thread (its own Lua state: no upvalues). `ports` and
--- `programs` are comma-separated; returns a JSON list of
--- `{ pid, program, nvim_child?, tmux_socket?, pane_pid? }`.
local function scan(ports_csv, programs_csv, nvim_pid)
  local uv = vim.uv or vim.loop
  local function read(path)
    local f = io.open(path, "rb")
    if not f then
      return nil
    end
    local text = f:read("*a")
    f:close()
    return text
  end
  local function basename(path)
    return (path or ""):match("([^/]*)$")
  end
  local ports, programs = {}, {}
  for p in ports_csv:gmatch("%d+") do
    ports[tonumber(p)] = true
  end
  for p in programs_csv:gmatch("[^,]+") do
    programs[p] = true
  end
  -- 1. Sockets connected to our ports on loopback (the servers bind
  -- 127.0.0.1 only), by inode.
  local loopback = { ["0100007F"] = true, ["0000000000000000FFFF00000100007F"] = true }
  local inodes, any = {}, false
  for _, name in ipairs({ "/proc/net/tcp", "/proc/net/tcp6" }) do
    local text = read(name) or ""
    for line in text:gmatch("[^\n]+") do
      local f = {}
      for field in line:gmatch("%S+") do
        f[#f + 1] = field
      end
      local addr, port = (f[3] or ""):match("^(%x+):(%x+)$")
      if addr and f[4] == "01" and loopback[addr] and ports[tonumber(port, 16)] and f[10] and f[10] ~= "0" then
        inodes["socket:[" .. f[10] .. "]"] = true
        any = true
      end
    end
  end
  if not any then
    return "[]"
  end
  -- 2. The processes that hold them (only our own user's are readable).
  local found = {}
  local proc = uv.fs_scandir("/proc")
  while proc do
    local name = uv.fs_scandir_next(proc)
    if not name then
      break
    end
    local pid = tonumber(name)
    if pid and pid ~= nvim_pid then
      local fds = uv.fs_scandir("/proc/" .. name .. "/fd")
      while fds do
        local fd = uv.fs_scandir_next(fds)
        if not fd then
          break
        end
        local target = uv.fs_readlink("/proc/" .. name .. "/fd/" .. fd)
        if target and inodes[target] then
          found[#found + 1] = pid
          break
        end
      end
    end
  end
  local function stat(pid)
    local text = read("/proc/" .. pid .. "/stat")
    -- "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    local ppid = text and text:match("%) %S+ (%d+)")
    return tonumber(ppid)
  end
  local function comm(pid)
    return ((read("/proc/" .. pid .. "/comm") or ""):gsub("\n$", ""))
  end
  local function program(pid)
    local argv = {}
    for arg in (read("/proc/" .. pid .. "/cmdline") or ""):gmatch("[^%z]+") do
      argv[#argv + 1] = arg
    end
    for _, candidate in ipairs({ comm(pid), basename(argv[1]), basename(argv[2]) }) do
      if programs[candidate] then
        return candidate
      end
    end
    return nil
  end
  local function tmux_socket(server_pid)
    local mine = {}
    local fds = uv.fs_scandir("/proc/" .. server_pid .. "/fd")
    while fds do
      local fd = uv.fs_scandir_next(fds)
      if not fd then
        break
      end
      local target = uv.fs_readlink("/proc/" .. server_pid .. "/fd/" .. fd) or ""
      local inode = target:match("^socket:%[(%d+)%]$")
      if inode then
        mine[inode] = true
      end
    end
    -- Num RefCount Protocol Flags Type St Inode Path; a listening socket
    -- has flag __SO_ACCEPTCON (00010000).
    for line in (read("/proc/net/unix") or ""):gmatch("[^\n]+") do
      local flags, inode, path = line:match("^%x+: %x+ %x+ (%x+) %x+ %x+%s+(%d+) (.+)$")
      if flags == "00010000" and mine[inode] and path:sub(1, 1) == "/" then
        return path
      end
    end
    return nil
  end
  -- 3. Where each agent runs.
  local out = {}
  for _, pid in ipairs(found) do
    local name = program(pid)
    if name then
      local entry = { pid = pid, program = name }
      local child, current = pid, stat(pid)
      for _ = 1, 64 do
        if not current or current <= 1 then
          break
        end
        if current == nvim_pid then
          entry.nvim_child = child
          break
        end
        if comm(current) == "tmux: server" then
          entry.pane_pid = child
          entry.tmux_socket = tmux_socket(current)
          break
        end
        child, current = current, stat(current)
      end
      out[#out + 1] = entry
    end
  end
  return vim.json.encode(out)
end

--- Finds where the connected agents run; `on_done(routes)` runs on the
--- main thread with a list of `{ kind = "job", chan, pid, program }` (a
--- terminal of this Neovim) or `{ kind = "tmux", socket, pane_pid, pid,
--- program }`, the most recently started agent first (the highest pid).
---@param on_done fun(routes: table[])
function M.find(on_done)
  local ports = H.ports()
  if #ports == 0 or vim.fn.has("linux") == 0 then
    return on_done({})
  end
  local work = vim.uv.new_work(scan, function(result)
    vim.schedule(function()
      local ok, found = pcall(vim.json.decode, result or "[]")
      on_done(H.routes(ok and type(found) == "table" and found or {}))
    end)
  end)
  work:queue(table.concat(ports, ","), table.concat(H.programs(), ","), vim.fn.getpid())
end

--- Types `text` as a bracketed paste into a route `M.find` gave, then
--- Enter when `submit`; `on_done(ok, err)` on the main thread.
---@param route table
---@param text string
---@param submit boolean
---@param on_done fun(ok: boolean, err?: string)
function M.deliver(route, text, submit, on_done)
  if route.kind == "job" then
    -- on_done once the paste (and the Enter) went: paste() may settle
    -- before it returns (no Enter) or later.
    local ok, err, settled
    ok, err = require("amp.terminal").paste(
      { agent = route.program, buf = route.buf, job = route.chan },
      text,
      submit,
      function()
        settled = true
        if ok ~= nil then
          on_done(ok, err)
        end
      end
    )
    if settled then
      on_done(ok, err)
    end
    return
  end
  H.tmux_paste(route, text, submit, on_done)
end

--- A short name of a route for messages: "tmux pane %3", "a terminal".
function M.describe(route)
  if route.kind == "tmux" then
    return ("%s in tmux pane %s"):format(route.program, route.pane or "?")
  end
  return ("%s in a terminal of this Neovim"):format(route.program)
end

-- Helpers -------------------------------------------------------------------

--- The ports of this Neovim's servers (Amp, Claude, Gemini).
function H.ports()
  local status = require("amp").status()
  if not status.running then
    return {}
  end
  local ports = {}
  if tonumber(status.port) then
    ports[#ports + 1] = tostring(status.port)
  end
  for _, agent in pairs(type(status.agents) == "table" and status.agents or {}) do
    if type(agent) == "table" and agent.enabled ~= false and tonumber(agent.port) then
      ports[#ports + 1] = tostring(agent.port)
    end
  end
  return ports
end

function H.programs()
  local names = vim.deepcopy(M.programs)
  local ok, config = pcall(function()
    return require("amp").get_config().terminal.cmd
  end)
  for _, cmd in pairs(ok and config or {}) do
    local name = type(cmd) == "table" and type(cmd[1]) == "string" and vim.fs.basename(cmd[1])
    if name and name ~= "" and not name:find(",", 1, true) and not vim.list_contains(names, name) then
      names[#names + 1] = name
    end
  end
  return names
end

--- The scan's entries as routes (terminal jobs looked up by pid).
function H.routes(found)
  local jobs = {}
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == "terminal" then
      local pid = vim.b[buf].terminal_job_pid
      if pid then
        jobs[pid] = buf
      end
    end
  end
  local routes = {}
  for _, entry in ipairs(found) do
    local buf = entry.nvim_child and jobs[entry.nvim_child]
    if buf then
      routes[#routes + 1] =
        { kind = "job", buf = buf, chan = vim.bo[buf].channel, pid = entry.pid, program = entry.program }
    elseif entry.tmux_socket and entry.pane_pid then
      routes[#routes + 1] = {
        kind = "tmux",
        socket = entry.tmux_socket,
        pane_pid = entry.pane_pid,
        pid = entry.pid,
        program = entry.program,
      }
    end
  end
  table.sort(routes, function(a, b)
    return a.pid > b.pid
  end)
  return routes
end

H.pastes = 0

--- `tmux` with `args` on the route's server; `on_done(result)` on the main thread.
function H.tmux(route, args, stdin, on_done)
  local cmd = { "tmux", "-S", route.socket }
  vim.list_extend(cmd, args)
  local ok, err = pcall(vim.system, cmd, { text = true, stdin = stdin }, function(result)
    vim.schedule(function()
      on_done(result)
    end)
  end)
  if not ok then
    vim.schedule(function()
      on_done({ code = -1, stderr = tostring(err), stdout = "" })
    end)
  end
end

function H.tmux_paste(route, text, submit, on_done)
  local function failed(step, result)
    local why = vim.trim((result.stderr or ""):match("[^\n]*") or "")
    on_done(false, ("tmux %s failed: %s"):format(step, why ~= "" and why or ("exit " .. tostring(result.code))))
  end
  H.tmux(route, { "list-panes", "-a", "-F", "#{pane_pid} #{pane_id}" }, nil, function(listed)
    if listed.code ~= 0 then
      return failed("list-panes", listed)
    end
    local pane
    for line in (listed.stdout or ""):gmatch("[^\n]+") do
      local pid, id = line:match("^(%d+) (%%%d+)$")
      if tonumber(pid) == route.pane_pid then
        pane = id
      end
    end
    if not pane then
      return on_done(false, "its tmux pane is gone")
    end
    route.pane = pane
    H.pastes = H.pastes + 1
    local name = ("amp-nvim-%d-%d"):format(vim.fn.getpid(), H.pastes)
    -- An ESC[201~ inside would end the bracketed paste early.
    text = text:gsub("\27%[201~", "")
    H.tmux(route, { "load-buffer", "-b", name, "-" }, text, function(loaded)
      if loaded.code ~= 0 then
        return failed("load-buffer", loaded)
      end
      H.tmux(route, { "paste-buffer", "-p", "-d", "-b", name, "-t", pane }, nil, function(pasted)
        if pasted.code ~= 0 then
          return failed("paste-buffer", pasted)
        end
        if not submit then
          return on_done(true)
        end
        -- Enter a moment later: a TUI may still be taking in the paste.
        vim.defer_fn(function()
          H.tmux(route, { "send-keys", "-t", pane, "Enter" }, nil, function(sent)
            if sent.code ~= 0 then
              return failed("send-keys", sent)
            end
            on_done(true)
          end)
        end, require("amp.terminal").submit_delay_ms)
      end)
    end)
  end)
end

return M
