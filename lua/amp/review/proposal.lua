--- Agents' proposals (|amp-review-proposal|): Claude's and Gemini's
--- `openDiff`, Amp's `editFile` under `review.edit_file`.
---
--- A proposal that arrives takes nothing from the user: no window, tab,
--- buffer, mode or cursor changes. It is announced in one line, counted in
--- the statusline, and waits here (its texts wait on the Rust side,
--- src/nvim/review.rs) until the user opens it with `:Amp review`. Then its
--- two buffers are made and filled in slices: left, the file as the user
--- has it (unsaved changes included); right, the proposal, editable. `:w`
--- in it accepts (the user's edits included), closing it rejects. A
--- proposal whose agent writes its own text whatever it is told
--- (`as_proposed`: Copilot CLI) is read-only and says so in its winbar.
---
--- Known by (agent session, name). The Rust side's `decide(session, name,
--- accepted, text)` and `fill(...)` are set on `amp.review`.
---
--- A review kind: the same small interface as `amp.review.changes`.
local M = {}
local H = {}

local api = vim.api
local hunks = require("amp.review.hunks")
local view = require("amp.review.view")

--- Proposals waiting for a decision, by key: { key, session, name, path,
--- rel, agent, eol, nl, tick, conflicts, arrived, review? }
M.items = {}

function M.key(session, name)
  return tostring(session) .. "\0" .. name
end

-- The kind's interface ---------------------------------------------------------

M.left_label = "as it is"
--- The right side is the proposal's own buffer.
M.owns_right = true

function M.facts()
  return ":w accepts · :q rejects"
end

--- A proposal its agent writes as proposed (`as_proposed`: Copilot CLI)
--- has no hunk to put back: that would be an edit the agent never sees.
function M.may_revert(review)
  if review and review.item.as_proposed then
    H.notify(H.as_proposed_text(review.item) .. ": :q rejects it all", vim.log.levels.WARN)
    return false
  end
  return true
end

function M.reverted()
  return true
end

--- Every hunk is decided: accepted when some hunk was, else rejected.
function M.finish(review)
  local item = review.item
  if review.kept_any then
    H.decide(item, true, H.text(review), "every hunk decided: ")
  else
    H.decide(item, false, nil, "every hunk rejected: ")
  end
end

function M.accept_all(review)
  H.decide(review.item, true, H.text(review))
end

function M.reject_all(review)
  H.decide(review.item, false, nil)
end

function M.closed_by_user(review)
  H.decide(review.item, false, nil)
end

-- Arrival ------------------------------------------------------------------------

--- Proposals that arrived so far (their order).
H.arrivals = 0

--- A proposal arrived (from Rust, main thread). `meta`: { session, name,
--- path, agent, eol, nl, bytes, conflicts, tick? }.
function M.arrived(meta)
  local key = M.key(meta.session, meta.name)
  local old = M.items[key]
  if old then
    -- Replaced by its agent (answered as rejected already): a :w in its
    -- view must not decide the new one, which has its key.
    old.closed = "replaced by a newer one"
    H.drop(old)
  end
  local item = vim.deepcopy(meta)
  item.key = key
  item.rel = vim.fn.fnamemodify(meta.path, ":~:.")
  H.arrivals = H.arrivals + 1
  item.arrived = H.arrivals
  M.items[key] = item
  H.fire("AmpReviewOpened", { name = item.name, path = item.path, agent = item.agent, kind = "proposal" })
  H.counted()
  require("amp.review.notice").arrived(item)
end

-- Opening --------------------------------------------------------------------------

--- Shows the proposal `item` (its view if open already). Returns false and
--- why when it cannot be shown now; nothing is made then.
function M.open(item, layout)
  if item.review then
    view.focus(item.review)
    return true
  end
  local why = view.blocked()
  if why then
    return false, why
  end
  local review = H.make_review(item, layout)
  local ok, err = view.open(review)
  if not ok then
    H.delete_buffers(review)
    return false, err
  end
  item.review = review
  require("amp.review").remember(review)
  H.watch_writes(review)
  -- The texts come from the Rust side in slices; review.filled follows.
  local fill = require("amp.review").fill
  if not (fill and fill(item.session, item.name, review.left, review.right)) then
    H.decide(item, false, nil)
    return false, "the proposal is gone"
  end
  return true
end

function H.make_review(item, layout)
  local filetype = vim.filetype.match({ filename = item.path }) or ""
  local left = H.buffer("wipe")
  pcall(api.nvim_buf_set_name, left, H.unique(("%s (as it is)"):format(item.rel)))
  local right = H.buffer("hide")
  vim.bo[right].buftype = "acwrite"
  pcall(api.nvim_buf_set_name, right, H.unique(("%s (proposed by %s)"):format(item.rel, item.agent)))
  for _, buf in ipairs({ left, right }) do
    if filetype ~= "" then
      vim.bo[buf].filetype = filetype
    end
  end
  local title = ("%s proposes %s"):format(item.agent, item.rel)
  if item.name ~= item.rel and item.name ~= item.path then
    title = title .. (" (tab %q)"):format(item.name)
  end
  local notes = {}
  if item.as_proposed then
    table.insert(notes, H.as_proposed_text(item))
  end
  if item.tick then
    table.insert(notes, "your unsaved changes are in it")
    if (item.conflicts or 0) > 0 then
      notes[#notes] = ("%d change(s) overlap yours: check them"):format(item.conflicts)
    end
  end
  local note = #notes > 0 and table.concat(notes, " | ") or nil
  return {
    key = item.key,
    item = item,
    kind = M,
    layout = layout,
    path = item.path,
    rel = item.rel,
    title = title,
    note = note,
    left = left,
    right = right,
    started = false,
  }
end

--- An empty scratch buffer to be filled (no undo of the filling).
function H.buffer(bufhidden)
  local buf = api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = bufhidden
  vim.bo[buf].swapfile = false
  vim.bo[buf].undolevels = -1
  return buf
end

--- `name`, or `name` with a number when a buffer has that name already.
function H.unique(name)
  local candidate, n = name, 1
  while vim.fn.bufexists(candidate) == 1 do
    n = n + 1
    candidate = ("%s [%d]"):format(name, n)
  end
  return candidate
end

--- The Rust side put the texts in (main thread).
function M.filled(session, name, err)
  local item = M.items[M.key(session, name)]
  local review = item and item.review
  if not review or review.view_closed then
    return
  end
  if err then
    H.notify(("amp: cannot show the proposal for %s: %s"):format(item.rel, err), vim.log.levels.ERROR)
    H.decide(item, false, nil)
    return
  end
  local left, right = review.left, review.right
  vim.bo[left].undolevels = -123456
  vim.bo[right].undolevels = -123456
  vim.bo[left].modifiable = false
  vim.bo[left].modified = false
  vim.bo[right].modified = false
  if item.as_proposed then
    -- Its agent writes its own proposal: an edit here could not reach the file.
    vim.bo[right].modifiable = false
    review.as_filled = H.text(review)
  end
  view.start(review)
  H.fire("AmpReviewShown", { name = item.name, path = item.path, agent = item.agent, kind = "proposal" })
end

--- `:w` accepts; `:q` always rejects (even after edits: no E37).
function H.watch_writes(review)
  local group = review.group
  local right = review.right
  api.nvim_create_autocmd("BufWriteCmd", {
    group = group,
    buffer = right,
    callback = function()
      vim.bo[right].modified = false
      local item = review.item
      if not review.started then
        H.notify("amp: the proposal is still loading: nothing was written", vim.log.levels.WARN)
        return
      end
      if item.closed then
        H.notify(("amp: this proposal was closed (%s): nothing was written"):format(item.closed))
        return
      end
      if item.as_proposed and H.text(review) ~= review.as_filled then
        -- Accepting would tell the agent "saved" and it would write its
        -- own text, not this one: nothing is decided.
        H.notify(
          H.as_proposed_text(item) .. ": undo your edits (u) to accept it, or :q to reject it",
          vim.log.levels.WARN
        )
        return
      end
      H.decide(item, true, H.text(review))
    end,
  })
  api.nvim_create_autocmd("QuitPre", {
    group = group,
    buffer = right,
    callback = function()
      vim.bo[right].modified = false
    end,
  })
end

--- What the view says of a proposal its agent writes as proposed.
function H.as_proposed_text(item)
  return ("%s writes its own proposal: edits here are not kept"):format(item.agent)
end

function H.text(review)
  local item = review.item
  return hunks.join(hunks.lines(review.right), item.eol, item.nl)
end

-- Decisions --------------------------------------------------------------------

--- The user decided: the agent is told, the file's buffer takes an accepted
--- text it had unsaved changes under (so nothing of the user's is lost and
--- the agent's write then settles it), the view goes.
function H.decide(item, accepted, text, how)
  if item.decided or item.closed then
    return
  end
  item.decided = true
  M.items[item.key] = nil
  local decide = require("amp.review").decide
  local waited = decide and decide(item.session, item.name, accepted, text)
  if waited == false then
    H.notify(("amp: %s's proposal for %s is closed: nothing was written"):format(item.agent, item.rel))
  else
    if accepted then
      H.keep_in_buffer(item, text)
      require("amp.review.changes").approved[vim.fn.fnamemodify(item.path, ":p")] = text
    end
    H.notify(
      ("amp: %s%s %s's change to %s"):format(how or "", accepted and "accepted" or "rejected", item.agent, item.rel)
    )
  end
  H.fire("AmpReviewDecided", { name = item.name, path = item.path, agent = item.agent, accepted = accepted })
  H.drop(item)
end

--- The file's buffer had unsaved changes when the proposal came (and has
--- not changed since): the accepted text, which holds them, goes into it
--- as one undo step.
function H.keep_in_buffer(item, text)
  if not item.tick then
    return
  end
  local buf = require("amp.review.changes").buffer_named(vim.fn.fnamemodify(item.path, ":p"))
  if not (buf and vim.bo[buf].modified and api.nvim_buf_get_changedtick(buf) == item.tick) then
    return
  end
  local lines = vim.split(text, item.nl, { plain = true })
  if item.eol then
    table.remove(lines)
  end
  hunks.replace_all(buf, lines)
end

--- Closes `item`'s view (later: a decision may come from inside an
--- autocommand of its buffer) and counts it out.
function H.drop(item)
  M.items[item.key] = nil
  local review = item.review
  H.counted()
  if not review then
    return
  end
  require("amp.review").forget(review)
  vim.schedule(function()
    view.close(review, function()
      H.delete_buffers(review)
    end)
  end)
end

function H.delete_buffers(review)
  for _, buf in ipairs({ review.left, review.right }) do
    if buf and api.nvim_buf_is_valid(buf) then
      vim.bo[buf].modified = false
      pcall(api.nvim_buf_delete, buf, { force = true })
    end
  end
end

-- Closed without the user ------------------------------------------------------------

--- Closes `item` without a decision (`why`: "agent", "disconnected",
--- "timed_out", "stopped"); a later :w in its view writes nothing.
function M.close(item, why)
  if item.decided or item.closed then
    return false
  end
  item.closed = why
  M.items[item.key] = nil
  H.fire("AmpReviewDecided", { name = item.name, path = item.path, agent = item.agent, accepted = false, closed = why })
  H.drop(item)
  return true
end

--- The proposals waiting, oldest first.
function M.list()
  local out = vim.tbl_values(M.items)
  table.sort(out, function(a, b)
    return a.arrived < b.arrived
  end)
  return out
end

function M.count()
  return vim.tbl_count(M.items)
end

-- Helpers ---------------------------------------------------------------------

function H.notify(msg, level)
  require("amp.notify").notify(msg, level)
end

function H.fire(pattern, data)
  api.nvim_exec_autocmds("User", { pattern = pattern, modeline = false, data = data })
end

function H.counted()
  local ok, connection = pcall(require, "amp.connection")
  if ok and connection.refresh then
    connection.refresh()
  end
end

return M
