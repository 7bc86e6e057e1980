-- Editor reads and writes for the Rust side (src/editor/*.rs), compiled once
-- by src/editor/nvim.rs. They run on the main thread and only touch editor
-- state; Rust does the rest off the main thread.
--
-- Why Lua: nvim-oxi 0.6 never frees the strings that cross its API wrappers
-- (its String's Drop is a no-op), so buffer names, lines and option values
-- read through it leak. Lua strings are garbage collected, and LuaJIT runs
-- these small functions fast.
local api, fn = vim.api, vim.fn
-- getregionpos() and vim.str_byteindex() as 0.11 has them, on 0.10 too
-- (loaded on first use: not on the start-up path).
local compat = setmetatable({}, {
  __index = function(self, key)
    local mod = require("amp.compat")
    setmetatable(self, { __index = mod })
    return mod[key]
  end,
})
local H = {}

-- One reused options table: no garbage per call on hot paths.
local buf_opts = { buf = 0 }
local function buf_option(buf, name)
  buf_opts.buf = buf
  return api.nvim_get_option_value(name, buf_opts)
end

--- The file a buffer shows, or nil (lua/amp/buffer.lua: the one rule).
H.file_of = require("amp.buffer").file_of

--- The cursor or Visual selection of the current window, if it shows a file.
--- Returns name, cursor_only, then either (row, col, line) or a list of
--- regions { start_line, start_col, end_line, end_col } (1-based lines, byte
--- columns; end column inclusive as getregionpos() gives it) and the lines
--- from the first to the last region line, and the first line number.
function H.selection()
  local buf = api.nvim_get_current_buf()
  local name = H.file_of(buf)
  if not name then
    return nil
  end
  local mode = api.nvim_get_mode().mode
  local c = mode:byte(1)
  local kind = (c == 118 or c == 115) and "v" -- v, s
    or (c == 86 or c == 83) and "V" -- V, S
    or (c == 22 or c == 19) and "\22" -- CTRL-V, CTRL-S
    or nil
  if not kind then
    local cursor = api.nvim_win_get_cursor(0)
    return name, true, cursor[1], cursor[2], api.nvim_get_current_line()
  end
  local segments = compat.getregionpos(fn.getpos("v"), fn.getpos("."), { type = kind, eol = true })
  if #segments == 0 then
    return nil
  end
  local first = segments[1][1][2]
  local last = segments[#segments][2][2]
  local lines = api.nvim_buf_get_lines(buf, first - 1, last, false)
  local regions = {}
  if kind == "\22" then
    for i, seg in ipairs(segments) do
      regions[i] = { seg[1][2], seg[1][3], seg[2][2], seg[2][3] }
    end
  else
    local s, e = segments[1][1], segments[#segments][2]
    regions[1] = { s[2], s[3], e[2], e[3] }
  end
  return name, false, regions, lines, first
end

--- Names of the files shown in the current tab page's (non-floating)
--- windows, in window order, with duplicates.
function H.visible_files()
  local out = {}
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if api.nvim_win_get_config(win).relative == "" then
      local name = H.file_of(api.nvim_win_get_buf(win))
      if name then
        out[#out + 1] = name
      end
    end
  end
  return out
end

--- The names of all loaded buffers that have one (what `find_buffer` can
--- find with `loaded_only`), and the files among them (see `file_of`).
function H.loaded_buffers()
  local names, files = {}, {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(buf) then
      local name = api.nvim_buf_get_name(buf)
      if name ~= "" then
        names[#names + 1] = name
      end
      files[#files + 1] = H.file_of(buf)
    end
  end
  return names, files
end

--- The buffer (loaded or not, or only loaded) named one of `names`.
function H.find_buffer(names, loaded_only)
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if not loaded_only or api.nvim_buf_is_loaded(buf) then
      local name = api.nvim_buf_get_name(buf)
      for _, want in ipairs(names) do
        if name ~= "" and name == want then
          return buf
        end
      end
    end
  end
  return nil
end

--- Everything Rust needs to turn a buffer into the text `:w` would write,
--- but the text itself (read in bulk by src/editor/bulk.rs): its size in
--- bytes, line count (0 for an empty buffer, which `:w` writes as nothing),
--- changedtick, 'modified', 'fileformat', 'endofline', 'fixendofline',
--- 'binary', 'readonly', 'buftype', whether the file changed on disk
--- while the buffer had unsaved changes (not settled yet), 'fileencoding',
--- 'bomb'.
function H.snapshot(buf)
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
function H.load_buffer(names)
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
function H.apply_begin(buf, tick, has_hunks)
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
function H.apply_continue(buf, tick)
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

--- After an edit's hunks were set (from Rust: src/editor/bulk.rs): the
--- final end-of-line as the agent left it (nil: as it was); returns the new
--- changedtick.
function H.apply_end(buf, final_eol)
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
function H.same_file(buf, stamp)
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
--- With `tmp` (src/editor/buffers.rs found that a rename keeps the file's
--- identity, as 'backupcopy' "auto" would) the bytes go to that temp file,
--- which the caller renames over the file and then calls mark_written().
--- Otherwise :write writes the file itself ('backupcopy' keeps hard links,
--- symlinks, owner, xattrs); `bang` when Neovim's record of the file could
--- not be brought up to date (see src/editor/file_record.rs), so that no
--- "changed since reading it (y/n)?" prompt can stop the editor. Returns
--- nil or the error.
function H.write(buf, autocmds, tmp, bang)
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

--- After the temp file of H.write was renamed over the buffer's file (and
--- Neovim's record of the file updated): not modified, and BufWritePost.
function H.mark_written(buf, autocmds)
  vim.bo[buf].modified = false
  eol_as_written(buf)
  if autocmds ~= "none" then
    pcall(api.nvim_exec_autocmds, "BufWritePost", { buffer = buf, modeline = false })
  end
end

--- Takes back the edit just applied (its own undo step) after a failed write.
function H.undo_edit(buf)
  pcall(api.nvim_buf_call, buf, function()
    api.nvim_cmd({ cmd = "undo", mods = { silent = true } }, { output = false })
  end)
end

--- After a clean buffer took the text its file now has on disk: the file's
--- format as read ('fileformat', 'bomb', 'fileencoding', 'endofline').
--- False when the user typed meanwhile.
function H.set_file_format(buf, tick, ff, bomb, fenc, eol)
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

function H.set_unmodified(buf)
  vim.bo[buf].modified = false
end

--- Without src/editor/file_record.rs: make Neovim record the file's new
--- timestamp without a "file changed" prompt. Known limit: the timestamp :w compares
--- is only updated by reading or writing, so the next :w asks once.
function H.checktime_quietly(buf)
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

--- Every vim.diagnostic entry of buffers named in `prefixes` (a file or a
--- directory; nil: all), with the lines their positions index.
function H.diagnostics(prefixes)
  local function under(name)
    if not prefixes then
      return true
    end
    for _, p in ipairs(prefixes) do
      if name == p or (name:sub(1, #p) == p and (p:sub(-1) == "/" or name:byte(#p + 1) == 47)) then
        return true
      end
    end
    return false
  end
  local out, names = {}, {}
  for _, d in ipairs(vim.diagnostic.get(nil)) do
    local buf = d.bufnr
    if names[buf] == nil then
      names[buf] = api.nvim_buf_is_valid(buf) and api.nvim_buf_get_name(buf) or ""
    end
    local name = names[buf]
    if name ~= "" and under(name) then
      local loaded = api.nvim_buf_is_loaded(buf)
      local lnum, end_lnum = d.lnum or 0, d.end_lnum or d.lnum or 0
      local line, end_line, offset, end_offset = "", "", 0, 0
      if loaded then
        local count = api.nvim_buf_line_count(buf)
        if lnum < count then
          line = api.nvim_buf_get_lines(buf, lnum, lnum + 1, false)[1] or ""
          offset = api.nvim_buf_get_offset(buf, lnum)
        end
        if end_lnum == lnum then
          end_line, end_offset = line, offset
        elseif end_lnum < count then
          end_line = api.nvim_buf_get_lines(buf, end_lnum, end_lnum + 1, false)[1] or ""
          end_offset = api.nvim_buf_get_offset(buf, end_lnum)
        end
      end
      -- The fields of core::editor::RawDiagnostic (src/nvim/diagnostics.rs).
      out[#out + 1] = {
        path = name,
        lnum = lnum,
        col = d.col or 0,
        end_lnum = end_lnum,
        end_col = d.end_col or d.col or 0,
        severity = d.severity or 1,
        message = d.message or "",
        source = d.source,
        line = line,
        end_line = end_line,
        line_offset = offset,
        end_line_offset = end_offset,
      }
    end
  end
  return out
end

--- Shows `path` in the current tab page (its window if one shows it, else
--- :edit) and selects lines/columns (1-based; columns in UTF-16 units).
function H.open_path(path, start_line, start_col, end_line, end_col)
  local shown
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if api.nvim_buf_get_name(api.nvim_win_get_buf(win)) == path then
      shown = win
      break
    end
  end
  if shown then
    api.nvim_set_current_win(shown)
  else
    -- Never through a command line: vim.cmd runs each line of its text as a
    -- command, so a file name with a newline would run the rest (fnameescape
    -- does not help). nvim_cmd passes the name as one argument, taken
    -- literally (no %, #, ` or wildcard expansion).
    api.nvim_cmd({ cmd = "edit", args = { path }, magic = { file = false } }, {})
  end
  if not start_line then
    return
  end
  local mode = api.nvim_get_mode().mode:sub(1, 1)
  if mode == "v" or mode == "V" or mode == "\22" then
    vim.cmd("normal! \27")
  end
  local function pos(line, col)
    local count = api.nvim_buf_line_count(0)
    line = math.max(1, math.min(line, count))
    if not col then
      return { line, 0 }
    end
    local text = api.nvim_buf_get_lines(0, line - 1, line, false)[1] or ""
    local ok, byte = pcall(compat.byteindex_utf16, text, math.max(col - 1, 0))
    return { line, ok and math.min(byte, #text) or 0 }
  end
  api.nvim_win_set_cursor(0, pos(start_line, start_col))
  if end_line then
    vim.cmd("normal! " .. ((start_col or end_col) and "v" or "V"))
    api.nvim_win_set_cursor(0, pos(end_line, end_col))
  end
  vim.cmd("normal! zv")
end

--- The text of a file buffer if it is no bigger than `max_bytes`:
--- name, text, changedtick (nil when not a file or too big).
function H.document(buf, max_bytes)
  if buf == 0 then
    buf = api.nvim_get_current_buf()
  end
  if not api.nvim_buf_is_valid(buf) or not api.nvim_buf_is_loaded(buf) then
    return nil
  end
  local name = H.file_of(buf)
  if not name then
    return nil
  end
  if api.nvim_buf_get_offset(buf, api.nvim_buf_line_count(buf)) > max_bytes then
    return nil, buf
  end
  return name, table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), "\n"), api.nvim_buf_get_changedtick(buf), buf
end

-- The virt_text of an annotated line, rebuilt in place for each line
-- (Neovim copies it): drawing leaves little garbage behind.
local FIRST = { " ", "AmpAnnotationSeparator" }
local BETWEEN = { " · ", "AmpAnnotationSeparator" }
local chunks, title_chunks = {}, {}
local mark_opts = { virt_text = chunks, virt_text_pos = "eol", hl_mode = "combine" }

--- Fills `chunks` with the `count` titles that start at `at` in `text`, one
--- per line; returns where the text goes on.
local function read_titles(text, at, count)
  for i = 1, count do
    local newline = text:find("\n", at, true)
    title_chunks[i] = title_chunks[i] or { "", "AmpAnnotation" }
    title_chunks[i][1] = text:sub(at, newline - 1)
    chunks[2 * i - 1] = i == 1 and FIRST or BETWEEN
    chunks[2 * i] = title_chunks[i]
    at = newline + 1
  end
  for i = #chunks, 2 * count + 1, -1 do
    chunks[i] = nil -- left from a line with more titles
  end
  return at
end

--- Draws annotation titles at the end of their lines. `text` holds, per
--- line, "<row> <number of titles>\n" then each title and "\n" (built by
--- lines_text in src/editor/annotations.rs). Called by the annotations'
--- decoration provider for the lines coming into view, during a redraw.
function H.draw_annotations(buf, ns, text)
  local at = 1
  while at <= #text do
    local row, count, titles_at = text:match("^(%d+) (%d+)\n()", at)
    at = read_titles(text, titles_at, tonumber(count))
    api.nvim_buf_set_extmark(buf, ns, tonumber(row), 0, mark_opts)
  end
end

--- A path relative to the current directory or home, for messages.
function H.short_name(path)
  return fn.fnamemodify(path, ":~:.")
end

function H.changedtick(buf)
  return api.nvim_buf_get_changedtick(buf)
end

--- The changedtick of a loaded buffer; nil when it is gone or unloaded.
function H.loaded_changedtick(buf)
  if api.nvim_buf_is_valid(buf) and api.nvim_buf_is_loaded(buf) then
    return api.nvim_buf_get_changedtick(buf)
  end
  return nil
end

function H.global_option(name)
  return vim.go[name]
end

function H.get_var(buf, name)
  local ok, value = pcall(api.nvim_buf_get_var, buf, name)
  return ok and value or nil
end

function H.del_var(buf, name)
  pcall(api.nvim_buf_del_var, buf, name)
end

--- The buffers that hold files (listed, normal buffers with a name):
--- { { name, current, modified, filetype }, ... }
function H.open_buffers()
  local current = api.nvim_get_current_buf()
  local out = {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == "" and vim.bo[buf].buflisted then
      local name = api.nvim_buf_get_name(buf)
      if name ~= "" then
        out[#out + 1] = { name, buf == current, vim.bo[buf].modified, vim.bo[buf].filetype }
      end
    end
  end
  return out
end

function H.buffer_modified(buf)
  return vim.bo[buf].modified
end

--- Writes `buf` with :write (its autocommands run as for the user's :w);
--- nil, or why it failed.
function H.save_buffer(buf)
  local ok, err = pcall(api.nvim_buf_call, buf, function()
    api.nvim_cmd({ cmd = "write" }, { output = true })
  end)
  return not ok and tostring(err) or nil
end

-- openFile's startText / endText: selects from the first startText to the
-- first endText after it (or to the end of startText; to the end of that
-- line with to_eol) in the current buffer. Whether startText was found.
function H.select_text(start_text, end_text, to_eol)
  local lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  local text = table.concat(lines, "\n")
  local s = text:find(start_text, 1, true)
  if not s then
    return false
  end
  local last = s + #start_text - 1
  if end_text and end_text ~= "" then
    local e = text:find(end_text, s + #start_text, true)
    if e then
      last = e + #end_text - 1
    end
  end
  -- 1-based byte offset -> (1-based row, 0-based byte column)
  local function at(offset)
    local base = 0
    for row, line in ipairs(lines) do
      if offset <= base + #line + 1 then
        return row, math.max(math.min(offset - base - 1, #line - 1), 0)
      end
      base = base + #line + 1
    end
    return #lines, math.max(#lines[#lines] - 1, 0)
  end
  local srow, scol = at(s)
  local erow, ecol = at(last)
  if to_eol then
    ecol = math.max(#lines[erow] - 1, 0)
  end
  local mode = vim.api.nvim_get_mode().mode:sub(1, 1)
  if mode == "v" or mode == "V" or mode == "\22" then
    vim.cmd("normal! \27")
  end
  vim.api.nvim_win_set_cursor(0, { srow, scol })
  vim.cmd("normal! v")
  vim.api.nvim_win_set_cursor(0, { erow, ecol })
  return true
end

return H
