-- For src/nvim/annotations.rs: the documents OpenCtx annotates and drawing
-- the annotations' titles.

local api = vim.api
local H = ... -- every helper (see src/nvim/lua.rs), for those of other files
local M = {}

--- The text of a file buffer if it is no bigger than `max_bytes`:
--- name, text, changedtick (nil when not a file or too big).
function M.document(buf, max_bytes)
  if buf == 0 then
    buf = api.nvim_get_current_buf()
  end
  if not api.nvim_buf_is_valid(buf) or not api.nvim_buf_is_loaded(buf) then
    return nil
  end
  local name = H.file_of(buf)
  if not name then
    return nil
  end
  if api.nvim_buf_get_offset(buf, api.nvim_buf_line_count(buf)) > max_bytes then
    return nil, buf
  end
  return name, table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), "\n"), api.nvim_buf_get_changedtick(buf), buf
end

-- The virt_text of an annotated line, rebuilt in place for each line
-- (Neovim copies it): drawing leaves little garbage behind.
local FIRST = { " ", "AmpAnnotationSeparator" }
local BETWEEN = { " · ", "AmpAnnotationSeparator" }
local chunks, title_chunks = {}, {}
local mark_opts = { virt_text = chunks, virt_text_pos = "eol", hl_mode = "combine" }

--- Fills `chunks` with the `count` titles that start at `at` in `text`, one
--- per line; returns where the text goes on.
local function read_titles(text, at, count)
  for i = 1, count do
    local newline = text:find("\n", at, true)
    title_chunks[i] = title_chunks[i] or { "", "AmpAnnotation" }
    title_chunks[i][1] = text:sub(at, newline - 1)
    chunks[2 * i - 1] = i == 1 and FIRST or BETWEEN
    chunks[2 * i] = title_chunks[i]
    at = newline + 1
  end
  for i = #chunks, 2 * count + 1, -1 do
    chunks[i] = nil -- left from a line with more titles
  end
  return at
end

--- Draws annotation titles at the end of their lines. `text` holds, per
--- line, "<row> <number of titles>\n" then each title and "\n" (built by
--- lines_text in src/nvim/annotations.rs). Called by the annotations'
--- decoration provider for the lines coming into view, during a redraw.
function M.draw_annotations(buf, ns, text)
  local at = 1
  while at <= #text do
    local row, count, titles_at = text:match("^(%d+) (%d+)\n()", at)
    at = read_titles(text, titles_at, tonumber(count))
    api.nvim_buf_set_extmark(buf, ns, tonumber(row), 0, mark_opts)
  end
end

return M
