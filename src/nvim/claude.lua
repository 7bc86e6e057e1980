-- Editor reads and writes of the Claude Code front-end (main thread only;
-- compiled once by src/claude/editor_side.rs). No Ex command is built from
-- a string: buffers are found by name and written with nvim_cmd's args.
local M = {}

local function file_buffers()
  local out = {}
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == "" and vim.bo[buf].buflisted then
      local name = vim.api.nvim_buf_get_name(buf)
      if name ~= "" then
        out[#out + 1] = { buf = buf, name = name }
      end
    end
  end
  return out
end

local function buffer_of(path)
  local wanted = vim.fs.normalize(path)
  for _, b in ipairs(file_buffers()) do
    if vim.fs.normalize(b.name) == wanted then
      return b.buf
    end
  end
  return nil
end

-- { { name, active, dirty, filetype }, ... }
function M.open_editors()
  local current = vim.api.nvim_get_current_buf()
  local out = {}
  for _, b in ipairs(file_buffers()) do
    out[#out + 1] = { b.name, b.buf == current, vim.bo[b.buf].modified, vim.bo[b.buf].filetype }
  end
  return out
end

-- nil when no buffer has the file, else whether it is modified.
function M.dirty(path)
  local buf = buffer_of(path)
  if not buf then
    return nil
  end
  return vim.bo[buf].modified
end

-- nil when no buffer has the file; true when written; false, err otherwise.
function M.save(path)
  local buf = buffer_of(path)
  if not buf then
    return nil
  end
  local ok, err = pcall(vim.api.nvim_buf_call, buf, function()
    vim.api.nvim_cmd({ cmd = "write" }, { output = true })
  end)
  if not ok then
    return false, tostring(err)
  end
  return true
end

-- openFile's startText / endText: selects from the first startText to the
-- first endText after it (or to the end of startText; to the end of that
-- line with to_eol) in the current buffer. Whether startText was found.
function M.select_text(start_text, end_text, to_eol)
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

-- Review views of openDiff ---------------------------------------------------
-- One tab page per review: the file as it is (left; its buffer when loaded)
-- and the proposal (right), an editable scratch buffer, in diff mode.
-- `:w` in the proposal accepts it (with the user's edits), closing it
-- without writing rejects it. `decide(tab_name, accepted, text)` is set by
-- editor_side.rs: it answers the agent's blocked openDiff.
M.reviews = {} -- tab_name -> { buf = proposal buffer, tab = tabpage }

local function close_review(name)
  local review = M.reviews[name]
  if not review then
    return false
  end
  M.reviews[name] = nil
  if vim.api.nvim_tabpage_is_valid(review.tab) then
    local wins = vim.api.nvim_tabpage_list_wins(review.tab)
    if #vim.api.nvim_list_tabpages() > 1 then
      for _, win in ipairs(wins) do
        if vim.api.nvim_win_is_valid(win) then
          vim.api.nvim_win_call(win, function()
            vim.cmd.diffoff()
          end)
          pcall(vim.api.nvim_win_close, win, true)
        end
      end
    end
  end
  if vim.api.nvim_buf_is_valid(review.buf) then
    pcall(vim.api.nvim_buf_delete, review.buf, { force = true })
  end
  return true
end

local function decide_once(name, accepted, text)
  local review = M.reviews[name]
  if not review or review.decided then
    return
  end
  review.decided = true
  M.decide(name, accepted, text)
end

function M.open_diff(name, path, contents)
  if M.reviews[name] then
    close_review(name)
  end
  vim.cmd.tabnew()
  local tab = vim.api.nvim_get_current_tabpage()
  local left = vim.api.nvim_get_current_win()
  local scratch = vim.api.nvim_get_current_buf()
  if vim.uv.fs_stat(path) then
    vim.cmd.edit({ args = { path }, magic = { file = false } })
  end
  if vim.api.nvim_buf_is_valid(scratch) and scratch ~= vim.api.nvim_get_current_buf() then
    pcall(vim.api.nvim_buf_delete, scratch, { force = true })
  end
  local ft = vim.bo.filetype
  -- The file's own buffer, with unsaved changes: the review says so (accept
  -- still answers the proposal; the agent writes the file and the buffer
  -- then shows the conflict, see :Amp diff).
  local real_dirty_note = vim.bo.modified
  vim.cmd.diffthis()
  local buf = vim.api.nvim_create_buf(false, true)
  vim.bo[buf].buftype = "acwrite"
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].swapfile = false
  local lines = vim.split(contents, "\n", { plain = true })
  local eol = lines[#lines] == ""
  if eol then
    table.remove(lines)
  end
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modified = false
  pcall(vim.api.nvim_buf_set_name, buf, name .. " (proposed by Claude)")
  if ft ~= "" then
    vim.bo[buf].filetype = ft
  end
  vim.cmd.vsplit({ mods = { split = "belowright" } })
  local right = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_buf(right, buf)
  vim.cmd.diffthis()
  local bar = ":w accepts (your edits included), :q rejects"
  if real_dirty_note then
    bar = bar .. " | the file's buffer has unsaved changes"
  end
  vim.wo[right].winbar = bar
  M.reviews[name] = { buf = buf, tab = tab, left = left }
  local group = vim.api.nvim_create_augroup("amp_claude_review_" .. buf, { clear = true })
  vim.api.nvim_create_autocmd("BufWriteCmd", {
    group = group,
    buffer = buf,
    callback = function()
      local text = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n")
      if eol then
        text = text .. "\n"
      end
      vim.bo[buf].modified = false
      decide_once(name, true, text)
      vim.schedule(function()
        close_review(name)
      end)
    end,
  })
  vim.api.nvim_create_autocmd({ "BufWipeout", "BufHidden" }, {
    group = group,
    buffer = buf,
    callback = function()
      decide_once(name, false, nil)
      vim.schedule(function()
        close_review(name)
      end)
    end,
  })
end

-- The agent closes a review (close_tab / closeAllDiffTabs); one still
-- pending counts as rejected.
function M.close_diff(name)
  decide_once(name, false, nil)
  return close_review(name)
end

function M.close_all_diffs()
  local n = 0
  for name in pairs(vim.deepcopy(M.reviews)) do
    if M.close_diff(name) then
      n = n + 1
    end
  end
  return n
end

return M
