--- Where and how a review is shown: the layout (`review.layout`, see
--- |amp-config-review.layout|) makes and closes its windows; this module
--- does what every layout shares: refusing to start where windows may not
--- change, cleaning up what a failed start made, the winbars, the review's
--- keys, and noticing that the user closed the view.
---
--- A layout module has `open(review)` (windows showing `review.left` and
--- `review.right`, the right one current; records them in `review.view`),
--- `start(review)` (the texts are in: diff mode or marks), `refresh(review)`
--- (after a hunk was decided), `focus(review)` and `close(review)`, and
--- `windows(review)` -> { left = win|nil, right = win }.
local M = {}
local H = {}

local api = vim.api

M.layouts = {
  tab = "amp.review.view.tab",
  split = "amp.review.view.split",
  inline = "amp.review.view.inline",
}

function H.layout(review)
  return require(M.layouts[review.layout] or M.layouts.tab)
end

--- Why no window can change now (nil: they can).
function M.blocked()
  if vim.fn.getcmdwintype() ~= "" then
    return "the command-line window is open (close it, then :Amp review)"
  end
  return nil
end

--- Shows `review` (its buffers exist). Nothing stays behind when it
--- fails: returns false and why.
function M.open(review)
  local why = M.blocked()
  if why then
    return false, why
  end
  local layout = H.layout(review)
  local ok, err = pcall(layout.open, review)
  if not ok then
    pcall(layout.close, review)
    return false, tostring(err)
  end
  M.map_keys(review)
  M.set_winbars(review)
  M.watch(review)
  return true
end

--- The texts are in the buffers: diff mode (or the inline marks).
function M.start(review)
  review.started = true
  H.layout(review).start(review)
  vim.cmd.redrawstatus({ bang = true })
end

function M.refresh(review)
  if review.started then
    H.layout(review).refresh(review)
  end
end

function M.focus(review)
  H.layout(review).focus(review)
end

--- Closes the view's windows, then calls `after()` (which deletes the
--- buffers that are the review's own). No window may close while the
--- command-line window is open: then both wait until it closes.
function M.close(review, after)
  if M.blocked() then
    api.nvim_create_autocmd("CmdwinLeave", {
      once = true,
      callback = function()
        vim.schedule(function()
          M.close(review, after)
        end)
      end,
    })
    return
  end
  if not review.view_closed then
    review.view_closed = true
    M.unmap_keys(review)
    if review.group then
      pcall(api.nvim_del_augroup_by_id, review.group)
      review.group = nil
    end
    M.clear_winbars(review)
    if review.view then
      pcall(H.layout(review).close, review)
    end
  end
  if after then
    after()
  end
end

--- The window a split or inline view opens beside: the current one if it
--- is an ordinary window, else the previous one, else the first ordinary
--- window of the tab page (an agent's terminal or a float is never split
--- or taken over). nil: none.
function M.target_window()
  local function ordinary(win)
    if not (win and win ~= 0 and api.nvim_win_is_valid(win)) then
      return false
    end
    local buf = api.nvim_win_get_buf(win)
    return api.nvim_win_get_config(win).relative == "" and vim.bo[buf].buftype ~= "terminal"
  end
  local current = api.nvim_get_current_win()
  if ordinary(current) then
    return current
  end
  local previous = vim.fn.win_getid(vim.fn.winnr("#"))
  if ordinary(previous) then
    return previous
  end
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if ordinary(win) then
      return win
    end
  end
  return nil
end

-- Winbars ----------------------------------------------------------------------

--- The reviews' windows: window id -> { review, side = "left"|"right" }.
M.shown = {}

--- The winbar of a review's window, made at each redraw for its width:
--- the key facts first, then what the review is about, cut at the end.
M.WINBAR = "%{%v:lua.require'amp.review.view'.winbar()%}"

