--- `:Amp` subcommands of the server and its library: start, stop, restart,
--- status, log, build, install (lua/amp/core.lua runs the server).
local commands = require("amp.commands")
local H = {}

commands.register("start", {
  desc = "start the server",
  run = function()
    local amp = require("amp")
    if amp.is_running() then
      commands.info("amp: already running: " .. H.status_text():gsub("^amp: running, ", ""))
      return
    end
    local ok = amp.start()
    if ok then
      commands.info("amp: started: " .. H.status_text():gsub("^amp: running, ", ""))
    end
  end,
})

commands.register("stop", {
  desc = "stop the server and remove its lockfile",
  run = function()
    local amp = require("amp")
    if not amp.is_running() then
      commands.info("amp: the server is not running")
      return
    end
    if amp.stop() then
      commands.info("amp: server stopped")
    end
  end,
})

commands.register("restart", {
  desc = "stop and start the server",
  run = function()
    local ok, port = require("amp").restart()
    if ok then
      commands.info(("amp: server listening on 127.0.0.1:%s"):format(port))
    end
  end,
})

commands.register("build", {
  desc = "build the native library (cargo build --release) in the background",
  run = function()
    require("amp.build").run(function(ok)
      if ok then
        require("amp").after_build()
      end
    end)
  end,
})

commands.register("install", {
  desc = "download the prebuilt native library of this release (checksum-verified), else build it",
  run = function()
    require("amp.install").run(function(ok)
      if ok then
        require("amp").after_build()
      end
    end)
  end,
})

commands.register("status", {
  desc = "show the server's state",
  run = function()
    commands.info(H.status_text())
  end,
})

commands.register("log", {
  desc = "open the log file in a split",
  run = function(args)
    local path = require("amp").get_config().log_file
    if not vim.uv.fs_stat(path) then
      commands.warn(("amp: no log file yet at %s"):format(path))
      return
    end
    -- The name as one literal argument (no escaping, no expansion).
    vim.api.nvim_cmd({ cmd = "split", args = { path }, mods = args.smods, magic = { file = false } }, {})
    -- The plugin's own buffer: never watched or reviewed as an agent's
    -- change (lua/amp/buffer.lua; its path is one of the own files too).
    require("amp.buffer").mark_own(vim.api.nvim_get_current_buf())
    -- The newest lines are the ones wanted.
    vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(0), 0 })
  end,
})

-- Helpers -------------------------------------------------------------------

--- The status on one line, most important first (it is cut to fit the
--- screen: a longer message would stop Neovim at a hit-enter prompt, where
--- agent requests wait). Everything else: require("amp").status() and
--- :checkhealth amp.
function H.status_text()
  local status = require("amp").status()
  local parts = { status.running and "amp: running" or "amp: not running" }
  if status.running then
    local served = 0
    for _, id in ipairs(require("amp.core").agent_ids(status)) do
      local agent = status.agents[id]
      if agent.enabled then
        served = served + 1
        local n = tonumber(agent.clients) or 0
        if agent.port == nil and agent.socket == nil and agent.url then
          -- A client of a gateway (tap): whether it is connected.
          parts[#parts + 1] = ("%s %s"):format(id, n > 0 and "connected" or "not connected")
        else
          -- A TCP port, or Copilot CLI's Unix socket.
          local where = agent.port and (":" .. tostring(agent.port)) or tostring(agent.socket)
          parts[#parts + 1] = ("%s on %s, %d client%s"):format(id, where, n, n == 1 and "" or "s")
        end
      end
    end
    if served == 0 then
      parts[#parts + 1] = "no agent enabled (agents = { ... })"
    end
  end
  local err = status.last_error
  if err ~= nil and err ~= vim.NIL then
    -- (The error is a message of its own: one "amp: " prefix is enough.)
    parts[#parts + 1] = "last error: " .. tostring(err):gsub("^amp: ", "")
  end
  if status.running and status.workspace_folders and status.workspace_folders[1] then
    parts[#parts + 1] = vim.fn.fnamemodify(status.workspace_folders[1], ":~")
  end
  -- The library's version; none when it is not loaded.
  if type(status.version) == "string" then
    parts[#parts + 1] = "v" .. status.version
  end
  return table.concat(parts, ", ")
end
