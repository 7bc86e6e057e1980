--- Neovim as an MCP server for any agent (`agents.mcp`, |amp-mcp|): the
--- stdio entry point an agent's MCP configuration names once, the snippets
--- `:Amp mcp` shows, and the per-run arguments `:Amp open` passes to CLIs
--- that take an MCP server on their command line.
local M = {}
local H = {}

--- The name agents know the server by (their tools become e.g.
--- `mcp__neovim__read_file`).
M.name = "neovim"

--- The stdio entry point: Neovim itself running lua/amp/mcp/stdio.lua,
--- told where the discovery files are (agents pass their MCP servers few
--- variables, often not $XDG_DATA_HOME).
---@return { command: string, args: string[] }
function M.server_config()
  local root = require("amp.native").root()
  local script = vim.fs.joinpath(root, "lua", "amp", "mcp", "stdio.lua")
  return { command = H.nvim(), args = { "--clean", "-l", script, M.discovery_dir() } }
end

--- Where Neovims write their MCP discovery files (src/mcp_server/protocol.rs):
--- $AMP_DATA_HOME/amp/mcp, $XDG_DATA_HOME/amp/mcp, ~/.local/share/amp/mcp.
---@return string
function M.discovery_dir()
  local base = vim.env.AMP_DATA_HOME
  if not base or base == "" then
    local xdg = vim.env.XDG_DATA_HOME
    base = (xdg and xdg:sub(1, 1) == "/") and xdg or vim.fs.joinpath(vim.uv.os_homedir() or "~", ".local", "share")
  end
  return vim.fs.joinpath(base, "amp", "mcp")
end

--- The Neovim program to name: the one on PATH when it is this one (a
--- stable name across upgrades), else this one's path; an AppImage's own
--- file rather than its temporary mount.
function H.nvim()
  if vim.env.APPIMAGE and vim.env.APPIMAGE ~= "" then
    return vim.env.APPIMAGE
  end
  local progpath = vim.v.progpath
  local on_path = vim.fn.exepath("nvim")
  if on_path ~= "" and vim.uv.fs_realpath(on_path) == vim.uv.fs_realpath(progpath) then
    return on_path
  end
  return progpath
end

--- `{ "mcpServers": { "neovim": { command, args } } }` (Claude Code,
--- Cursor, Gemini CLI, Kiro, Copilot CLI with `type`), as JSON text.
---@param extra? table fields added to the server's entry
function M.json(extra)
  local entry = vim.tbl_extend("force", M.server_config(), extra or {})
  return vim.json.encode({ mcpServers = { [M.name] = entry } })
end

--- A TOML string (basic string, escaped).
function H.toml_string(s)
  return '"' .. s:gsub("\\", "\\\\"):gsub('"', '\\"'):gsub("\n", "\\n") .. '"'
end

--- Codex's `[mcp_servers.neovim]` table. A review waits for you: the tool
--- timeout is raised from Codex's 60 s.
function M.toml()
  local c = M.server_config()
  local args = vim.tbl_map(H.toml_string, c.args)
  return table.concat({
    ("[mcp_servers.%s]"):format(M.name),
    "command = " .. H.toml_string(c.command),
    "args = [" .. table.concat(args, ", ") .. "]",
    "tool_timeout_sec = 600",
  }, "\n")
end

