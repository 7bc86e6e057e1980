--- Messages of the plugin, each on one screen line.
---
--- A message wider than the screen (or with a newline) stops Neovim at a
--- hit-enter prompt, and while it waits there it runs no scheduled callback:
--- every agent request that needs the editor waits until the user presses
--- Enter. So the plugin never shows more than one line: newlines become
--- " | ", and the text is cut to what fits (`v:echospace`) with "…". The
--- whole message goes to the log file when it was cut. See
--- `:help amp-troubleshooting`.
local M = {}

local headless = vim.tbl_contains(vim.v.argv, "--headless")

--- `msg` on one line of at most `width` display cells (default: what
--- fits before the hit-enter prompt when a UI is attached).
---@param msg string
---@param width? integer
---@return string line, boolean cut
function M.one_line(msg, width)
  msg = tostring(msg)
  local line = msg:gsub("%s*\r?\n%s*", " | "):gsub("[%c]", " ")
  if not width then
    -- A `--headless` Neovim with no UI attached has no screen whose prompt
    -- could stop it: the whole line is kept. (A TUI's server runs with
    -- `--embed` and gets its UI a moment after start: cut as for the screen.)
    local unseen = headless and #vim.api.nvim_list_uis() == 0
    width = unseen and math.huge or math.max(vim.v.echospace, 20)
  end
  if vim.fn.strdisplaywidth(line) <= width then
    return line, line ~= msg
  end
  -- Cut by characters until it fits (display width, so wide characters count twice).
  local chars = vim.fn.strchars(line)
  local keep = math.min(chars, width - 1)
  local cut = vim.fn.strcharpart(line, 0, keep)
  while keep > 0 and vim.fn.strdisplaywidth(cut) > width - 1 do
    keep = keep - 1
    cut = vim.fn.strcharpart(line, 0, keep)
  end
  return cut .. "…", true
end

--- `vim.notify` with `msg` on one line; the whole text goes to the log if
--- it had to be cut.
---@param msg string
---@param level? integer vim.log.levels.*
function M.notify(msg, level)
  level = level or vim.log.levels.INFO
  local line, cut = M.one_line(msg)
  if cut then
    local native = package.loaded["amp.native"]
    if native and native.loaded() then
      native.call(
        "log",
        level >= vim.log.levels.ERROR and "error" or level >= vim.log.levels.WARN and "warn" or "info",
        msg
      )
    end
  end
  -- compat: Neovim 0.10's own vim.notify turns an error into a hit-enter prompt.
  require("amp.compat").notify(line, level)
end

--- A line of news (an agent connected, a proposal arrived) in the message
--- area and |:messages|, not a |vim.notify()| alert: news, not a problem.
--- Shown only while the screen has not scrolled for an earlier message
--- (one more line then would stop Neovim at a hit-enter prompt, where agent
--- requests wait); tried again a little later for 10 s, then dropped (the
--- statusline says it anyway).
---@param msg string
function M.news(msg, tries)
  tries = tries or 0
  if vim.fn.state("s") ~= "" or vim.api.nvim_get_mode().blocking then
    if tries < 100 then
      vim.defer_fn(function()
        M.news(msg, tries + 1)
      end, 100)
    end
    return
  end
  vim.api.nvim_echo({ { (M.one_line(msg)) } }, true, {})
end

--- A passing state ("downloading ..."): shown in the command line, cut to
--- one line, not kept in :messages, and drawn at once, so that the line
--- that follows replaces it instead of stacking under it (two lines in a
--- row make a hit-enter prompt).
---@param msg string
function M.progress(msg)
  local line = M.one_line(msg)
  vim.api.nvim_echo({ { line } }, false, {})
  if #vim.api.nvim_list_uis() > 0 then
    vim.cmd.redraw()
  end
end

return M
