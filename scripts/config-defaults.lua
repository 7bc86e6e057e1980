-- Writes lua/amp/config/defaults.lua: every option's default and how the
-- native `start` options are taken from a configuration, from
-- lua/amp/config/schema.lua, so that the defaults (`get_config()` after
-- `setup({})`, the start's comparisons) are a table constructor instead
-- of the schema built (see lua/amp/core.lua). Run it after changing a
-- default:
--
--   nvim --headless -u NONE -l scripts/config-defaults.lua [--check]
--
-- `--check` writes nothing and exits 1 when the file is stale
-- (tests/integration/test_config.py runs it).
local script = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p")
local root = vim.fs.dirname(vim.fs.dirname(script))
vim.opt.runtimepath:prepend(root)

-- Written as it is after the generated functions: what resolving the
-- defaults takes besides them, so the defaults need this file alone
-- (amp.config uses the same functions for every configuration).
local resolving = [[
-- A deep copy of an options table (no cycles); metatables are kept
-- (`vim.empty_dict()` must stay one).
function M.copy(value)
  if type(value) ~= "table" then
    return value
  end
  local out = {}
  for k, v in pairs(value) do
    out[k] = M.copy(v)
  end
  return setmetatable(out, getmetatable(value))
end

-- The log file's path made absolute and normal, the level lower case, a
-- `{ min = , max = }` port range a list; `config` is changed and returned.
function M.normalize(config)
  local log_file = config.log_file or (vim.fn.stdpath("log") .. "/amp.log")
  -- An absolute path without `//`, `.` or `..` parts, a trailing `/`,
  -- `~`, `$` or `\` is already what normalizing gives (as stdpath()'s
  -- usually is): vim.fs is not loaded for it. (src/nvim/log_file.rs makes
  -- the same test for the library's default log file.)
  local plain = log_file:sub(1, 1) == "/"
    and not log_file:find("//", 1, true)
    and not log_file:find("/%.%.?/")
    and not log_file:find("/%.?%.?$")
    and not log_file:find("[\\~$]")
  config.log_file = plain and log_file or vim.fn.fnamemodify(vim.fs.normalize(log_file), ":p")
  config.log_level = config.log_level:lower()
  local range = config.server.port_range
  if range ~= nil then
    config.server.port_range = { range.min or range[1], range.max or range[2] }
  end
  return config
end

-- The configuration of `setup({})`: the defaults, resolved.
function M.resolved()
  return M.normalize(M.defaults())
end
]]

-- amp.config loads the file this writes: not this time (it may be stale
-- or missing); only the functions written as they are come from it.
local written = {}
assert(load("local M = ...\n" .. resolving, "=resolving"))(written)
package.loaded["amp.config.defaults"] = written
local config = require("amp.config")

local function key_of(k)
  if type(k) == "string" and k:match("^[%a_][%w_]*$") then
    return k
  end
  return ("[%q]"):format(k)
end

local function source(value, indent)
  if type(value) == "string" then
    return ("%q"):format(value)
  elseif type(value) ~= "table" then
    return tostring(value)
  elseif getmetatable(value) == getmetatable(vim.empty_dict()) then
    assert(next(value) == nil, "a non-empty vim.empty_dict()")
    return "vim.empty_dict()"
  elseif next(value) == nil then
    return "{}"
  end
  local inner = indent .. "  "
  local lines = {}
  if vim.islist(value) then
    for _, v in ipairs(value) do
      lines[#lines + 1] = inner .. source(v, inner) .. ","
    end
  else
    local keys = vim.tbl_keys(value)
    table.sort(keys, function(a, b)
      return tostring(a) < tostring(b)
    end)
    for _, k in ipairs(keys) do
      lines[#lines + 1] = ("%s%s = %s,"):format(inner, key_of(k), source(value[k], inner))
    end
  end
  return "{\n" .. table.concat(lines, "\n") .. "\n" .. indent .. "}"
end

-- native(config, copy): the native options of a resolved configuration,
-- one field each (`copy` copies a table value), from the schema's `rust`
-- names.
local function native_source()
  local tree = {}
  for _, option in ipairs(config.schema) do
    if option.rust then
      local node = tree
      local parts = vim.split(option.rust, ".", { plain = true })
      for i = 1, #parts - 1 do
        node[parts[i]] = node[parts[i]] or {}
        node = node[parts[i]]
      end
      local access = "c"
      for _, part in ipairs(vim.split(option.name, ".", { plain = true })) do
        access = access .. "." .. part
      end
      node[parts[#parts]] = { access = access, table = type(option.default) == "table" or option.default == nil }
    end
  end
  local function emit(node, indent)
    local keys = vim.tbl_keys(node)
    table.sort(keys)
    local lines = {}
    for _, k in ipairs(keys) do
      local v = node[k]
      local text
      if v.access then
        text = v.table and ("copy(%s)"):format(v.access) or v.access
      else
        text = emit(v, indent .. "  ")
      end
      lines[#lines + 1] = ("%s  %s = %s,"):format(indent, key_of(k), text)
    end
    return "{\n" .. table.concat(lines, "\n") .. "\n" .. indent .. "}"
  end
  return emit(tree, "  ")
end

local text = table.concat({
  "-- Generated by scripts/config-defaults.lua from lua/amp/config/schema.lua:",
  "-- do not edit (tests/integration/test_config.py fails when it is stale).",
  "-- The defaults are read from here instead of the schema built.",
  "-- stylua: ignore",
  "local M = {}",
  "",
  "-- Every option's default (log_file is filled in when resolved), in new",
  "-- tables the caller owns.",
  "function M.defaults()",
  "  return " .. source(config.defaults, "  "),
  "end",
  "",
  "-- The options native `start` takes from a resolved configuration `c`,",
  "-- under their native names (each option's `rust` in the schema); `copy`",
  "-- copies a table (M.copy when nil).",
  "function M.native(c, copy)",
  "  copy = copy or M.copy",
  "  return " .. native_source(),
  "end",
  "",
  resolving .. "",
  "return M",
  "",
}, "\n")

local path = vim.fs.joinpath(root, "lua", "amp", "config", "defaults.lua")
local f = io.open(path, "rb")
local current = f and f:read("*a")
if f then
  f:close()
end
if vim.tbl_contains(arg, "--check") then
  if current ~= text then
    io.stderr:write(path .. " is stale: run nvim --headless -u NONE -l scripts/config-defaults.lua\n")
    os.exit(1)
  end
  return
end
if current ~= text then
  f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  print("wrote " .. path)
end
