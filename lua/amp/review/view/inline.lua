--- The "inline" layout: one new window beside the current one shows the
--- new text, with the lines it removes shown above (or below) their place
--- as virtual lines and the lines it adds highlighted: a unified diff you
--- can edit. The hunks are decided with the same keys; the marks follow
--- every change.
local M = {}
local H = {}

local api = vim.api
local hunks = require("amp.review.hunks")

M.ns = api.nvim_create_namespace("amp_review_inline")

-- Highlight groups (|amp-highlights|): a user's own definition wins.
api.nvim_set_hl(0, "AmpReviewAdded", { default = true, link = "DiffAdd" })
api.nvim_set_hl(0, "AmpReviewRemoved", { default = true, link = "DiffDelete" })

function M.open(review)
  local target = require("amp.review.view").target_window()
  if not target then
    error("no window to show the review beside")
  end
  api.nvim_set_current_win(target)
  vim.cmd.vsplit({ mods = { split = "belowright" } })
  review.view = { right = api.nvim_get_current_win() }
  api.nvim_win_set_buf(review.view.right, review.right)
end

function M.windows(review)
  return { right = review.view and review.view.right }
end

function M.start(review)
  H.render(review)
  -- The marks follow the user's edits and the hunks decided.
  review.view.attached = true
  api.nvim_buf_attach(review.right, false, {
    on_lines = function()
      if not review.view.attached then
        return true
      end
      H.render_soon(review)
    end,
    on_detach = function()
      review.view.attached = false
    end,
  })
end

function M.refresh(review)
  H.render(review)
end

function M.focus(review)
  local win = review.view and review.view.right
  if win and api.nvim_win_is_valid(win) then
    api.nvim_set_current_win(win)
  end
end

function M.close(review)
  local v = review.view
  if not v then
    return
  end
  v.attached = false
  if api.nvim_buf_is_valid(review.right) then
    api.nvim_buf_clear_namespace(review.right, M.ns, 0, -1)
  end
  if v.right and api.nvim_win_is_valid(v.right) then
    if #api.nvim_tabpage_list_wins(0) > 1 then
      pcall(api.nvim_win_close, v.right, true)
    end
  end
end

function H.render_soon(review)
  if review.view.render_queued then
    return
  end
  review.view.render_queued = true
  vim.schedule(function()
    review.view.render_queued = false
    if review.view.attached then
      H.render(review)
    end
  end)
end

--- Marks the hunks of `review` in its right buffer.
function H.render(review)
  local buf = review.right
  if not (api.nvim_buf_is_valid(buf) and api.nvim_buf_is_valid(review.left)) then
    return
  end
  api.nvim_buf_clear_namespace(buf, M.ns, 0, -1)
  local old = hunks.lines(review.left)
  local line_count = api.nvim_buf_line_count(buf)
  for _, h in ipairs(hunks.of(review.left, buf)) do
    local removed = {}
    for _, line in ipairs(hunks.slice(old, h[1], h[2])) do
      table.insert(removed, { { line, "AmpReviewRemoved" } })
    end
    if #removed > 0 then
      -- Above the first new line of the hunk, or, when it adds none, below
      -- the line after which the removed ones were.
      local row, above = h[3] - 1, true
      if h[4] == 0 then
        row, above = math.max(h[3] - 1, 0), h[3] == 0
      end
      row = math.min(row, line_count - 1)
      api.nvim_buf_set_extmark(buf, M.ns, row, 0, { virt_lines = removed, virt_lines_above = above })
    end
    for row = h[3] - 1, h[3] + h[4] - 2 do
      api.nvim_buf_set_extmark(buf, M.ns, row, 0, { line_hl_group = "AmpReviewAdded" })
    end
  end
end

return M
