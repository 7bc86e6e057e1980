--- Reviews of agents' changes (`:help amp-review`): the old text and the new
--- one side by side in diff mode, in a tab page of their own, decided as a
--- whole or hunk by hunk.
---
--- A *proposal* (Claude's `openDiff`, Amp's `editFile` with
--- `review.edit_file`): left, the text as it is; right, the proposal, an
--- editable buffer. `:w` in the proposal accepts it (the user's edits
--- included), closing it rejects it. Accepting a hunk copies it to the left
--- side; rejecting one copies the left side's text into the proposal; when
--- no hunk is left the review ends by itself: accepted when the proposal
--- still differs from the original, else rejected. The Rust side
--- (`src/nvim/review.rs`) sets `M.decide(name, accepted, text)`.
---
--- *Changes* already on disk (`:Amp review`): before a buffer takes in a
--- change made outside Neovim (an agent writing the file, or an agent's
--- edit through the server), its text is kept. The review shows that text
--- (left) against the file's own buffer (right). Accepting a hunk keeps it;
--- rejecting one puts the old text back into the buffer and writes it with
--- Neovim's own `:write`: the bytes the user's `:w` writes.
local M = {}
local H = {}

local api = vim.api

--- Open reviews by name: { kind = "proposal"|"changes", tab, left, right, ... }
M.reviews = {}

--- Unreviewed changes by file name: { before = lines, eol = boolean, time = seconds }
M.changes = {}

--- At most this many files' old texts are kept (the oldest goes first), and
--- none bigger than `M.max_bytes`.
M.max_files = 100
M.max_bytes = 8 * 1024 * 1024

-- Helpers -------------------------------------------------------------------

function H.keys()
  local ok, core = pcall(require, "amp.core")
  local config = ok and core.get_config() or require("amp.config").defaults
  return (config.review or require("amp.config").defaults.review).keys
end

function H.notify(msg, level)
  require("amp.notify").notify(msg, level)
end

--- `text` as lines, whether it ended with a line break, and the line
--- break ("\r\n" when every one is, as a 'fileformat' "dos" file reads).
function H.split(text)
  local _, lf = text:gsub("\n", "")
  local _, crlf = text:gsub("\r\n", "")
  local nl = (crlf > 0 and crlf == lf) and "\r\n" or "\n"
  local lines = vim.split(text, nl, { plain = true })
  local eol = lines[#lines] == ""
  if eol then
    table.remove(lines)
  end
  return lines, eol, nl
end

function H.join(lines, eol, nl)
  nl = nl or "\n"
  local text = table.concat(lines, nl)
  if eol and #lines > 0 then
    text = text .. nl
  end
  return text
end

local diff = (vim.text and vim.text.diff) or vim.diff

--- The hunks between two lists of lines: { {start_a, count_a, start_b, count_b}, ... }
--- (1-based; a count of 0 means "after line start").
function H.hunks(a, b)
  local ta = #a > 0 and (table.concat(a, "\n") .. "\n") or ""
  local tb = #b > 0 and (table.concat(b, "\n") .. "\n") or ""
  return diff(ta, tb, { result_type = "indices" })
end

function H.lines(buf)
  return api.nvim_buf_get_lines(buf, 0, -1, false)
end

--- The hunk under the cursor of `win`, which shows side "a" or "b".
function H.hunk_at(review, win)
  local side = api.nvim_win_get_buf(win) == review.left and "a" or "b"
  local row = api.nvim_win_get_cursor(win)[1]
  for _, h in ipairs(H.hunks(H.lines(review.left), H.lines(review.right))) do
    local start, count = h[1], h[2]
    if side == "b" then
      start, count = h[3], h[4]
    end
    if count == 0 then
      if row == start or row == start + 1 or (start == 0 and row == 1) then
        return h
      end
    elseif row >= start and row < start + count then
      return h
    end
  end
  return nil
end

--- Lines `start`..`start+count-1` (count 0: none, after `start`) of `lines`.
function H.slice(lines, start, count)
  return count == 0 and {} or vim.list_slice(lines, start, start + count - 1)
end

--- Replaces the hunk's side in `buf` (which shows side `side`) with `lines`.
function H.set_hunk(buf, h, side, lines)
  local start, count = h[1], h[2]
  if side == "b" then
    start, count = h[3], h[4]
  end
  local first = count == 0 and start or start - 1
  local modifiable = vim.bo[buf].modifiable
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(buf, first, first + count, false, lines)
  vim.bo[buf].modifiable = modifiable
end

function H.fire(pattern, data)
  api.nvim_exec_autocmds("User", { pattern = pattern, modeline = false, data = data })
end

--- A scratch buffer showing `lines`, not modifiable.
function H.scratch(lines, name, filetype)
  local buf = api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].swapfile = false
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  pcall(api.nvim_buf_set_name, buf, name)
  if filetype and filetype ~= "" then
    vim.bo[buf].filetype = filetype
  end
  return buf
