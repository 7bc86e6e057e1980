--- Line arithmetic of a review's two sides: text as lines and back, the
--- hunks between two lists of lines, the hunk under a cursor, and setting
--- one side of a hunk.
---
--- A hunk is `{ start_a, count_a, start_b, count_b }` (1-based; a count of
--- 0 means "after line start"), as `vim.diff` gives them.
local M = {}

local api = vim.api
local diff = (vim.text and vim.text.diff) or vim.diff

function M.lines(buf)
  return api.nvim_buf_get_lines(buf, 0, -1, false)
end

--- `lines` joined with `nl` ("\n" by default), with a final one if `eol`.
function M.join(lines, eol, nl)
  nl = nl or "\n"
  local text = table.concat(lines, nl)
  if eol and #lines > 0 then
    text = text .. nl
  end
  return text
end

--- The hunks between two lists of lines.
function M.between(a, b)
  local ta = #a > 0 and (table.concat(a, "\n") .. "\n") or ""
  local tb = #b > 0 and (table.concat(b, "\n") .. "\n") or ""
  return diff(ta, tb, { result_type = "indices" })
end

--- The hunks between the buffers `left` and `right`.
function M.of(left, right)
  return M.between(M.lines(left), M.lines(right))
end

--- The hunk of `hunks` that covers line `row` of side "a" or "b".
function M.at(hunks, side, row)
  for _, h in ipairs(hunks) do
    local start, count = h[1], h[2]
    if side == "b" then
      start, count = h[3], h[4]
    end
    if count == 0 then
      -- Nothing on this side: the lines next to where it would be.
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
function M.slice(lines, start, count)
  return count == 0 and {} or vim.list_slice(lines, start, start + count - 1)
end

--- Replaces the hunk's side in `buf` (which shows side `side`) with `lines`.
function M.set(buf, h, side, lines)
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

--- Makes the text of `buf` `lines`, touching only the lines that differ
--- (marks and the cursor elsewhere stay), as one undo step.
function M.replace_all(buf, lines)
  local hunks = M.between(M.lines(buf), lines)
  if #hunks == 0 then
    return
  end
  api.nvim_buf_call(buf, function()
    -- Its own undo step (:help undo-break).
    vim.cmd("let &g:undolevels = &g:undolevels")
  end)
  for i = #hunks, 1, -1 do
    local h = hunks[i]
    M.set(buf, h, "a", M.slice(lines, h[3], h[4]))
  end
end

return M
