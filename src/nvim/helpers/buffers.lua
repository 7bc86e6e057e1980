-- For src/nvim/buffers.rs: what an agent's read or edit of a buffer needs
-- (its snapshot, loading it, the edit's slices and undo step, writing it).

local api, fn = vim.api, vim.fn

-- One reused options table: no garbage per call on hot paths.
local buf_opts = { buf = 0 }
local H = ... -- every helper (see src/nvim/lua.rs), for those of other files
local M = {}

local function buf_option(buf, name)
  buf_opts.buf = buf
  return api.nvim_get_option_value(name, buf_opts)
end

--- Everything Rust needs to turn a buffer into the text `:w` would write,
--- but the text itself (read in bulk by src/nvim/bulk.rs): its size in
--- bytes, line count (0 for an empty buffer, which `:w` writes as nothing),
--- changedtick, 'modified', 'fileformat', 'endofline', 'fixendofline',
--- 'binary', 'readonly', 'buftype', whether the file changed on disk
--- while the buffer had unsaved changes (not settled yet), 'fileencoding',
--- 'bomb'.
function M.snapshot(buf)
  local count = api.nvim_buf_line_count(buf)
  local size = api.nvim_buf_get_offset(buf, count)
  if count == 1 and size <= 1 then
    -- One empty line, or no line at all ("--No lines in buffer--", which
    -- :w writes as nothing): wordcount() reads the memline's ML_EMPTY flag.
    -- line2byte() does not, once lines were deleted through the API (a
    -- reload of a file truncated to nothing).
    if api.nvim_buf_call(buf, function()
      return fn.wordcount().bytes == 0
    end) then
      count = 0
    end
  end
  return size,
    count,
    api.nvim_buf_get_changedtick(buf),
    buf_option(buf, "modified"),
    buf_option(buf, "fileformat"),
    buf_option(buf, "endofline"),
    buf_option(buf, "fixendofline"),
    buf_option(buf, "binary"),
    buf_option(buf, "readonly"),
    buf_option(buf, "buftype"),
    H.get_var(buf, "amp_disk_conflict") == true,
    buf_option(buf, "fileencoding"),
    buf_option(buf, "bomb")
end

--- The buffer for `name`, loading the file into a listed hidden buffer if
--- no buffer has it loaded (so an edit can be undone in the editor).
function M.load_buffer(names)
  local buf = H.find_buffer(names, false) or fn.bufadd(names[1])
  if not api.nvim_buf_is_loaded(buf) then
    -- With a swap file present, bufload() asks nothing: it loads the file
    -- and raises E325. The file's text is what the edit needs; the user is
    -- told, since that swap file may hold a crashed session's unsaved work
    -- (left alone, still recoverable).
    local ok, err = pcall(fn.bufload, buf)
    if not ok then
      if not (api.nvim_buf_is_loaded(buf) and tostring(err):find("E325", 1, true)) then
        error(err, 0)
      end
      -- Short: a message wider than the screen stops Neovim at a hit-enter
      -- prompt, where no agent request is answered.
      require("amp.notify").notify(
        ("amp: %s has a swap file; the agent edited the file on disk (see :recover)"):format(
          fn.fnamemodify(api.nvim_buf_get_name(buf), ":~:.")
        ),
        vim.log.levels.WARN
      )
    end
    vim.bo[buf].buflisted = true
  end
  return buf
end

--- Before an edit's hunks are set: false when the user changed the buffer
--- since `tick`; otherwise starts a new undo step (when there are hunks).
function M.apply_begin(buf, tick, has_hunks)
  if not api.nvim_buf_is_loaded(buf) then
    error("the buffer was closed during the edit")
  end
  if api.nvim_buf_get_changedtick(buf) ~= tick then
    return false
  end
  if has_hunks then
    -- The text from before the change, for :Amp review.
    local ok, review = pcall(require, "amp.review")
    if ok then
      review.record(buf)
    end
    -- Close the current undo block so this edit is its own undo step
    -- (:help undo-break); it must run with the buffer current.
    api.nvim_buf_call(buf, function()
      vim.cmd("let &g:undolevels = &g:undolevels")
    end)
  end
  return true
end

--- Before a later slice of an edit (src/nvim/buffers.rs apply_slice): false
--- when someone changed the buffer since `tick`; otherwise the slice joins
--- the edit's undo step (Neovim closes undo steps while it waits for keys).
function M.apply_continue(buf, tick)
  if not api.nvim_buf_is_loaded(buf) then
    error("the buffer was closed during the edit")
  end
  if api.nvim_buf_get_changedtick(buf) ~= tick then
    return false
  end
  api.nvim_buf_call(buf, function()
    pcall(vim.cmd, "undojoin")
  end)
  return true
end

--- After an edit's hunks were set (from Rust: src/nvim/buffers.rs): the
--- final end-of-line as the agent left it (nil: as it was); returns the new
--- changedtick.
function M.apply_end(buf, final_eol)
  if final_eol == true then
    vim.bo[buf].endofline = true
  elseif final_eol == false then
    vim.bo[buf].endofline = false
    -- The agent took the end-of-line away: without this :w would add it back.
    vim.bo[buf].fixendofline = false
  end
  return api.nvim_buf_get_changedtick(buf)
end

--- Whether the file of `buf` is still the one the server last saw
--- (`stamp`: mtime seconds, nanoseconds, size, inode).
function M.same_file(buf, stamp)
  local st = vim.uv.fs_stat(api.nvim_buf_get_name(buf))
  return st ~= nil
    and st.mtime.sec == stamp[1]
    and st.mtime.nsec == stamp[2]
    and st.size == stamp[3]
    and st.ino == stamp[4]
end

--- Runs a :write `command` in `buf`. `backup`: through a backup file
--- (:help backupcopy decides rename or copy), so a write that fails half-way
--- never leaves half a file (without this, files under /tmp or with
--- 'nowritebackup' are overwritten in place); off for a scratch file.
--- `skip_pre`: BufWritePre and FileWritePre do not run. Returns nil or the error.
local function run_write(buf, command, backup, skip_pre)
  local ok, err = pcall(api.nvim_buf_call, buf, function()
    local saved = { eventignore = vim.o.eventignore, writebackup = vim.o.writebackup, backupskip = vim.o.backupskip }
    if skip_pre then
      local ignore = saved.eventignore
      vim.o.eventignore = (ignore == "" and "" or ignore .. ",") .. "BufWritePre,FileWritePre,BufWriteCmd,FileWriteCmd"
    end
    vim.o.writebackup = backup
    vim.o.backupskip = ""
    local done, e = pcall(api.nvim_cmd, command, { output = false })
    for name, value in pairs(saved) do
      vim.o[name] = value
    end
    if not done then
      error(e, 0)
    end
  end)
  if not ok then
    return (tostring(err):gsub("^.-(E%d+:)", "%1"))
  end
end

-- 'fixendofline' ended the last line on disk: so does the buffer's text now
-- (readFile answers what the file holds).
local function eol_as_written(buf)
  local bo = vim.bo[buf]
  if bo.fixendofline and not bo.binary and not bo.endofline then
    bo.endofline = true
  end
end

--- Writes an agent's edit with Neovim's own :write, so 'bomb',
--- 'fileformat', 'fileencoding', 'endofline'/'fixendofline' and 'readonly'
--- are Neovim's business, exactly as for the user's :w. `autocmds`: "all",
--- "post" (no BufWritePre/FileWritePre: formatters leave the agent's text
--- alone, while BufWritePost still tells LSP and others) or "none".
---
--- With `tmp` (src/nvim/buffers.rs found that a rename keeps the file's
--- identity, as 'backupcopy' "auto" would) the bytes go to that temp file,
--- which the caller renames over the file and then calls mark_written().
--- Otherwise :write writes the file itself ('backupcopy' keeps hard links,
--- symlinks, owner, xattrs); `bang` when Neovim's record of the file could
--- not be brought up to date (see src/nvim/file_record.rs), so that no
--- "changed since reading it (y/n)?" prompt can stop the editor. Returns
--- nil or the error.
function M.write(buf, autocmds, tmp, bang)
  if tmp then
    if autocmds == "all" then
      api.nvim_exec_autocmds("BufWritePre", { buffer = buf, modeline = false })
    end
    return run_write(buf, {
      cmd = "write",
      args = { tmp },
      bang = true,
      mods = { silent = true, keepalt = true, noautocmd = true },
    }, false, false)
  end
  local err = run_write(buf, {
    cmd = "write",
    bang = bang,
    mods = { silent = true, noautocmd = autocmds == "none" },
  }, true, autocmds == "post")
  if not err then
    eol_as_written(buf)
  end
  return err
end

--- After the temp file of M.write was renamed over the buffer's file (and
--- Neovim's record of the file updated): not modified, and BufWritePost.
function M.mark_written(buf, autocmds)
  vim.bo[buf].modified = false
  eol_as_written(buf)
  if autocmds ~= "none" then
    pcall(api.nvim_exec_autocmds, "BufWritePost", { buffer = buf, modeline = false })
  end
end

--- Takes back the edit just applied (its own undo step) after a failed write.
function M.undo_edit(buf)
  pcall(api.nvim_buf_call, buf, function()
    api.nvim_cmd({ cmd = "undo", mods = { silent = true } }, { output = false })
  end)
end

--- After a clean buffer took the text its file now has on disk: the file's
--- format as read ('fileformat', 'bomb', 'fileencoding', 'endofline').
--- False when the user typed meanwhile.
function M.set_file_format(buf, tick, ff, bomb, fenc, eol)
  if not api.nvim_buf_is_valid(buf) or api.nvim_buf_get_changedtick(buf) ~= tick then
    return false
  end
  local bo = vim.bo[buf]
  if bo.fileformat ~= ff then
    bo.fileformat = ff
  end
  if bo.bomb ~= bomb then
    bo.bomb = bomb
  end
  if bo.fileencoding ~= fenc and not (fenc == "utf-8" and bo.fileencoding == "") then
    bo.fileencoding = fenc
  end
  if bo.endofline ~= eol then
    bo.endofline = eol
  end
  return true
end

function M.set_unmodified(buf)
  vim.bo[buf].modified = false
end

--- Where src/nvim/file_record.rs cannot record the write (a Neovim whose C
--- API is not verified): make Neovim record the file's new timestamp without
--- a "file changed" prompt. Known limit: the timestamp :w compares is only
--- updated by reading or writing, so the next :w asks once.
function M.checktime_quietly(buf)
  -- :checktime stores the new mtime before it fires FileChangedShell; a
  -- one-shot handler that chooses nothing keeps Neovim from asking about a
  -- write it already has. 'autoread' is off meanwhile: with it Neovim would
  -- reload instead (an extra undo step, breaking `u` back to the old text).
  local id = api.nvim_create_autocmd("FileChangedShell", {
    buffer = buf,
    once = true,
    callback = function()
      vim.v.fcs_choice = ""
    end,
  })
  pcall(api.nvim_buf_call, buf, function()
    local autoread = api.nvim_get_option_value("autoread", { scope = "local" })
    vim.opt_local.autoread = false
    api.nvim_cmd({ cmd = "checktime", args = { tostring(buf) }, mods = { silent = true, emsg_silent = true } }, {})
    if autoread == nil or autoread == -1 then
      api.nvim_cmd({ cmd = "set", args = { "autoread<" } }, {})
    else
      vim.opt_local.autoread = autoread
    end
  end)
  pcall(api.nvim_del_autocmd, id)
end

function M.changedtick(buf)
  return api.nvim_buf_get_changedtick(buf)
end

--- The changedtick of a loaded buffer; nil when it is gone or unloaded.
function M.loaded_changedtick(buf)
  if api.nvim_buf_is_valid(buf) and api.nvim_buf_is_loaded(buf) then
    return api.nvim_buf_get_changedtick(buf)
  end
  return nil
end

function M.global_option(name)
  return vim.go[name]
end

return M