end

--- The loaded buffer whose name is exactly `name`.
function H.buffer_named(name)
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(buf) and api.nvim_buf_get_name(buf) == name then
      return buf
    end
  end
  return nil
end

function H.filetype_of(path)
  return vim.filetype.match({ filename = path }) or ""
end

--- A new tab page with `left` and `right` side by side in diff mode.
function H.open_tab(left, right)
  vim.cmd.tabnew()
  local tab = api.nvim_get_current_tabpage()
  local placeholder = api.nvim_get_current_buf()
  local left_win = api.nvim_get_current_win()
  api.nvim_win_set_buf(left_win, left)
  if placeholder ~= left and api.nvim_buf_is_valid(placeholder) then
    pcall(api.nvim_buf_delete, placeholder, { force = true })
  end
  vim.cmd.diffthis()
  vim.cmd.vsplit({ mods = { split = "belowright" } })
  local right_win = api.nvim_get_current_win()
  api.nvim_win_set_buf(right_win, right)
  vim.cmd.diffthis()
  return tab, left_win, right_win
end

function H.map_keys(review, buf)
  local keys = H.keys()
  local actions = {
    accept_hunk = { M.accept_hunk, "amp: accept the hunk under the cursor" },
    reject_hunk = { M.reject_hunk, "amp: reject the hunk under the cursor" },
    accept_all = { M.accept_all, "amp: accept every hunk" },
    reject_all = { M.reject_all, "amp: reject every hunk" },
  }
  review.mapped = review.mapped or {}
  for action, spec in pairs(actions) do
    local lhs = keys[action]
    if lhs then
      vim.keymap.set("n", lhs, function()
        spec[1](review.name)
      end, { buffer = buf, nowait = true, desc = spec[2] })
      table.insert(review.mapped, { buf = buf, lhs = lhs })
    end
  end
end

function H.unmap_keys(review)
  for _, m in ipairs(review.mapped or {}) do
    if api.nvim_buf_is_valid(m.buf) then
      pcall(vim.keymap.del, "n", m.lhs, { buffer = m.buf })
    end
  end
  review.mapped = {}
end

--- The review whose window is current, or the one named `name`.
function H.find(name)
  if name and M.reviews[name] then
    return M.reviews[name]
  end
  local buf = api.nvim_get_current_buf()
  for _, review in pairs(M.reviews) do
    if review.left == buf or review.right == buf then
      return review
    end
  end
  return nil
end

function H.winbar(review)
  local keys = H.keys()
  local parts = {}
  local function add(action, what)
    if keys[action] then
      table.insert(parts, keys[action] .. " " .. what)
    end
  end
  if review.kind == "proposal" then
    table.insert(parts, ":w accepts (your edits included), :q rejects")
  else
    table.insert(parts, ":q ends the review")
  end
  add("accept_hunk", "accepts")
  add("reject_hunk", review.kind == "proposal" and "rejects" or "reverts")
  table.insert(parts, "the hunk")
  local text = table.concat(parts, ", "):gsub(", the hunk$", " the hunk")
  if review.note then
    text = text .. " | " .. review.note
  end
  return text:gsub("%%", "%%%%")
end

function H.close(review)
  if M.reviews[review.name] ~= review then
    return false
  end
  M.reviews[review.name] = nil
  H.unmap_keys(review)
  if review.group then
    pcall(api.nvim_del_augroup_by_id, review.group)
  end
  if api.nvim_tabpage_is_valid(review.tab) then
    for _, win in ipairs(api.nvim_tabpage_list_wins(review.tab)) do
      if api.nvim_win_is_valid(win) then
        api.nvim_win_call(win, function()
          vim.cmd.diffoff()
        end)
        if api.nvim_win_get_buf(win) == review.right and review.kind == "changes" then
          vim.wo[win].winbar = ""
        end
      end
    end
    if #api.nvim_list_tabpages() > 1 then
      for _, win in ipairs(api.nvim_tabpage_list_wins(review.tab)) do
        pcall(api.nvim_win_close, win, true)
      end
    end
  end
  for _, buf in ipairs({ review.left, review.kind == "proposal" and review.right or nil }) do
    if buf and api.nvim_buf_is_valid(buf) then
      pcall(api.nvim_buf_delete, buf, { force = true })
    end
  end
  return true
