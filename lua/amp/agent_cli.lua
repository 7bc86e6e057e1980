--- The agents' CLIs that `:Amp open` starts, for `:checkhealth amp`: each
--- one's command (`terminal.cmd.<agent>`) found on PATH or not, and the
--- version it reports. The versions are asked all at once, off the main
--- thread, within one bound.
local M = {}

--- Agents checked: what the user knows each as, and how to install it.
M.known = {
  qwen = { name = "Qwen Code", install = "npm install -g @qwen-code/qwen-code" },
  opencode = { name = "OpenCode", install = "npm install -g opencode-ai" },
  copilot = { name = "GitHub Copilot CLI", install = "npm install -g @github/copilot" },
  codex = { name = "Codex CLI", install = "npm install -g @openai/codex" },
}

--- How long `--version` may take, all of them together (ms).
M.timeout_ms = 10000

---@class amp.AgentCli
---@field agent string
---@field name string
---@field install string
---@field program string the command's program (terminal.cmd.<agent>[1])
---@field path? string where it was found
---@field version? string what `--version` reported
---@field error? string why `--version` gave nothing

--- Each known agent, in `:Amp open`'s order.
---@return amp.AgentCli[]
function M.probe()
  local cmds = require("amp").get_config().terminal.cmd
  local found, jobs = {}, {}
  for _, agent in ipairs(require("amp.config").terminal_agents) do
    local known = M.known[agent]
    local cmd = cmds[agent]
    if known and type(cmd) == "table" and type(cmd[1]) == "string" then
      local entry = { agent = agent, name = known.name, install = known.install, program = cmd[1] }
      if vim.fn.executable(cmd[1]) == 1 then
        entry.path = vim.fn.exepath(cmd[1])
        local ok, job = pcall(vim.system, { cmd[1], "--version" }, { text = true })
        if ok then
          jobs[entry] = job
        else
          entry.error = tostring(job)
        end
      end
      found[#found + 1] = entry
    end
  end
  local deadline = vim.uv.hrtime() + M.timeout_ms * 1e6
  for entry, job in pairs(jobs) do
    local left = math.max(1, math.floor((deadline - vim.uv.hrtime()) / 1e6))
    local res = job:wait(left)
    local text = vim.trim(res.stdout or "")
    -- (Copilot CLI ends its line with a full stop: "GitHub Copilot CLI 1.0.102.")
    local version = res.code == 0 and text:match("%d+%.%d+[%w%.%-]*%f[%.%s%z]") or nil
    if version then
      entry.version = version
    else
      entry.error = res.code == 124 and ("no answer within %d ms"):format(M.timeout_ms)
        or vim.trim((res.stderr or "") ~= "" and res.stderr or text):gsub("%s*\n.*", "")
    end
  end
  return found
end

--- The report, one line per agent.
---@param health table ok/warn/info functions (vim.health's)
function M.check(health)
  for _, e in ipairs(M.probe()) do
    if not e.path then
      health.info(
        ("%s (%s): `%s` is not on PATH; :Amp open %s needs it (%s, or set terminal.cmd.%s)"):format(
          e.agent,
          e.name,
          e.program,
          e.agent,
          e.install,
          e.agent
        )
      )
    elseif e.version then
      health.ok(("%s (%s) %s: %s"):format(e.agent, e.name, e.version, e.path))
    else
      health.warn(("%s (%s) at %s: `--version` failed: %s"):format(e.agent, e.name, e.path, e.error or "?"))
    end
  end
end

return M
