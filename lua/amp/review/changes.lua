--- Changes already on disk (`:Amp review`, |amp-review-changes|): before a
--- buffer takes in a change made outside Neovim (an agent writing the file,
--- or an agent's edit through the server), its text is kept. The review
--- shows that text (left) against the file's own buffer (right). Accepting
--- a hunk keeps it; rejecting one puts the old text back into the buffer
--- and writes it with Neovim's own `:write`: the bytes the user's `:w`
--- writes. Unsaved text of the user is never written by a revert.
---
--- A review kind: the same small interface as `amp.review.proposal`.
local M = {}
local H = {}

local api = vim.api
local hunks = require("amp.review.hunks")
local view = require("amp.review.view")

--- Unreviewed changes by file name: { before = lines, time = ms }
M.changes = {}

--- At most this many files' old texts are kept (the oldest goes first), and
--- none bigger than `M.max_bytes`.
M.max_files = 100
M.max_bytes = 8 * 1024 * 1024

--- Texts the user accepted in a proposal, by file name: a change to that
--- text is already reviewed.
M.approved = {}

-- The kind's interface -----------------------------------------------------------

M.left_label = "before the change"
--- The right side is the file's own buffer: the review never deletes it.
M.owns_right = false

function M.facts()
  return ":q ends"
end

--- Before a hunk's old text goes back: only over a buffer without unsaved
--- changes (the revert is written).
function M.may_revert(review)
  if vim.bo[review.right].modified then
    H.notify(
      "amp: the buffer has unsaved changes: write or undo them before reverting the agent's change",
      vim.log.levels.WARN
    )
    return false
  end
  return true
end

--- After a hunk's old text went back: written as the user's :w writes.
function M.reverted(review)
  if H.write(review) then
    H.notify(("amp: reverted a hunk of %s (written)"):format(review.rel))
    return true
  end
  return false
end

--- Every hunk is decided.
function M.finish(review)
  H.notify(("amp: review of %s done"):format(review.rel))
  M.done(review)
end

function M.accept_all(review)
  H.notify(("amp: kept the agent's change to %s"):format(review.rel))
  M.done(review)
end

function M.reject_all(review)
  if not M.may_revert(review) then
    return
  end
  local modifiable = vim.bo[review.right].modifiable
  vim.bo[review.right].modifiable = true
  api.nvim_buf_set_lines(review.right, 0, -1, false, hunks.lines(review.left))
  vim.bo[review.right].modifiable = modifiable
  if not H.write(review) then
    return
  end
  H.notify(("amp: reverted the agent's change to %s (written)"):format(review.rel))
  M.done(review)
end

--- Leaving the review (:q, closing the tab) ends it: what is left of the
--- change is kept, and counts as reviewed.
function M.closed_by_user(review)
  M.done(review)
end

-- Recording --------------------------------------------------------------------

--- Called before a buffer takes in a change from outside (the file watcher's
--- reload, an agent's edit; main thread, from apply_begin in
--- src/nvim/helpers/buffers.lua).
--- Keeps the buffer's text from before the first unreviewed change.
function M.record(buf)
  local name = api.nvim_buf_get_name(buf)
  if name == "" or M.changes[name] or vim.bo[buf].buftype ~= "" then
    return
  end
  if api.nvim_buf_get_offset(buf, api.nvim_buf_line_count(buf)) > M.max_bytes then
    return
  end
  M.changes[name] = { before = hunks.lines(buf), time = vim.uv.now() }
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

--- The buffer's text as its file holds it (line breaks of its 'fileformat').
function H.buffer_text(buf)
  local nl = vim.bo[buf].fileformat == "dos" and "\r\n" or "\n"
  return hunks.join(hunks.lines(buf), vim.bo[buf].endofline, nl)
end

--- Files whose changes are not reviewed yet (sorted), dropping those whose
--- text is back to what it was.
function M.pending()
  local out = {}
  for name, change in pairs(M.changes) do
    local buf = H.buffer_named(name)
    local approved = buf and M.approved[name] and H.buffer_text(buf) == M.approved[name]
    if approved then
      M.approved[name] = nil
    end
    -- Gone, back to its old text, or what the user accepted in a proposal.
    if not buf or approved or vim.deep_equal(hunks.lines(buf), change.before) then
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

-- The review -------------------------------------------------------------------

--- A review of the unreviewed changes of `path` (a file name as its buffer
--- has it), not shown yet; nil and why when there are none.
function M.review(path, layout)
  local change = M.changes[path]
  local buf = H.buffer_named(path)
  if not change or not buf then
    return nil, "no unreviewed change in " .. vim.fn.fnamemodify(path, ":~:.")
  end
  local rel = vim.fn.fnamemodify(path, ":~:.")
  local left = api.nvim_create_buf(false, true)
  vim.bo[left].bufhidden = "wipe"
  vim.bo[left].swapfile = false
  api.nvim_buf_set_lines(left, 0, -1, false, change.before)
  vim.bo[left].modifiable = false
  vim.bo[left].modified = false
  pcall(api.nvim_buf_set_name, left, rel .. " (before the change)")
  vim.bo[left].filetype = vim.bo[buf].filetype
  return {
    key = "changes:" .. path,
    kind = M,
    layout = layout,
    path = path,
    rel = rel,
    title = "changed on disk: " .. rel,
    left = left,
    right = buf,
  }
end

--- The review ended: the change counts as reviewed.
function M.done(review)
  if review.done then
    return
  end
  review.done = true
  if M.changes[review.path] then
    M.changes[review.path] = nil
    H.changed()
  end
  require("amp.review").forget(review)
  H.fire("AmpReviewDone", { path = review.path })
  vim.schedule(function()
    view.close(review, function()
      if api.nvim_buf_is_valid(review.left) then
        pcall(api.nvim_buf_delete, review.left, { force = true })
      end
    end)
  end)
end

-- Helpers ----------------------------------------------------------------------

function H.notify(msg, level)
  require("amp.notify").notify(msg, level)
end

function H.fire(pattern, data)
  api.nvim_exec_autocmds("User", { pattern = pattern, modeline = false, data = data })
end

function H.changed()
  H.fire("AmpReviewChanged", { count = M.count() })
  local ok, connection = pcall(require, "amp.connection")
  if ok and connection.refresh then
    connection.refresh()
  end
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

--- The loaded buffer whose name is exactly `name`.
function H.buffer_named(name)
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(buf) and api.nvim_buf_get_name(buf) == name then
      return buf
    end
  end
  return nil
end

M.buffer_named = H.buffer_named
M.changed = H.changed

return M