end

function H.close_later(review)
  vim.schedule(function()
    H.close(review)
  end)
end

-- Proposals -------------------------------------------------------------------

function H.decide(review, accepted, text)
  if review.decided then
    return
  end
  review.decided = true
  if accepted then
    H.approved[vim.fn.fnamemodify(review.path, ":p")] = text
  end
  if M.decide then
    M.decide(review.name, accepted, text)
  end
  H.fire("AmpReviewDecided", { name = review.name, path = review.path, accepted = accepted })
end

--- Shows `proposed` against `original` for `path` (called from Rust, main
--- thread). `agent` names who proposes it.
function M.open_proposal(name, path, original, proposed, agent)
  if M.reviews[name] then
    H.close(M.reviews[name])
  end
  local filetype = H.filetype_of(path)
  local old_lines = H.split(original)
  local new_lines, eol, nl = H.split(proposed)
  local left = H.scratch(old_lines, name .. " (as it is)", filetype)
  local right = api.nvim_create_buf(false, true)
  vim.bo[right].buftype = "acwrite"
  vim.bo[right].bufhidden = "wipe"
  vim.bo[right].swapfile = false
  api.nvim_buf_set_lines(right, 0, -1, false, new_lines)
  vim.bo[right].modified = false
  pcall(api.nvim_buf_set_name, right, ("%s (proposed by %s)"):format(name, agent or "the agent"))
  if filetype ~= "" then
    vim.bo[right].filetype = filetype
  end
  local tab, left_win, right_win = H.open_tab(left, right)
  local review = {
    name = name,
    kind = "proposal",
    path = path,
    tab = tab,
    left = left,
    right = right,
    eol = eol,
    nl = nl,
    original = original,
  }
  -- The file's own buffer has unsaved changes: the review says so. Accept
  -- still answers with the proposal (the agent writes the file and the
  -- buffer shows the conflict, see :Amp diff).
  local loaded = H.buffer_named(vim.fn.fnamemodify(path, ":p"))
  if loaded and vim.bo[loaded].modified then
    review.note = "the file's buffer has unsaved changes"
  end
  M.reviews[name] = review
  H.map_keys(review, left)
  H.map_keys(review, right)
  vim.wo[right_win].winbar = H.winbar(review)
  vim.wo[left_win].winbar = "as it is"
  review.group = api.nvim_create_augroup("amp_review_" .. right, { clear = true })
  api.nvim_create_autocmd("BufWriteCmd", {
    group = review.group,
    buffer = right,
    callback = function()
      vim.bo[right].modified = false
      H.decide(review, true, H.join(H.lines(right), eol, nl))
      H.close_later(review)
    end,
  })
  api.nvim_create_autocmd({ "BufWipeout", "BufHidden" }, {
    group = review.group,
    buffer = right,
    callback = function()
      H.decide(review, false, nil)
      H.close_later(review)
    end,
  })
  H.fire("AmpReviewOpened", { name = name, path = path, kind = "proposal" })
end

--- The agent closes a review (close_tab / closeDiff); one still pending
--- counts as rejected.
function M.close(name)
  local review = M.reviews[name]
  if not review then
    return false
  end
  if review.kind == "proposal" then
    H.decide(review, false, nil)
  end
  return H.close(review)
end

