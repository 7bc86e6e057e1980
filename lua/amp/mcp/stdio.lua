--- The stdio entry point of Neovim's MCP server, for an agent's MCP
--- configuration: `nvim --clean -l <plugin>/lua/amp/mcp/stdio.lua`
--- (`require("amp").mcp_server_config()` and `:Amp mcp` give the exact
--- command). It is run by Neovim itself, as a plain Lua script: the plugin
--- is not loaded, only vim.uv (sockets) and vim.json are used.
---
--- It finds the Neovim that serves the agent (the discovery files
--- `<data>/amp/mcp/<port>.json` that Neovims with `agents.mcp` write):
---   1. $AMP_NVIM_MCP_PORT, set in the terminals of that Neovim (`:Amp open`);
---   2. a Neovim among this process's ancestors (the agent runs in its
---      terminal, even when the agent passes MCP servers no variables);
---   3. the most specific workspace folder containing the working directory.
--- Then it carries newline-delimited JSON-RPC from stdin to that server's
--- MCP Streamable HTTP endpoint (one POST per message, the bearer token of
--- the discovery file) and the answers and the session's event stream
--- back to stdout. When no Neovim is found, `initialize` is answered with
--- an error at once (one line, also on stderr); when the Neovim goes away,
--- the next request looks again (a restarted Neovim is found and a new
--- session made).
local uv = vim.uv or vim.loop
-- The script's arguments: the directory of the discovery files, as the
-- Neovim that gave this entry computed it (agents pass MCP servers few
-- variables: the MCP SDK's clients only HOME, PATH, SHELL, TERM, USER and
-- LOGNAME, so $XDG_DATA_HOME may not be here).
local ARGS = {}
for i, a in ipairs(vim.v.argv) do
  if a == "-l" then
    ARGS = vim.list_slice(vim.v.argv, i + 2)
    break
  end
end

local M = {}
local H = {}

