-- Editor reads and writes for the Rust side (src/editor/*.rs), compiled once
-- by src/editor/nvim.rs. They run on the main thread and only touch editor
-- state; Rust does the rest off the main thread.
--
-- Why Lua: nvim-oxi 0.6 never frees the strings that cross its API wrappers
-- (its String's Drop is a no-op), so buffer names, lines and option values
-- read through it leak. Lua strings are garbage collected, and LuaJIT runs
-- these small functions fast.
local api, fn = vim.api, vim.fn
-- getregionpos() and vim.str_byteindex() as 0.11 has them, on 0.10 too.
local compat = require("amp.compat")
local H = {}

-- One reused options table: no garbage per call on hot paths.
local buf_opts = { buf = 0 }
local function buf_option(buf, name)
  buf_opts.buf = buf
  return api.nvim_get_option_value(name, buf_opts)
end

--- The file a buffer shows, or nil: a normal buffer (not a terminal, help,
--- quickfix or scratch buffer) with an absolute name that is not a URL.
function H.file_of(buf)
  if buf_option(buf, "buftype") ~= "" then
    return nil
  end
  local name = api.nvim_buf_get_name(buf)
  if name == "" or name:byte(1) ~= 47 --[[ "/" ]] or name:find("://", 1, true) then
    return nil
  end
  return name
end

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

--- Everything Rust needs to turn a buffer into a file's text, but the text
--- itself (read in bulk by src/editor/bulk.rs): its size in bytes, line
--- count (0 for an empty buffer), changedtick, 'modified', 'fileformat' is
--- dos, 'endofline'.
function H.snapshot(buf)
  local count = api.nvim_buf_line_count(buf)
  local size = api.nvim_buf_get_offset(buf, count)
  local empty = count == 1 and api.nvim_buf_get_offset(buf, 1) == 0
  return size,
    empty and 0 or count,
    api.nvim_buf_get_changedtick(buf),
    buf_option(buf, "modified"),
    buf_option(buf, "fileformat") == "dos",
    buf_option(buf, "endofline")
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
      vim.notify(
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
    -- Close the current undo block so this edit is its own undo step
    -- (:help undo-break); it must run with the buffer current.
    api.nvim_buf_call(buf, function()
      vim.cmd("let &g:undolevels = &g:undolevels")
    end)
  end
  return true
end

--- After an edit's hunks were set (from Rust: src/editor/bulk.rs): the
--- final end-of-line as the agent left it; returns the new changedtick.
function H.apply_end(buf, final_newline)
  if buf_option(buf, "endofline") ~= final_newline then
    vim.bo[buf].endofline = final_newline
    -- Without this a later :w would add the end-of-line the agent left out.
    vim.bo[buf].fixendofline = final_newline
  end
  return api.nvim_buf_get_changedtick(buf)
end

--- After the file was written with the buffer's text: mark the buffer
--- unmodified if the user has not typed since `tick`, and make Neovim record
--- the file's new timestamp without a "file changed" prompt.
---
--- Known limit: Neovim keeps a second timestamp, the one :w compares, which
--- only reading or writing the file updates. Reloading would update it, but
--- a reload is a separate undo step (Neovim syncs undo before it) and wipes
--- extmarks, and letting Neovim write would give up the atomic write; so a
--- :w after an agent's edit still asks once whether to overwrite.
function H.mark_saved(buf, tick)
  if not api.nvim_buf_is_valid(buf) then
    return
  end
  local clean = api.nvim_buf_get_changedtick(buf) == tick
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
    vim.cmd("silent! checktime " .. buf)
    if autoread == nil or autoread == -1 then
      vim.cmd("set autoread<")
    else
      vim.opt_local.autoread = autoread
    end
  end)
  pcall(api.nvim_del_autocmd, id)
  -- Only now: for an unmodified buffer whose file kept its size, :checktime
  -- compares the whole text with the disk (a full re-read of the file).
  if clean then
    vim.bo[buf].modified = false
  end
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
      out[#out + 1] = {
        name, lnum, d.col or 0, end_lnum, d.end_col or d.col or 0, d.severity or 1,
        d.message or "", d.source, line, end_line, offset, end_offset,
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
    vim.cmd("edit " .. fn.fnameescape(path))
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

function H.get_var(buf, name)
  local ok, value = pcall(api.nvim_buf_get_var, buf, name)
  return ok and value or nil
end

function H.del_var(buf, name)
  pcall(api.nvim_buf_del_var, buf, name)
end

return H
