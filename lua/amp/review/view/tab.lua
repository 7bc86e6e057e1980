--- The "tab" layout: a tab page of its own, the old text left and the new
--- text right, both in diff mode.
local M = {}

local api = vim.api

function M.open(review)
  vim.cmd.tabnew()
  local tab = api.nvim_get_current_tabpage()
  local placeholder = api.nvim_get_current_buf()
  local left = api.nvim_get_current_win()
  review.view = { tab = tab, left = left }
  api.nvim_win_set_buf(left, review.left)
  if placeholder ~= review.left and api.nvim_buf_is_valid(placeholder) then
    pcall(api.nvim_buf_delete, placeholder, { force = true })
  end
  vim.cmd.vsplit({ mods = { split = "belowright" } })
  review.view.right = api.nvim_get_current_win()
  api.nvim_win_set_buf(review.view.right, review.right)
end

function M.windows(review)
  local v = review.view or {}
  return { left = v.left, right = v.right }
end

--- Past this many lines (both sides together) the windows are put in diff
--- mode without diff folding: Neovim computes the folds of every line
--- against every hunk (1.3 s of a 2.8 s stall for two 15 MiB sides; the
--- diff itself is 0.15 s), and ]c / [c move between hunks anyway.
M.fold_max_lines = 40000

function M.start(review)
  local lines = api.nvim_buf_line_count(review.left) + api.nvim_buf_line_count(review.right)
  for _, win in pairs(M.windows(review)) do
    if api.nvim_win_is_valid(win) then
      if lines <= M.fold_max_lines then
        api.nvim_win_call(win, function()
          vim.cmd.diffthis()
        end)
      else
        vim.wo[win].scrollbind = true
        vim.wo[win].cursorbind = true
        vim.wo[win].wrap = false
        vim.wo[win].diff = true
      end
    end
  end
end

--- Leaves diff mode (either way `start` entered it).
function M.diff_off(win)
  api.nvim_win_call(win, function()
    vim.cmd.diffoff()
  end)
  vim.wo[win].scrollbind = false
  vim.wo[win].cursorbind = false
end

function M.refresh(review)
  local win = review.view and review.view.right
  if win and api.nvim_win_is_valid(win) then
    api.nvim_win_call(win, function()
      vim.cmd.diffupdate()
    end)
  end
end

function M.focus(review)
  local v = review.view
  if v and api.nvim_tabpage_is_valid(v.tab) then
    api.nvim_set_current_tabpage(v.tab)
    if api.nvim_win_is_valid(v.right) then
      api.nvim_set_current_win(v.right)
    end
  end
end

function M.close(review)
  local v = review.view
  if not (v and v.tab and api.nvim_tabpage_is_valid(v.tab)) then
    return
  end
  local wins = api.nvim_tabpage_list_wins(v.tab)
  for _, win in ipairs(wins) do
    M.diff_off(win)
  end
  if #api.nvim_list_tabpages() > 1 then
    for _, win in ipairs(wins) do
      pcall(api.nvim_win_close, win, true)
    end
  end
end

return M
