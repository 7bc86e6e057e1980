--- Reviews of agents' changes (`:help amp-review`), decided as a whole or
--- hunk by hunk. Two kinds, each its own module with the same small
--- interface (`facts`, `left_label`, `owns_right`, `may_revert`,
--- `reverted`, `finish`, `accept_all`, `reject_all`, `closed_by_user`):
---   amp.review.proposal  an agent's proposal, waiting for the user;
---   amp.review.changes   changes already on disk (`:Amp review`).
--- Shown by amp.review.view in the layout of `review.layout`; the line
--- arithmetic is amp.review.hunks; the one-line notices amp.review.notice.
---
--- This module is what the rest of the plugin calls: the Rust side
--- (src/nvim/review.rs: `propose`, `filled`, `close`, `close_owner`, `text`;
--- it sets `decide` and `fill` here), `:Amp review`, the keys, and the
--- statusline's counts.
local M = {}
local H = {}

local api = vim.api
local hunks = require("amp.review.hunks")
local view = require("amp.review.view")
local proposal = require("amp.review.proposal")
local changes = require("amp.review.changes")

--- The reviews shown, by key.
M.reviews = {}

function M.remember(review)
  M.reviews[review.key] = review
end

function M.forget(review)
  if M.reviews[review.key] == review then
    M.reviews[review.key] = nil
  end
end

-- The Rust side ----------------------------------------------------------------

--- A proposal arrived: announced, counted, not shown (see proposal.lua).
function M.propose(meta)
  proposal.arrived(meta)
end

function M.filled(session, name, err)
  proposal.filled(session, name, err)
end

--- The agent, its disconnection or its time limit closes a proposal; one
--- line tells the user unless the agent closed it itself.
function M.close(session, name, why)
  local item = proposal.items[proposal.key(session, name)]
  if not (item and proposal.close(item, why)) then
    return false
  end
  require("amp.review.notice").closed(item.agent, { item }, why)
  return true
end

--- Closes every proposal of the agent session `session`; how many.
function M.close_owner(session, agent, why)
  local closed = {}
  for _, item in ipairs(proposal.list()) do
    if item.session == session and proposal.close(item, why) then
      table.insert(closed, item)
    end
  end
  require("amp.review.notice").closed(agent, closed, why)
  return #closed
end

