--- Finds and loads the Rust library (`amp_core`) and calls into it.
---
--- The library is loaded with `package.loadlib` from a fixed list of paths inside
--- the plugin directory, never through `package.cpath`, so a stale copy elsewhere
--- on the system cannot be picked up by accident.
---
--- A native function returns its value or raises an error whose text is the
--- whole message (see docs/architecture.md); `M.call` calls it under pcall and
--- returns `value` or `nil, err`.
local M = {}
local H = {}

-- Relative to the plugin root, in the order they are tried (lua/amp/init.lua
-- has the same list, to map the library while Neovim starts).
M.candidates = {
  "target/release/libamp_core.so",
  "target/release/libamp_core.dylib",
  "target/debug/libamp_core.so",
  "lua/amp_core.so",
}

H.root = nil ---@type string?
H.module = nil ---@type table?
H.path = nil ---@type string?

--- The plugin's root directory (the one holding `lua/`, `plugin/`, `target/`).
---@return string
function M.root()
  if not H.root then
    local source = debug.getinfo(1, "S").source:gsub("^@", "")
    local file = vim.uv.fs_realpath(source) or vim.fn.fnamemodify(source, ":p")
    -- <root>/lua/amp/native.lua -> <root> (a string pattern: vim.fs is
    -- not loaded at start-up for this).
    H.root = file:match("^(.*)/lua/amp/native%.lua$") or vim.fs.dirname(vim.fs.dirname(vim.fs.dirname(file)))
  end
  return H.root
end

--- How long after the library loaded it is compared with the plugin's
--- sources (ms).
M.stale_check_delay_ms = 2000

--- Path of the loaded library, or nil when it is not loaded (yet).
---@return string|nil
function M.library_path()
  return H.path
end

--- Whether the library has been loaded in this session (does not try to load it).
---@return boolean
function M.loaded()
  return H.module ~= nil
end

--- Load the library (once; later calls return the cached module).
--- A failure is not cached: building the library and calling again works.
---@return table|nil module
---@return string|nil err
function M.load()
  if H.module then
    return H.module, nil
  end
  local root = M.root()
  local looked, failures = {}, {}
  for _, rel in ipairs(M.candidates) do
    local path = root .. "/" .. rel
    table.insert(looked, path)
    if vim.uv.fs_stat(path) then
      local loader, err = package.loadlib(path, "luaopen_amp_core")
      if loader then
        local ok, mod = pcall(loader)
        if ok and type(mod) == "table" then
          H.module, H.path = mod, path
          -- Well after start-up (not part of it: the server does not need
          -- it), and the file stats on a thread of their own.
          vim.defer_fn(function()
            require("amp.native.stale").report(mod, path, M.root())
          end, M.stale_check_delay_ms)
          return mod, nil
        end
        err = ok and ("luaopen_amp_core returned %s"):format(type(mod)) or tostring(mod)
      end
      err = tostring(err)
      table.insert(failures, vim.startswith(err, path) and err or ("%s: %s"):format(path, err))
    end
  end
  -- One short line (a longer one would stop Neovim at a hit-enter prompt);
  -- where it looked and why loading failed are in M.details() (shown by
  -- :checkhealth amp).
  H.details = ("looked in %s"):format(table.concat(looked, ", "))
  if #failures > 0 then
    H.details = H.details .. "; failed to load: " .. table.concat(failures, "; ")
    return nil, "amp: run :Amp build (see :checkhealth amp): the native library failed to load"
  end
  return nil, "amp: run :Amp build or :Amp install: the native library is not built yet"
end

--- Where the last failed `load()` looked for the library and why loading
--- failed, or nil.
---@return string|nil
function M.details()
  return H.details
end

--- Call a native function.
--- Returns its value, or `nil, err` (the error it raised). A function whose value is nil (e.g. `stop`)
--- returns `nil, nil` on success, so check the second result.
---@param name string
---@return any value
---@return string|nil err
function M.call(name, ...)
  local mod, err = M.load()
  if not mod then
    return nil, err
  end
  local fn = mod[name]
  if type(fn) ~= "function" then
    return nil, ("amp: run :Amp build: the native library is out of date (no function %q)"):format(name)
  end
  -- Native functions raise an error whose text is the whole message.
  local ok, res = pcall(fn, ...)
  if not ok then
    return nil, tostring(res)
  end
  return H.denil(res), nil
end

function H.denil(value)
  if value == vim.NIL then
    return nil
  end
  return value
end

return M