--- The text of the winbar of `win` (default: the window being drawn).
function M.winbar_text(win)
  local shown = M.shown[win]
  if not shown then
    return ""
  end
  local review = shown.review
  if shown.side == "left" then
    return review.kind.left_label .. " · " .. review.title
  end
  if review.started == false then
    return "amp: loading the proposal… · " .. review.title
  end
  local keys = require("amp.review.config").keys()
  local facts = { review.kind.facts(review) }
  local a, r = keys.accept_hunk, keys.reject_hunk
  if a and r then
    table.insert(facts, a .. "/" .. r .. " hunk")
  elseif a or r then
    table.insert(facts, (a or r) .. " hunk")
  end
  local text = table.concat(facts, " · ") .. " │ " .. review.title
  if review.note then
    text = text .. " | " .. review.note
  end
  return text
end

function M.winbar()
  local win = vim.g.statusline_winid or api.nvim_get_current_win()
  local text = M.winbar_text(win)
  local width = api.nvim_win_is_valid(win) and api.nvim_win_get_width(win) or 80
  if vim.fn.strdisplaywidth(text) > width then
    text = vim.fn.strcharpart(text, 0, math.max(width - 1, 1)) .. "…"
    while vim.fn.strdisplaywidth(text) > width and vim.fn.strchars(text) > 1 do
      text = vim.fn.strcharpart(text, 0, vim.fn.strchars(text) - 2) .. "…"
    end
  end
  return (text:gsub("%%", "%%%%"))
end

function M.set_winbars(review)
  for side, win in pairs(H.layout(review).windows(review)) do
    if api.nvim_win_is_valid(win) then
      -- A window the review borrows (split) gets its own winbar back.
      local before = M.shown[win] and M.shown[win].before or vim.wo[win].winbar
      M.shown[win] = { review = review, side = side, before = before }
      vim.wo[win].winbar = M.WINBAR
    end
  end
end

function M.clear_winbars(review)
  for win, shown in pairs(M.shown) do
    if shown.review == review then
      M.shown[win] = nil
      if api.nvim_win_is_valid(win) and vim.wo[win].winbar == M.WINBAR then
        vim.wo[win].winbar = shown.before or ""
      end
    end
  end
end

-- Keys -------------------------------------------------------------------------

function M.map_keys(review)
  local keys = require("amp.review.config").keys()
  local review_module = require("amp.review")
  local actions = {
    accept_hunk = { review_module.accept_hunk, "amp: accept the hunk under the cursor" },
    reject_hunk = { review_module.reject_hunk, "amp: reject the hunk under the cursor" },
    accept_all = { review_module.accept_all, "amp: accept every hunk" },
    reject_all = { review_module.reject_all, "amp: reject every hunk" },
  }
  review.mapped = review.mapped or {}
  for _, buf in ipairs({ review.left, review.right }) do
    for action, spec in pairs(actions) do
      local lhs = keys[action]
      if lhs then
        vim.keymap.set("n", lhs, function()
          spec[1](review.key)
        end, { buffer = buf, nowait = true, desc = spec[2] })
        table.insert(review.mapped, { buf = buf, lhs = lhs })
      end
    end
  end
end

function M.unmap_keys(review)
  for _, m in ipairs(review.mapped or {}) do
    if api.nvim_buf_is_valid(m.buf) then
      pcall(vim.keymap.del, "n", m.lhs, { buffer = m.buf })
    end
  end
  review.mapped = {}
end

-- The user closing the view ------------------------------------------------------

--- Closing a window of the view, or hiding a buffer only the review shows,
--- ends the review: `review.kind.closed_by_user(review)`.
function M.watch(review)
  review.group = api.nvim_create_augroup("amp_review_" .. review.left, { clear = true })
  local function ended()
    if not review.view_closed then
      review.kind.closed_by_user(review)
    end
  end
  for _, win in pairs(H.layout(review).windows(review)) do
    api.nvim_create_autocmd("WinClosed", { group = review.group, pattern = tostring(win), callback = ended })
  end
  local owned = { review.left }
  if review.kind.owns_right then
    table.insert(owned, review.right)
  end
  for _, buf in ipairs(owned) do
    api.nvim_create_autocmd({ "BufHidden", "BufWipeout" }, { group = review.group, buffer = buf, callback = ended })
  end
end

return M
