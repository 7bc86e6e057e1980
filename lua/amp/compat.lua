--- What differs between the Neovim versions amp.nvim-rs runs on (0.10, 0.11,
--- 0.12): each function uses Neovim's own where it exists and does the same
--- with 0.10's API otherwise. Loaded only by code that needs it.
local M = {}

local fn = vim.fn

--- `vim.fs.relpath(base, target)` (0.11): `target` relative to `base`, or
--- nil when it is not under it.
---@param base string
---@param target string
---@return string|nil
function M.relpath(base, target)
  if vim.fs.relpath then
    return vim.fs.relpath(base, target)
  end
  base = vim.fs.normalize(fn.fnamemodify(base, ":p"))
  target = vim.fs.normalize(fn.fnamemodify(target, ":p"))
  if base ~= "/" then
    base = base:gsub("/+$", "")
  end
  target = target ~= "/" and target:gsub("/+$", "") or target
  if base == target then
    return "."
  end
  base = base .. (base ~= "/" and "/" or "")
  return vim.startswith(target, base) and target:sub(#base + 1) or nil
end

--- The byte index of UTF-16 index `index` in `text` (0-based), like
--- `vim.str_byteindex(text, "utf-16", index, false)` (the 0.11 form; 0.10
--- has only `vim.str_byteindex(text, index, true)`, which 0.12 deprecates).
---@param text string
---@param index integer
---@return integer
function M.byteindex_utf16(text, index)
  if vim.fn.has("nvim-0.11") == 1 then
    return vim.str_byteindex(text, "utf-16", index, false)
  end
  return vim.str_byteindex(text, index, true)
end

--- `vim.notify(msg, level, { title = "amp" })`, but an error on Neovim
--- 0.10 with its own vim.notify is echoed as ErrorMsg: 0.10's vim.notify
--- raises it with nvim_err_writeln, which while a config file is sourced
--- adds "Error detected while processing ..." and "line N:" lines and so a
--- hit-enter prompt. (0.11 and later, and notification plugins, show one line.)
---@param msg string
---@param level integer
function M.notify(msg, level)
  if level == vim.log.levels.ERROR and fn.has("nvim-0.11") == 0 then
    local info = debug.getinfo(vim.notify, "S")
    if info and info.source and info.source:find("vim/_editor.lua", 1, true) then
      vim.api.nvim_echo({ { msg, "ErrorMsg" } }, true, {})
      return
    end
  end
  vim.notify(msg, level, { title = "amp" })
end

--- Start `cmd` as a terminal job in the current buffer (which must be an
--- empty, unmodified one): jobstart({ term = true }) on 0.11+, termopen()
--- on 0.10, which has no `term` option (and 0.12 deprecates termopen()).
---@param cmd string[]
---@param opts table jobstart() options
---@return integer job
function M.term_start(cmd, opts)
  if fn.has("nvim-0.11") == 1 then
    return fn.jobstart(cmd, vim.tbl_extend("force", opts, { term = true }))
  end
  return fn.termopen(cmd, opts)
end

M.has_getregionpos = fn.exists("*getregionpos") == 1

--- Byte length of the character at byte `col` (0-based) of `line`,
--- composing characters included (1 past the end of the line).
local function char_len(line, col)
  local n = fn.byteidx(line:sub(col + 1), 1)
  return n > 0 and n or 1
end

--- Start of the character before byte `col` (0-based) of `line`.
local function prev_char(line, col)
  return fn.byteidx(line, fn.charidx(line, col - 1))
end

local function before(a, b)
  return a[2] < b[2] or (a[2] == b[2] and (a[3] < b[3] or (a[3] == b[3] and a[4] < b[4])))
end

--- `getregionpos(pos1, pos2, { type = ..., eol = true })` of the current
--- buffer (0.11): for each line of the region `{ {buf, lnum, col, off},
--- {buf, lnum, col, off} }` with 1-based byte columns, the end one that of
--- the last selected byte (`#line + 1` past the end of the line). On 0.10 it
--- is computed the way Neovim 0.11 does for 'virtualedit' off; the offsets
--- (`off`) are 0.
---@param pos1 integer[] as getpos() gives it
---@param pos2 integer[]
---@param opts { type: string, eol: boolean? }
---@return table[]
function M.getregionpos(pos1, pos2, opts)
  if M.has_getregionpos then
    return fn.getregionpos(pos1, pos2, opts)
  end
  return M.emulated_getregionpos(pos1, pos2, opts)
end

--- The 0.10 path of `getregionpos()` (public for the tests, which compare it
--- with Neovim's own where there is one).
function M.emulated_getregionpos(pos1, pos2, opts)
  local buf = fn.bufnr()
  local count = vim.api.nvim_buf_line_count(0)
  local p1 = { 0, pos1[2], pos1[3], pos1[4] or 0 }
  local p2 = { 0, pos2[2], pos2[3], pos2[4] or 0 }
  local function line_of(lnum)
    return vim.api.nvim_buf_get_lines(0, lnum - 1, lnum, true)[1]
  end
  for _, p in ipairs({ p1, p2 }) do
    if p[2] < 1 or p[2] > count then
      return {}
    end
    local len = #line_of(p[2])
    if p[3] >= 2147483647 then
      p[3] = len + 1
    elseif p[3] < 1 or p[3] > len + 1 then
      return {}
    end
    p[3] = p[3] - 1 -- 0-based from here on
  end
  if not before(p1, p2) then
    p1, p2 = p2, p1
  end
  local exclusive = vim.o.selection == "exclusive"
  local kind = opts.type or "v"
  local out = {}
  local function add(lnum, c1, c2)
    local len = #line_of(lnum)
    if not opts.eol and c1 > len then
      c1 = 0
    elseif c1 > len + 1 then
      c1 = len + 1
    end
    if not opts.eol and c2 > len then
      c2 = c1 == 0 and 0 or len
    elseif c2 > len + 1 then
      c2 = len + 1
    end
    out[#out + 1] = { { buf, lnum, c1, 0 }, { buf, lnum, c2, 0 } }
  end

  if kind == "V" then
    for lnum = p1[2], p2[2] do
      add(lnum, 1, math.huge)
    end
    return out
  end

  if kind == "v" then
    local inclusive = true
    if exclusive and (p1[2] ~= p2[2] or p1[3] ~= p2[3]) then
      -- unadjust_for_sel_inner(): back to the previous character.
      if p2[3] > 0 then
        p2[3] = prev_char(line_of(p2[2]), p2[3])
      elseif p2[2] > 1 then
        p2[2] = p2[2] - 1
        p2[3] = #line_of(p2[2])
        inclusive = false
      end
    end
    local last = line_of(p2[2])
    if inclusive and p2[3] >= #last then
      inclusive = false -- on the end of the line
    end
    p2[3] = p2[3] + char_len(last, p2[3]) - 1
    for lnum = p1[2], p2[2] do
      local startcol = lnum == p1[2] and p1[3] or 0
      local endcol = lnum == p2[2] and p2[3] or #line_of(lnum)
      local textlen = startcol > endcol and 0 or (endcol - startcol + (inclusive and 1 or 0))
      add(lnum, startcol + 1, startcol + textlen)
    end
    return out
  end

  -- Blockwise: the columns between the leftmost start and rightmost end
  -- screen column of the two corners.
  local function vcols(p)
    local v = fn.virtcol({ p[2], p[3] + 1, p[4] }, 1)
    return v[1] - 1, v[2] - 1
  end
  local sc1, ec1 = vcols(p1)
  local sc2, ec2 = vcols(p2)
  local start_vcol = math.min(sc1, sc2)
  local width = tonumber(kind:sub(2)) or 0
  local end_vcol
  if width > 0 then
    end_vcol = start_vcol + width - 1
  elseif exclusive and ec1 < sc2 and 0 < sc2 and ec2 > ec1 then
    end_vcol = sc2 - 1
  else
    end_vcol = math.max(ec1, ec2)
  end
  local win = vim.api.nvim_get_current_win()
  for lnum = p1[2], p2[2] do
    local line = line_of(lnum)
    local line_width = fn.virtcol({ lnum, "$" }) - 1
    if start_vcol > line_width then
      add(lnum, #line + 1, #line + 1) -- wholly past the end of the line
    elseif start_vcol == line_width then
      add(lnum, #line + 1, #line) -- just past it: nothing selected
    else
      local c1 = fn.virtcol2col(win, lnum, start_vcol + 1)
      local last = math.min(end_vcol, line_width - 1)
      local c2 = fn.virtcol2col(win, lnum, last + 1)
      local char_start, char_end = unpack(fn.virtcol({ lnum, c2 }, 1))
      local inside_one = c1 == c2 and start_vcol > char_start - 1 -- starts past the char's start
      if end_vcol >= char_end - 1 and not inside_one then
        c2 = c2 + char_len(line, c2 - 1) - 1 -- the whole last character
      end
      add(lnum, c1, c2)
    end
  end
  return out
end

return M