--- The largest line read from stdin when the discovery file does not say
--- (`maxRequestBytes`, the server's `server.max_frame_bytes`).
M.default_max_line = 64 * 1024 * 1024
--- Discovery files bigger than this are not read (real ones are ~300 bytes).
M.max_discovery_bytes = 64 * 1024
--- An HTTP answer's head bigger than this is refused.
M.max_head_bytes = 64 * 1024
--- The error code of "no Neovim" and "Neovim refused" answers (JSON-RPC's
--- implementation-defined server errors).
M.server_error = -32000

H.server = nil ---@type { port: integer, token: string, pid: integer, file: string, max: integer }?
H.session = nil ---@type string?
H.init_line = nil ---@type string? the client's `initialize`, replayed for a new session
H.stream = nil -- the open event stream's TCP handle
H.done = false
H.writes = 0 -- stdout writes not finished yet
H.queued = 0 -- lines read, not handled yet
H.inflight = 0 -- messages sent to Neovim, not answered yet
--- After stdin ends, answers still on their way are waited for this long.
M.drain_ms = 30000

-- Output -------------------------------------------------------------------

function H.open_stdout()
  local kind = uv.guess_handle(1)
  if kind == "pipe" or kind == "tty" then
    local pipe = kind == "pipe" and uv.new_pipe(false) or uv.new_tty(1, false)
    if pipe and (kind == "tty" or pipe:open(1)) then
      return function(text)
        H.writes = H.writes + 1
        pipe:write(text, function()
          H.writes = H.writes - 1
        end)
      end
    end
  end
  return function(text)
    io.write(text)
    io.flush()
  end
end

H.write = nil

--- One JSON-RPC message to the client, on a line of its own.
function H.send(text)
  H.write((text:gsub("[\r\n]+$", "")) .. "\n")
end

function H.error_reply(id, message)
  if id == nil then
    return
  end
  H.send(vim.json.encode({ jsonrpc = "2.0", id = id, error = { code = M.server_error, message = message } }))
end

--- A one-line note on stderr (agents show or log a server's stderr).
function H.note(message)
  uv.fs_write(2, "amp.nvim mcp: " .. message .. "\n")
end

-- Discovery ----------------------------------------------------------------

--- Where discovery files live (as src/mcp_server/protocol.rs says).
function M.discovery_dir(env)
  env = env or vim.env
  local base = env.AMP_DATA_HOME
  if not base or base == "" then
    local xdg = env.XDG_DATA_HOME
    if xdg and xdg:sub(1, 1) == "/" then
      base = xdg
    else
      local home = env.HOME or uv.os_homedir()
      if not home or home == "" then
        return nil
      end
      base = home .. "/.local/share"
    end
  end
  return base .. "/amp/mcp"
end

--- Whether `stat` is of a file or directory of this user that no one else
--- may write (discovery files hold where the agent's requests and token go).
function H.ours(stat)
  if not stat or stat.uid ~= uv.getuid() then
    return false
  end
  local group_writes = math.floor(stat.mode / 16) % 2 == 1 -- 0020
  local others_write = math.floor(stat.mode / 2) % 2 == 1 -- 0002
  return not group_writes and not others_write
end

function H.read_file(path)
  local stat = uv.fs_lstat(path)
  if not stat or stat.type ~= "file" or stat.size > M.max_discovery_bytes or not H.ours(stat) then
    return nil
  end
  local fd = io.open(path, "rb")
  if not fd then
    return nil
  end
  local text = fd:read(M.max_discovery_bytes)
  fd:close()
  return text
end

--- A live Neovim's discovery file, checked; nil otherwise.
function M.read_discovery(path)
  local text = H.read_file(path)
  local ok, d = pcall(vim.json.decode, text or "")
  if not ok or type(d) ~= "table" then
    return nil
  end
  local port, token, pid = tonumber(d.port), d.authToken, tonumber(d.pid)
  if not port or port < 1 or port > 65535 or type(token) ~= "string" or token == "" or not pid then
    return nil
  end
  if uv.kill(pid, 0) ~= 0 then
    return nil -- that Neovim is gone
  end
  local folders = {}
  for _, f in ipairs(type(d.workspaceFolders) == "table" and d.workspaceFolders or {}) do
    if type(f) == "string" then
      folders[#folders + 1] = uv.fs_realpath(f) or f
    end
  end
  local max = tonumber(d.maxRequestBytes) or M.default_max_line
  return { port = port, token = token, pid = pid, folders = folders, file = path, max = max }
end

--- This process's ancestors' pids, nearest first (read before anything
--- runs in a callback: vim.api is not allowed there).
function H.ancestors()
  local out, pid = {}, uv.os_getppid and uv.os_getppid() or nil
  for _ = 1, 64 do
    if not pid or pid <= 1 then
      break
    end
    out[#out + 1] = pid
    local ok, info = pcall(vim.api.nvim_get_proc, pid)
    pid = ok and type(info) == "table" and info.ppid or nil
  end
  return out
end

H.parents = {}

--- The Neovim to talk to (see the top of this file), or nil and why.
---@return table|nil server
---@return string|nil why
function M.find(env, cwd, parents)
  env, cwd, parents = env or vim.env, cwd or uv.cwd(), parents or H.parents
  local given = ARGS[1]
  local dir = (given and uv.fs_stat(given)) and given or M.discovery_dir(env)
  if not dir then
    return nil, "no data directory: set $HOME, $XDG_DATA_HOME or $AMP_DATA_HOME"
  end
  local dir_stat = uv.fs_stat(dir)
  if dir_stat and not H.ours(dir_stat) then
    return nil, ("%s is not a private directory of yours: no Neovim is looked for there"):format(dir)
  end
  local wanted = tonumber(env.AMP_NVIM_MCP_PORT or "")
  if wanted then
    local d = M.read_discovery(("%s/%d.json"):format(dir, wanted))
    if d then
      return d
    end
  end
  local live = {}
  for name, kind in vim.fs.dir(dir) do
    if kind == "file" and name:match("^%d+%.json$") then
      live[#live + 1] = M.read_discovery(dir .. "/" .. name)
    end
  end
  for _, pid in ipairs(parents) do
    for _, d in ipairs(live) do
      if d.pid == pid then
        return d
      end
    end
  end
  local real = uv.fs_realpath(cwd) or cwd
  local best, best_len = nil, -1
  for _, d in ipairs(live) do
    for _, folder in ipairs(d.folders) do
      local inside = real == folder or real:sub(1, #folder + 1) == (folder:gsub("/$", "") .. "/")
      if inside and #folder > best_len then
        best, best_len = d, #folder
      end
    end
  end
  if best then
    return best
  end
  return nil, ("no Neovim serves %s: start Neovim there with agents = { mcp = true } (see :help amp-mcp)"):format(real)
end

-- HTTP ---------------------------------------------------------------------

--- Decodes a chunked body incrementally: feed(bytes) -> data, ended.
function H.dechunker()
  local buf, out = "", {}
  local need = nil -- bytes of the current chunk still to come (with its CRLF)
  local ended = false
  return function(bytes)
    buf = buf .. bytes
    while not ended do
      if not need then
        local eol = buf:find("\r\n", 1, true)
        if not eol then
          break
        end
        local size = tonumber(buf:sub(1, eol - 1):match("^%x+"), 16)
        if not size then
          ended = true
          break
        end
        buf = buf:sub(eol + 2)
        if size == 0 then
          ended = true
          break
        end
        need = size
      end
      if #buf < need + 2 then
        break
      end
      out[#out + 1] = buf:sub(1, need)
      buf = buf:sub(need + 3)
      need = nil
    end
    local data = table.concat(out)
    out = {}
    return data, ended
  end
end

--- One request on a connection of its own. `on_head(status, headers)` when
--- the head arrives, `on_data(bytes)` for the body as it comes,
--- `on_end(err)` once (err: the connection failed before an answer).
function H.request(server, method, body, extra, callbacks)
  -- The callbacks run on the main loop, in order (libuv's callbacks may
  -- not use vim.env or vim.api).
  local cb = {}
  for name, f in pairs(callbacks) do
    cb[name] = function(...)
      local args = vim.F.pack_len(...)
      vim.schedule(function()
        f(vim.F.unpack_len(args))
      end)
    end
  end
  local tcp = uv.new_tcp()
  local head_done, buf, status, headers, dechunk = false, "", nil, {}, nil
  local finished = false
  local function finish(err)
    if finished then
      return
    end
    finished = true
    if not tcp:is_closing() then
      tcp:close()
    end
    cb.on_end(err)
  end
  local lines = {
    ("%s /mcp HTTP/1.1"):format(method),
    ("Host: 127.0.0.1:%d"):format(server.port),
    "Authorization: Bearer " .. server.token,
    "Accept: application/json, text/event-stream",
    "Connection: close",
  }
  if H.session then
    lines[#lines + 1] = "Mcp-Session-Id: " .. H.session
  end
  for _, h in ipairs(extra or {}) do
    lines[#lines + 1] = h
  end
  if body then
    lines[#lines + 1] = "Content-Type: application/json"
    lines[#lines + 1] = "Content-Length: " .. #body
  end
  local request = table.concat(lines, "\r\n") .. "\r\n\r\n" .. (body or "")
  tcp:connect("127.0.0.1", server.port, function(err)
    if err then
      return finish(err)
    end
    tcp:write(request)
    tcp:read_start(function(rerr, chunk)
      if rerr or not chunk then
        return finish(head_done and nil or (rerr or "the connection closed before an answer"))
      end
      if head_done then
        local data, ended = chunk, false
        if dechunk then
          data, ended = dechunk(chunk)
        end
        if #data > 0 then
          cb.on_data(data)
        end
        if ended then
          finish(nil)
        end
        return
      end
      buf = buf .. chunk
      local split = buf:find("\r\n\r\n", 1, true)
      if not split then
        if #buf > M.max_head_bytes then
          finish("the answer's head is too big")
        end
        return
      end
      local head, rest = buf:sub(1, split - 1), buf:sub(split + 4)
      buf = nil
      status = tonumber(head:match("^HTTP/1%.%d (%d%d%d)"))
      for name, value in head:gmatch("\r\n([^:\r\n]+):%s*([^\r\n]*)") do
        headers[name:lower()] = value
      end
      head_done = true
      if (headers["transfer-encoding"] or ""):lower():find("chunked", 1, true) then
        dechunk = H.dechunker()
      end
      cb.on_head(status or 0, headers)
      if #rest > 0 then
        local data, ended = rest, false
        if dechunk then
          data, ended = dechunk(rest)
        end
        if #data > 0 then
          cb.on_data(data)
        end
        if ended then
          finish(nil)
        end
      end
    end)
  end)
end

--- POSTs one message; `done(status, headers, body)` or `done(nil, err)`.
function H.post(server, text, done)
  local status, headers, parts = nil, nil, {}
  H.inflight = H.inflight + 1
  local answered = done
  done = function(...)
    H.inflight = H.inflight - 1
    answered(...)
  end
  H.request(server, "POST", text, nil, {
    on_head = function(s, h)
      status, headers = s, h
    end,
    on_data = function(data)
      parts[#parts + 1] = data
    end,
    on_end = function(err)
      if not status then
        return done(nil, err or "no answer")
      end
      done(status, headers, table.concat(parts))
    end,
  })
end

-- The session's event stream -------------------------------------------------

function H.open_stream()
  if H.stream_open or H.done or not H.server or not H.session then
    return
  end
  H.stream_open = true
  local server, session = H.server, H.session
  local pending = ""
  local ok_status = false
  H.request(server, "GET", nil, nil, {
    on_head = function(status)
      ok_status = status == 200
    end,
    on_data = function(data)
      if not ok_status then
        return
      end
      pending = pending .. data
      -- Events end with a blank line; each "data:" line is a message.
      while true do
        local stop = pending:find("\n\n", 1, true)
        if not stop then
          break
        end
        local event = pending:sub(1, stop - 1)
        pending = pending:sub(stop + 2)
        local lines = {}
        for line in (event .. "\n"):gmatch("([^\n]*)\n") do
          local value = line:match("^data: ?(.*)$")
          if value then
            lines[#lines + 1] = value
          end
        end
        if #lines > 0 then
          H.send(table.concat(lines, "\n"))
        end
      end
    end,
    on_end = function()
      H.stream_open = false
      -- Reopened while this session lasts (a stream that could not open
      -- is tried again by the next answer).
      if ok_status and not H.done and H.session == session then
        vim.defer_fn(H.open_stream, 1000)
      end
    end,
  })
end

-- Messages -----------------------------------------------------------------

--- Finds a Neovim and opens a session there (replaying the client's
--- `initialize`); `done(err)`.
H.connecting = nil ---@type function[]?

function H.connect(done, replay)
  if H.connecting then
    table.insert(H.connecting, done)
    return
  end
  H.connecting = { done }
  local function finish(err)
    local waiting = H.connecting or {}
    H.connecting = nil
    for _, cb in ipairs(waiting) do
      cb(err)
    end
  end
  local server, why = M.find()
  if not server then
    H.server = nil
    return finish(why)
  end
  H.server, H.session = server, nil
  if not (replay and H.init_line) then
    return finish(nil)
  end
  H.post(server, H.init_line, function(status, headers, body)
    if status ~= 200 then
      return finish(H.refusal(status, headers, body))
    end
    H.session = headers["mcp-session-id"]
    H.post(server, '{"jsonrpc":"2.0","method":"notifications/initialized"}', function()
      H.open_stream()
      finish(nil)
    end)
  end)
end

function H.refusal(status, _, body)
  if not status then
    return ("Neovim (127.0.0.1:%d) did not answer: %s"):format(H.server and H.server.port or 0, tostring(body))
  end
  local first = (body or ""):match("^[^\r\n]*") or ""
  return ("Neovim answered HTTP %d: %s"):format(status, first:sub(1, 200))
end

--- Forwards one message to the server; `retried`: after a new session.
function H.forward(line, id, retried)
  local function go()
    H.post(H.server, line, function(status, headers, body)
      if status == 200 then
        if body and body ~= "" then
          H.send(body)
        end
        H.open_stream()
      elseif status == 202 then
        return
      elseif (status == nil or status == 404) and not retried then
        -- Neovim is gone (a new one may serve the folder), or it forgot
        -- the session: look again and start a new session.
        H.server = nil
        return H.forward(line, id, true)
      else
        local why = H.refusal(status, headers, body)
        H.note(why)
        H.error_reply(id, why)
      end
    end)
  end
  if H.server and (H.session or not H.init_line) then
    return go()
  end
  H.connect(function(err)
    if err then
      H.note(err)
      return H.error_reply(id, err)
    end
    go()
  end, true)
end

function H.handle(line)
  local ok, msg = pcall(vim.json.decode, line)
  if not ok or type(msg) ~= "table" then
    H.send(vim.json.encode({
      jsonrpc = "2.0",
      id = vim.NIL,
      error = { code = -32700, message = "invalid JSON: " .. tostring(msg):sub(1, 200) },
    }))
    return
  end
  local id = msg.id
  if id == vim.NIL then
    id = nil
  end
  if msg.method == "initialize" then
    H.init_line, H.session = line, nil
    H.connect(function(err)
      if err then
        H.note(err)
        return H.error_reply(id, err)
      end
      H.post(H.server, line, function(status, headers, body)
        if status ~= 200 then
          local why = H.refusal(status, headers, body)
          H.note(why)
          return H.error_reply(id, why)
        end
        H.session = headers["mcp-session-id"]
        H.send(body)
      end)
    end)
    return
  end
  if msg.method == "notifications/initialized" and H.session then
    H.forward(line, nil, true)
    H.open_stream()
    return
  end
  H.forward(line, id, false)
end

-- stdin --------------------------------------------------------------------

function H.read_stdin()
  local stdin = uv.new_pipe(false)
  if not stdin:open(0) then
    H.note("stdin is not a pipe")
    H.done = true
    return
  end
  -- The line being read, in pieces (joined once, at its end); past the
  -- limit only its first and last bytes are kept (where a request's id
  -- is) and the rest is dropped as it comes.
  local parts, size, skipping, head, tail = {}, 0, false, "", ""
  local function max()
    return H.server and H.server.max or M.default_max_line
  end
  local function take(piece)
    if skipping then
      tail = (tail .. piece):sub(-256)
      return
    end
    parts[#parts + 1], size = piece, size + #piece
    if size > max() then
      local text = table.concat(parts)
      skipping, head, tail, parts, size = true, text:sub(1, 256), text:sub(-256), {}, 0
    end
  end
  stdin:read_start(function(err, chunk)
    if err or not chunk then
      H.done = true
      return
    end
    local from = 1
    while true do
      local nl = chunk:find("\n", from, true)
      if not nl then
        take(chunk:sub(from))
        break
      end
      take(chunk:sub(from, nl - 1))
      from = nl + 1
      if skipping then
        local id = H.id_in(head) or H.id_in(tail)
        vim.schedule(function()
          H.too_big(id)
        end)
      else
        local line = table.concat(parts):gsub("\r$", "")
        if line:find("%S") then
          H.queued = H.queued + 1
          vim.schedule(function()
            H.queued = H.queued - 1
            H.handle(line)
          end)
        end
      end
      parts, size, skipping = {}, 0, false
    end
  end)
end

--- The `"id"` of a request in a piece of its text (numbers and strings).
function H.id_in(text)
  local n = text:match('"id"%s*:%s*(%-?%d+)')
  if n then
    return tonumber(n)
  end
  return text:match('"id"%s*:%s*"([^"\\]*)"')
end

--- A message over the limit: answered (with its id when found) and dropped.
function H.too_big(id)
  local max = H.server and H.server.max or M.default_max_line
  local why = ("the message is over %d bytes (server.max_frame_bytes): it was not sent to Neovim"):format(max)
  H.note(why)
  H.send(vim.json.encode({ jsonrpc = "2.0", id = id or vim.NIL, error = { code = -32600, message = why } }))
end

function M.main()
  H.write = H.open_stdout()
  H.parents = H.ancestors()
  H.read_stdin()
  while not H.done do
    vim.wait(1000, function()
      return H.done
    end, 20)
  end
  -- The answers still on their way and being written go out; the
  -- session ends.
  vim.wait(M.drain_ms, function()
    return H.queued == 0 and H.inflight == 0 and not H.connecting
  end, 10)
  if H.server and H.session then
    local ended = false
    H.request(H.server, "DELETE", nil, nil, {
      on_head = function() end,
      on_data = function() end,
      on_end = function()
        ended = true
      end,
    })
    vim.wait(1000, function()
      return ended
    end, 10)
  end
  vim.wait(5000, function()
    return H.writes == 0
  end, 10)
end

-- Run as a script (`nvim -l`: `...` are its arguments); required as a
-- module (`...` is its name), it only defines M.
if ... ~= "amp.mcp.stdio" then
  M.main()
end

return M
