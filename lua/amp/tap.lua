--- The tap gateway (agents.tap, :help amp-tap): the one-line news of the
--- native tap client (`User AmpTap`), and `:Amp tap [pair|status]`.
---
--- Pairing never takes the keyboard uninvited: when the gateway asks to
--- pair, the user is told in one line to run `:Amp tap pair`, which asks
--- for the code with |vim.ui.input()|.
local M = {}

--- `User AmpTap`: `data = { message, error?, pair? }`.
function M.on_event(data)
  data = type(data) == "table" and data or {}
  local message = type(data.message) == "string" and data.message or ""
  if message == "" then
    return
  end
  local notify = require("amp.notify")
  if data.error then
    -- A warning, after the autocommand: an error message inside one gets
    -- a second line ("Error detected while processing ..."), a hit-enter
    -- prompt.
    vim.schedule(function()
      notify.notify("amp: tap: " .. message, vim.log.levels.WARN)
    end)
  else
    notify.news("amp: tap: " .. message)
  end
end

--- The tap client's status table, or nil when it is not running.
function M.status()
  local status = require("amp").status()
  local tap = status.running and type(status.agents) == "table" and status.agents.tap or nil
  if type(tap) == "table" and tap.enabled then
    return tap
  end
  return nil
end

--- The state in one line.
function M.state_line()
  local tap = M.status()
  if not tap then
    local status = require("amp").status()
    if not status.running then
      return "amp: tap: the server is not running"
    end
    return "amp: tap: off (set agents.tap = true; :help amp-tap)"
  end
  return ("amp: tap: %s"):format(tap.state or "?")
end

--- Hands `code` to the connection waiting for it; ok, or the error.
---@param code string
---@return boolean ok
---@return string|nil err
function M.submit(code)
  local _, err = require("amp.native").call("tap_pair", code)
  if err then
    -- The message only: its first line, without Lua's prefixes.
    local line = tostring(err):match("^[^\n]*"):gsub("^runtime error: ", ""):gsub("^amp: ", "")
    return false, "amp: tap: " .. line
  end
  return true
end

--- `:Amp tap pair [code]`: the code the Copilot session shows, asked for
--- with vim.ui.input when not given.
---@param code? string
function M.pair(code)
  local notify = require("amp.notify")
  local function give(typed)
    if typed == nil or vim.trim(typed) == "" then
      return -- cancelled
    end
    local ok, err = M.submit(typed)
    if ok then
      notify.news("amp: tap: pairing code sent")
    else
      notify.notify(err or "amp: tap: pairing failed", vim.log.levels.ERROR)
    end
  end
  if code and code ~= "" then
    give(code)
    return
  end
  local tap = M.status()
  if not tap then
    notify.notify(M.state_line(), vim.log.levels.WARN)
    return
  end
  vim.ui.input({ prompt = "Pairing code shown in Copilot: " }, give)
end

return M
