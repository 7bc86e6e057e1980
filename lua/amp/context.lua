--- What the agent sees of the editor: autocmds that tell the native server
--- when the selection or the visible files may have changed. The callbacks
--- only call into the library; it reads the cursor and lines and leaves all
--- encoding, throttling and sending to its own threads.
local M = {}

local AUGROUP = "AmpEditorContext"

local SELECTION_EVENTS = {
  "CursorMoved",
  "CursorMovedI",
  "ModeChanged",
  "BufEnter",
  "WinEnter",
  "TextChanged",
  "TextChangedI",
}

local VISIBLE_EVENTS = {
  "BufWinEnter",
  "BufWinLeave",
  "BufEnter",
  "WinEnter",
  "WinNew",
  "TabEnter",
  "BufFilePost",
}

--- Starts reporting. `lib` is the loaded native module.
---@param lib table
function M.attach(lib)
  local selection_changed = lib.selection_changed
  local visible_files_changed = lib.visible_files_changed
  local group = vim.api.nvim_create_augroup(AUGROUP, { clear = true })
  -- The native functions take no arguments: never pass the autocmd's table.
  vim.api.nvim_create_autocmd(SELECTION_EVENTS, {
    group = group,
    desc = "amp: report the selection to connected agents",
    callback = function()
      selection_changed()
    end,
  })
  vim.api.nvim_create_autocmd(VISIBLE_EVENTS, {
    group = group,
    desc = "amp: report the visible files to connected agents",
    callback = function()
      visible_files_changed()
    end,
  })
  -- A closing window is still listed while WinClosed runs: look afterwards.
  vim.api.nvim_create_autocmd("WinClosed", {
    group = group,
    desc = "amp: report the visible files after a window closes",
    callback = function()
      vim.schedule(function()
        visible_files_changed()
        selection_changed()
      end)
    end,
  })
end

--- Stops reporting. Idempotent.
function M.detach()
  pcall(vim.api.nvim_del_augroup_by_name, AUGROUP)
end

return M
