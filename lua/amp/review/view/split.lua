--- The "split" layout: in the current tab page, the window the user was in
--- shows the old text and a new window beside it the new text, both in
--- diff mode; the other windows (the agent's terminal) stay. When the
--- review ends the window shows what it showed before, where it was.
local M = {}

local api = vim.api

function M.open(review)
  local target = require("amp.review.view").target_window()
  if not target then
    error("no window to show the review beside")
  end
  api.nvim_set_current_win(target)
  review.view = { target = target, prev_buf = api.nvim_win_get_buf(target), saved = vim.fn.winsaveview() }
  vim.cmd.vsplit({ mods = { split = "belowright" } })
  review.view.right = api.nvim_get_current_win()
  api.nvim_win_set_buf(review.view.right, review.right)
  api.nvim_win_set_buf(target, review.left)
  review.view.left = target
end

function M.windows(review)
  local v = review.view or {}
  return { left = v.left, right = v.right }
end

M.start = require("amp.review.view.tab").start
M.refresh = require("amp.review.view.tab").refresh

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
  for _, win in ipairs({ v.left, v.right }) do
    if win and api.nvim_win_is_valid(win) then
      require("amp.review.view.tab").diff_off(win)
    end
  end
  if v.right and api.nvim_win_is_valid(v.right) and #api.nvim_tabpage_list_wins(0) > 1 then
    pcall(api.nvim_win_close, v.right, true)
  end
  local target = v.target
  if target and api.nvim_win_is_valid(target) and api.nvim_win_get_buf(target) == review.left then
    local back = v.prev_buf
    if not (back and api.nvim_buf_is_valid(back)) or back == review.left or back == review.right then
      back = (not review.kind.owns_right and api.nvim_buf_is_valid(review.right)) and review.right
        or api.nvim_create_buf(true, false)
    end
    api.nvim_win_set_buf(target, back)
    api.nvim_win_call(target, function()
      vim.fn.winrestview(v.saved)
    end)
  end
end

return M
