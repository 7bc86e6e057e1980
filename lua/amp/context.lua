--- What the agent sees of the editor: autocmds that tell the native server
--- when the selection or the visible files may have changed. The callbacks
--- only call into the library; it reads the cursor and lines and leaves all
--- encoding, throttling and sending to its own threads.
---
--- The per-keystroke events (cursor moves and text changes) are
--- buffer-local autocmds, added to each buffer the first time it is entered:
--- Neovim runs those without matching a file pattern, which halves what an
--- autocmd costs per keystroke. Outside Visual mode their callback calls
--- `cursor_moved(name)`, which reads the cursor and its line through the C
--- API; the callback knows the buffer's file name from a cache kept up to
--- date by the events that change it and whether Visual mode is on from
--- ModeChanged, so it asks Neovim for nothing itself.
local M = {}

local AUGROUP = "AmpEditorContext"
local api = vim.api

--- Rare events after which the whole selection is read again.
local SELECTION_EVENTS = { "ModeChanged", "BufEnter", "WinEnter" }

--- Per-keystroke events, as buffer-local autocmds.
local KEYSTROKE_EVENTS = { "CursorMoved", "CursorMovedI", "TextChanged", "TextChangedI" }

local VISIBLE_EVENTS = {
  "BufWinEnter",
  "BufWinLeave",
  "BufEnter",
  "WinEnter",
  "WinNew",
  "TabEnter",
  "BufFilePost",
}

--- Attached state; replaced on every attach.
local state = {
  group = nil,
  --- buffer number -> its file name, or false when it shows no file.
  file_names = {},
  --- buffer number -> true once its buffer-local autocmds exist.
  hooked = {},
  --- Whether the current mode is Visual or Select (kept by ModeChanged).
  visual = false,
}

--- Visual and Select modes, by the first byte of a mode name: v V CTRL-V s S CTRL-S.
local VISUAL_BYTES = { [118] = true, [86] = true, [22] = true, [115] = true, [83] = true, [19] = true }

local function is_visual(mode)
  return VISUAL_BYTES[mode:byte(1) or 0] == true
end

local file_of = require("amp.buffer").file_of

--- The file a buffer shows, or false (lua/amp/buffer.lua).
local function file_name_of(buf)
  return file_of(buf) or false
end

--- Gives `buf` its buffer-local keystroke autocmds (once) and refreshes the
--- cached file name.
local function hook_buffer(buf, on_keystroke)
  state.file_names[buf] = file_name_of(buf)
  if state.hooked[buf] or not api.nvim_buf_is_valid(buf) then
    return
  end
  state.hooked[buf] = true
  api.nvim_create_autocmd(KEYSTROKE_EVENTS, {
    group = state.group,
    buffer = buf,
    desc = "amp: report the cursor or selection to connected agents",
    callback = on_keystroke,
  })
end

--- Starts reporting. `lib` is the loaded native module.
---@param lib table
function M.attach(lib)
  local selection_changed = lib.selection_changed
  local visible_files_changed = lib.visible_files_changed
  local cursor_moved = lib.cursor_moved
  local file_names = {}
  state = {
    group = api.nvim_create_augroup(AUGROUP, { clear = true }),
    file_names = file_names,
    hooked = {},
    visual = is_visual(api.nvim_get_mode().mode),
  }
  local group = state.group

  -- The hot path: a table lookup and one native call (which reads the
  -- cursor and its line itself).
  local function on_keystroke(ev)
    local name = file_names[ev.buf]
    if not name then
      return
    end
    if state.visual then
      selection_changed()
    else
      cursor_moved(name)
    end
  end

  -- The native functions take no arguments: never pass the autocmd's table.
  api.nvim_create_autocmd(SELECTION_EVENTS, {
    group = group,
    desc = "amp: report the selection to connected agents",
    callback = function(ev)
      if ev.event == "ModeChanged" then
        state.visual = is_visual(vim.v.event.new_mode or api.nvim_get_mode().mode)
      else
        hook_buffer(api.nvim_get_current_buf(), on_keystroke)
      end
      selection_changed()
    end,
  })
  -- What makes a buffer a file, or another file, changes rarely; the cache
  -- follows it. (`:help` and `:terminal` set 'buftype' without OptionSet,
  -- before FileType and TermOpen.)
  api.nvim_create_autocmd({ "BufNew", "BufAdd", "BufFilePost", "BufReadPost", "BufWinEnter", "FileType", "TermOpen" }, {
    group = group,
    desc = "amp: remember which file a buffer shows",
    callback = function(ev)
      file_names[ev.buf] = file_name_of(ev.buf)
    end,
  })
  api.nvim_create_autocmd("OptionSet", {
    group = group,
    pattern = "buftype",
    desc = "amp: remember which buffers show files",
    callback = function()
      local buf = api.nvim_get_current_buf()
      file_names[buf] = file_name_of(buf)
      selection_changed()
    end,
  })
  -- Buffer-local autocmds go with a wiped-out buffer (not with :bdelete).
  api.nvim_create_autocmd("BufWipeout", {
    group = group,
    desc = "amp: forget a wiped-out buffer",
    callback = function(ev)
      file_names[ev.buf] = nil
      state.hooked[ev.buf] = nil
    end,
  })
  api.nvim_create_autocmd(VISIBLE_EVENTS, {
    group = group,
    desc = "amp: report the visible files to connected agents",
    callback = function()
      visible_files_changed()
    end,
  })
  -- A closing window is still listed while WinClosed runs: look afterwards.
  api.nvim_create_autocmd("WinClosed", {
    group = group,
    desc = "amp: report the visible files after a window closes",
    callback = function()
      vim.schedule(function()
        visible_files_changed()
        selection_changed()
      end)
    end,
  })
  hook_buffer(api.nvim_get_current_buf(), on_keystroke)
end

--- Stops reporting (its buffer-local autocmds go with the group). Idempotent.
function M.detach()
  pcall(api.nvim_del_augroup_by_name, AUGROUP)
  state.file_names, state.hooked = {}, {}
end

return M