--- JSON pretty enough to paste (vim.json has no indentation).
function H.pretty(value, indent)
  indent = indent or ""
  if type(value) == "table" and not vim.islist(value) then
    local keys = vim.tbl_keys(value)
    table.sort(keys)
    local inner = indent .. "  "
    local parts = {}
    for _, k in ipairs(keys) do
      parts[#parts + 1] = inner .. vim.json.encode(k) .. ": " .. H.pretty(value[k], inner)
    end
    return "{\n" .. table.concat(parts, ",\n") .. "\n" .. indent .. "}"
  end
  return vim.json.encode(value)
end

--- The lines `:Amp mcp` shows.
---@return string[]
function M.lines()
  local c = M.server_config()
  local status = require("amp").status()
  local mcp = status.running and type(status.agents) == "table" and status.agents.mcp or {}
  local lines = {
    "Neovim's MCP server for any agent (:help amp-mcp). Add it once to the agent's MCP",
    "configuration; it finds the Neovim serving the agent's folder each time.",
    "",
    "JSON (Claude Code .mcp.json, Cursor ~/.cursor/mcp.json, Gemini CLI settings.json,",
    "Kiro ~/.kiro/settings/mcp.json, Copilot CLI ~/.copilot/mcp-config.json):",
    "",
  }
  vim.list_extend(lines, vim.split(H.pretty({ mcpServers = { [M.name] = c } }), "\n"))
  vim.list_extend(lines, { "", "TOML (Codex ~/.codex/config.toml):", "" })
  vim.list_extend(lines, vim.split(M.toml(), "\n"))
  vim.list_extend(lines, { "", "Command line:", "", "  " .. table.concat(vim.tbl_map(H.shell, H.argv(c)), " ") })
  if mcp.enabled then
    vim.list_extend(lines, {
      "",
      ("This Neovim serves it at %s (a new port and token each start: prefer the stdio entry)."):format(mcp.url),
    })
  else
    vim.list_extend(lines, {
      "",
      "This Neovim does not serve it: setup({ agents = { mcp = true } }), then :Amp restart.",
    })
  end
  return lines
end

function H.argv(c)
  return vim.list_extend({ c.command }, c.args)
end

--- A word for a POSIX shell.
function H.shell(word)
  if word:match("^[%w%%+,./:=@_-]+$") then
    return word
  end
  return "'" .. word:gsub("'", "'\\''") .. "'"
end

--- `:Amp mcp`: the snippets in a scratch buffer (a split; no message,
--- so no hit-enter prompt).
function M.show()
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, M.lines())
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = "wipe"
  pcall(vim.api.nvim_buf_set_name, buf, "amp://mcp")
  require("amp.buffer").mark_own(buf)
  vim.api.nvim_open_win(buf, true, { split = "below", win = -1, height = math.min(#M.lines() + 1, 30) })
  return buf
end

--- What `:Amp open {agent}` adds to a start of `agent` so it gets this
--- server for that run, where its CLI takes one: arguments and
--- environment (nil, nil for the others).
---@param agent string
---@return string[]|nil args
---@return table<string, string>|nil env
function M.run_args(agent)
  local c = M.server_config()
  local per_run = {
    -- Claude Code: --mcp-config takes JSON text.
    claude = function()
      return { "--mcp-config", M.json() }
    end,
    -- Codex: -c overrides of config.toml keys.
    codex = function()
      local args = vim.tbl_map(H.toml_string, c.args)
      return {
        "-c",
        ("mcp_servers.%s.command=%s"):format(M.name, H.toml_string(c.command)),
        "-c",
        ("mcp_servers.%s.args=[%s]"):format(M.name, table.concat(args, ",")),
        "-c",
        ("mcp_servers.%s.tool_timeout_sec=600"):format(M.name),
      }
    end,
    -- Copilot CLI: --additional-mcp-config takes JSON text (or @file).
    copilot = function()
      return { "--additional-mcp-config", M.json({ type = "local", tools = { "*" } }) }
    end,
    -- Goose: `goose session --with-extension "<command line>"`.
    goose = function()
      return { "--with-extension", table.concat(vim.tbl_map(H.shell, H.argv(c)), " ") }
    end,
    -- OpenCode has no flag; it merges JSON from OPENCODE_CONFIG_CONTENT.
    opencode = function()
      local config = { mcp = { [M.name] = { type = "local", command = H.argv(c), enabled = true } } }
      return {}, { OPENCODE_CONFIG_CONTENT = vim.json.encode(config) }
    end,
  }
  local make = per_run[agent]
  if not make then
    return nil, nil
  end
  return make()
end

return M