--- The current text of a shown proposal (the user's edits included), as
--- `:w` in it would accept it; nil when not shown (the Rust side has it).
function M.text(session, name)
  local item = proposal.items[proposal.key(session, name)]
  local review = item and item.review
  if not (review and review.started and api.nvim_buf_is_valid(review.right)) then
    return nil
  end
  return hunks.join(hunks.lines(review.right), item.eol, item.nl)
end

-- Counts and changes -----------------------------------------------------------------

M.record = changes.record
M.pending = changes.pending

--- How many files have unreviewed changes.
M.count = changes.count

--- The proposals waiting for a decision, oldest first.
M.proposals = proposal.list
M.proposal_count = proposal.count

-- Hunks ------------------------------------------------------------------------------

--- The review of the current window, or the one known by `key`.
function H.find(key)
  if key and M.reviews[key] then
    return M.reviews[key]
  end
  local buf = api.nvim_get_current_buf()
  for _, review in pairs(M.reviews) do
    if review.left == buf or review.right == buf then
      return review
    end
  end
  return nil
end

function H.current_hunk(key)
  local review = H.find(key)
  if not (review and review.started) then
    H.notify("amp: not in a review", vim.log.levels.WARN)
    return nil
  end
  local buf = api.nvim_get_current_buf()
  if buf ~= review.left and buf ~= review.right then
    H.notify("amp: not in a review window", vim.log.levels.WARN)
    return nil
  end
  local side = buf == review.left and "a" or "b"
  local row = api.nvim_win_get_cursor(0)[1]
  local h = hunks.at(hunks.of(review.left, review.right), side, row)
  if not h then
    H.notify("amp: no hunk under the cursor (]c and [c move between hunks)", vim.log.levels.WARN)
    return nil
  end
  return review, h
end

--- After a hunk was decided: the review ends when no hunk is left.
function H.after_hunk(review)
  view.refresh(review)
  if #hunks.of(review.left, review.right) == 0 then
    review.kind.finish(review)
  end
end

--- Keeps the agent's text of the hunk under the cursor.
function M.accept_hunk(key)
  local review, h = H.current_hunk(key)
  if not review then
    return
  end
  hunks.set(review.left, h, "a", hunks.slice(hunks.lines(review.right), h[3], h[4]))
  review.kept_any = true
  H.after_hunk(review)
end

--- Puts the old text of the hunk under the cursor back (for changes on
--- disk, the file is written).
function M.reject_hunk(key)
  local review, h = H.current_hunk(key)
  if not (review and review.kind.may_revert(review)) then
    return
  end
  hunks.set(review.right, h, "b", hunks.slice(hunks.lines(review.left), h[1], h[2]))
  if review.kind.reverted(review) then
    H.after_hunk(review)
  end
end

function M.accept_all(key)
  local review = H.find(key)
  if not review then
    return H.notify("amp: not in a review", vim.log.levels.WARN)
  end
  review.kind.accept_all(review)
end

function M.reject_all(key)
  local review = H.find(key)
  if not review then
    return H.notify("amp: not in a review", vim.log.levels.WARN)
  end
  review.kind.reject_all(review)
end

-- :Amp review -------------------------------------------------------------------------

--- What can be reviewed: the proposals (oldest first), then the files with
--- unreviewed changes. Each: { label, rel, open = function() }.
function M.entries()
  local out = {}
  for _, item in ipairs(proposal.list()) do
    table.insert(out, {
      label = ("%s (%s's proposal)"):format(item.rel, item.agent),
      rel = item.rel,
      path = item.path,
      open = function(layout)
        return proposal.open(item, layout)
      end,
    })
  end
  for _, path in ipairs(changes.pending()) do
    local rel = vim.fn.fnamemodify(path, ":~:.")
    table.insert(out, {
      label = rel,
      rel = rel,
      path = path,
      open = function(layout)
        return H.open_changes(path, layout)
      end,
    })
  end
  return out
end

function H.open_changes(path, layout)
  local shown = M.reviews["changes:" .. path]
  if shown then
    view.focus(shown)
    return true
  end
  local why = view.blocked()
  if why then
    return false, why
  end
  local review, err = changes.review(path, layout)
  if not review then
    return false, err
  end
  local ok, open_err = view.open(review)
  if not ok then
    pcall(api.nvim_buf_delete, review.left, { force = true })
    return false, open_err
  end
  M.remember(review)
  view.start(review)
  H.fire("AmpReviewOpened", { name = review.key, path = path, kind = "changes" })
  H.fire("AmpReviewShown", { name = review.key, path = path, kind = "changes" })
  return true
end

function H.open(entry)
  local ok, err = entry.open(require("amp.review.config").get().layout)
  if not ok then
    H.notify("amp: cannot open the review: " .. tostring(err), vim.log.levels.WARN)
  end
  return ok
end

--- `:Amp review [file]`: the one thing to review, or a choice.
function M.command(file)
  local entries = M.entries()
  changes.changed()
  if file and file ~= "" then
    local full = vim.fn.fnamemodify(file, ":p")
    entries = vim.tbl_filter(function(e)
      return e.path == full or e.rel == file
    end, entries)
    if #entries == 0 then
      H.notify("amp: no proposal and no unreviewed change for " .. file, vim.log.levels.WARN)
      return
    end
  end
  if #entries == 0 then
    H.notify("amp: nothing to review (no proposals, no unreviewed changes)")
    return
  end
  if #entries == 1 then
    return H.open(entries[1])
  end
  vim.ui.select(entries, {
    prompt = "Review:",
    format_item = function(e)
      return e.label
    end,
  }, function(choice)
    if choice then
      H.open(choice)
    end
  end)
end

--- Completion of `:Amp review `: the files with something to review.
function M.complete()
  local seen, out = {}, {}
  for _, e in ipairs(M.entries()) do
    if not seen[e.rel] then
      seen[e.rel] = true
      table.insert(out, e.rel)
    end
  end
  return out
end

-- Helpers ------------------------------------------------------------------------

function H.notify(msg, level)
  require("amp.notify").notify(msg, level)
end

function H.fire(pattern, data)
  api.nvim_exec_autocmds("User", { pattern = pattern, modeline = false, data = data })
end

local group = api.nvim_create_augroup("amp_review", { clear = true })

-- A stopped server answers no agent: its proposals go with it.
api.nvim_create_autocmd("User", {
  group = group,
  pattern = "AmpServerStopped",
  callback = function()
    for _, item in ipairs(proposal.list()) do
      if proposal.close(item, "stopped") and M.decide then
        M.decide(item.session, item.name, false, nil)
      end
    end
  end,
})

-- Leaving Neovim is never stopped by an edited proposal (E37/E162): it is
-- rejected with the rest.
api.nvim_create_autocmd("ExitPre", {
  group = group,
  callback = function()
    for _, review in pairs(M.reviews) do
      if review.kind.owns_right and api.nvim_buf_is_valid(review.right) then
        vim.bo[review.right].modified = false
      end
    end
  end,
})

return M