--- The current text of the proposal `name` (the user's edits included),
--- as `:w` in it would accept it; nil when there is no such proposal.
--- (Gemini's closeDiff answers with it.)
function M.text(name)
  local review = M.reviews[name]
  if not (review and review.kind == "proposal" and api.nvim_buf_is_valid(review.right)) then
    return nil
  end
  return H.join(H.lines(review.right), review.eol, review.nl)
end

--- Closes every proposal; how many there were.
function M.close_all()
  local n = 0
  for name, review in pairs(M.reviews) do
    if review.kind == "proposal" and M.close(name) then
      n = n + 1
    end
  end
  return n
end

-- A stopped server answers no agent: its proposals' reviews go with it.
api.nvim_create_autocmd("User", {
  group = api.nvim_create_augroup("amp_review", { clear = true }),
  pattern = "AmpServerStopped",
  callback = function()
    M.close_all()
  end,
})

-- Hunks -------------------------------------------------------------------------

--- After a hunk was decided: the review ends when no hunk is left.
function H.after_hunk(review)
  local left, right = H.lines(review.left), H.lines(review.right)
  local left_hunks = #H.hunks(left, right)
  vim.cmd.diffupdate()
  if left_hunks > 0 then
    return
  end
  if review.kind == "proposal" then
    local text = H.join(right, review.eol, review.nl)
    if text == review.original then
      H.notify("amp: every hunk rejected: the proposal is rejected")
      H.decide(review, false, nil)
    else
      H.notify("amp: every hunk decided: the proposal is accepted")
      H.decide(review, true, text)
    end
  else
    H.finish_changes(review)
  end
  H.close_later(review)
end

function H.current_hunk(name)
  local review = H.find(name)
  if not review then
    H.notify("amp: not in a review", vim.log.levels.WARN)
    return nil
  end
  local win = api.nvim_get_current_win()
  local buf = api.nvim_win_get_buf(win)
  if buf ~= review.left and buf ~= review.right then
    H.notify("amp: not in a review window", vim.log.levels.WARN)
    return nil
  end
  local h = H.hunk_at(review, win)
  if not h then
    H.notify("amp: no hunk under the cursor (]c and [c move between hunks)", vim.log.levels.WARN)
    return nil
  end
  return review, h
end

--- Keeps the agent's text of the hunk under the cursor.
function M.accept_hunk(name)
  local review, h = H.current_hunk(name)
  if not review then
    return
  end
  local new = H.slice(H.lines(review.right), h[3], h[4])
  H.set_hunk(review.left, h, "a", new)
  H.after_hunk(review)
end

--- Puts the old text of the hunk under the cursor back (for changes on
--- disk, the file is written).
function M.reject_hunk(name)
  local review, h = H.current_hunk(name)
  if not review then
    return
  end
  local old = H.slice(H.lines(review.left), h[1], h[2])
  if review.kind == "changes" and not H.may_write(review) then
    return
  end
  H.set_hunk(review.right, h, "b", old)
  if review.kind == "changes" and not H.write(review) then
    return
  end
  H.after_hunk(review)
end

function M.accept_all(name)
  local review = H.find(name)
  if not review then
    return H.notify("amp: not in a review", vim.log.levels.WARN)
  end
  if review.kind == "proposal" then
    H.decide(review, true, H.join(H.lines(review.right), review.eol, review.nl))
  else
    H.finish_changes(review)
  end
  H.close_later(review)
end

function M.reject_all(name)
  local review = H.find(name)
  if not review then
    return H.notify("amp: not in a review", vim.log.levels.WARN)
  end
  if review.kind == "proposal" then
    H.decide(review, false, nil)
  else
    if not H.may_write(review) then
      return
    end
    local modifiable = vim.bo[review.right].modifiable
    vim.bo[review.right].modifiable = true
    api.nvim_buf_set_lines(review.right, 0, -1, false, H.lines(review.left))
    vim.bo[review.right].modifiable = modifiable
    if not H.write(review) then
      return
    end
    H.finish_changes(review)
  end
  H.close_later(review)
end

-- Changes on disk ------------------------------------------------------------------

--- Called before a buffer takes in a change from outside (the file watcher's
--- reload, an agent's edit; main thread, from helpers.lua's apply_begin).
--- Keeps the buffer's text from before the first unreviewed change.
function M.record(buf)
  local name = api.nvim_buf_get_name(buf)
  if name == "" or M.changes[name] then
    return
  end
  if api.nvim_buf_get_offset(buf, api.nvim_buf_line_count(buf)) > M.max_bytes then
    return
  end
  M.changes[name] = { before = H.lines(buf), eol = vim.bo[buf].endofline, time = vim.uv.now() }
  local names = vim.tbl_keys(M.changes)
  if #names > M.max_files then
    table.sort(names, function(a, b)
      return M.changes[a].time < M.changes[b].time
    end)
    M.changes[names[1]] = nil
  end
  -- Counted once the change is in (an accepted proposal's is no news).
  vim.schedule(function()
    M.pending()
    H.changed()
  end)
end

--- Texts the user accepted in a proposal, by file name: a change to that
--- text is already reviewed.
H.approved = {}

--- The buffer's text as its file holds it (line breaks of its 'fileformat').
function H.buffer_text(buf)
  local nl = vim.bo[buf].fileformat == "dos" and "\r\n" or "\n"
  return H.join(H.lines(buf), vim.bo[buf].endofline, nl)
end

--- Files whose changes are not reviewed yet (sorted), dropping those whose
--- text is back to what it was.
function M.pending()
  local out = {}
  for name, change in pairs(M.changes) do
    local buf = H.buffer_named(name)
    local approved = buf and H.approved[name] and H.buffer_text(buf) == H.approved[name]
    if approved then
      H.approved[name] = nil
    end
    -- Gone, back to its old text, or what the user accepted in a proposal.
    if not buf or approved or vim.deep_equal(H.lines(buf), change.before) then
      M.changes[name] = nil
    else
      table.insert(out, name)
    end
  end
  table.sort(out)
  return out
end

--- How many files have unreviewed changes (the statusline's count).
function M.count()
  return vim.tbl_count(M.changes)
end

function H.changed()
  H.fire("AmpReviewChanged", { count = M.count() })
  local ok, connection = pcall(require, "amp.connection")
  if ok and connection.refresh then
    connection.refresh()
  end
end

function H.may_write(review)
  if vim.bo[review.right].modified then
    H.notify(
      "amp: the buffer has unsaved changes: write or undo them before reverting the agent's change",
      vim.log.levels.WARN
    )
    return false
  end
  return true
end

--- Writes the file's buffer with :write (as the user's own :w would).
function H.write(review)
  local ok, err = pcall(api.nvim_buf_call, review.right, function()
    api.nvim_cmd({ cmd = "write", mods = { silent = true } }, { output = true })
  end)
  if not ok then
    H.notify("amp: could not write the reverted text: " .. tostring(err), vim.log.levels.ERROR)
    return false
  end
  return true
end

function H.finish_changes(review)
  if M.changes[review.path] then
    M.changes[review.path] = nil
    H.changed()
  end
  H.fire("AmpReviewDone", { path = review.path })
end

--- Opens the review of the unreviewed changes of `path` (a file name as
--- its buffer has it).
function M.open_changes(path)
  local change = M.changes[path]
  local buf = H.buffer_named(path)
  if not change or not buf then
    H.notify("amp: no unreviewed change in " .. vim.fn.fnamemodify(path, ":~:."), vim.log.levels.WARN)
    return false
  end
  local name = "changes:" .. path
  if M.reviews[name] then
    H.close(M.reviews[name])
  end
  local base = vim.fn.fnamemodify(path, ":t")
  local left = H.scratch(change.before, base .. " (before the change)", vim.bo[buf].filetype)
  local tab, left_win, right_win = H.open_tab(left, buf)
  local review = { name = name, kind = "changes", path = path, tab = tab, left = left, right = buf }
  M.reviews[name] = review
  H.map_keys(review, left)
  H.map_keys(review, buf)
  vim.wo[left_win].winbar = "before the change"
  vim.wo[right_win].winbar = H.winbar(review)
  -- Leaving the review (:q, closing the tab) ends it: what is left of the
  -- change is kept, and counts as reviewed.
  review.group = api.nvim_create_augroup("amp_review_changes_" .. left, { clear = true })
  api.nvim_create_autocmd({ "BufWipeout", "BufHidden" }, {
    group = review.group,
    buffer = left,
    callback = function()
      if M.reviews[name] == review then
        H.finish_changes(review)
        H.close_later(review)
      end
    end,
  })
  api.nvim_create_autocmd("WinClosed", {
    group = review.group,
    pattern = tostring(right_win),
    callback = function()
      if M.reviews[name] == review then
        H.finish_changes(review)
        H.close_later(review)
      end
    end,
  })
  H.fire("AmpReviewOpened", { name = name, path = path, kind = "changes" })
  return true
end

--- `:Amp review [file]`: the one changed file's review, or a choice.
function M.command(file)
  local pending = M.pending()
  H.changed()
  if file and file ~= "" then
    local full = vim.fn.fnamemodify(file, ":p")
    return M.open_changes(full)
  end
  if #pending == 0 then
    H.notify("amp: no unreviewed changes")
    return
  end
  if #pending == 1 then
    return M.open_changes(pending[1])
  end
  vim.ui.select(pending, {
    prompt = "Review the changes to:",
    format_item = function(item)
      return vim.fn.fnamemodify(item, ":~:.")
    end,
  }, function(choice)
    if choice then
      M.open_changes(choice)
    end
  end)
end

return M
