--- Whether the loaded native library is older than the plugin's code
--- (lua/amp/native.lua runs the check a while after loading it; not on
--- the start-up path).
local M = {}

--- Runs on a thread of its own (its own Lua state: no upvalues): what
--- `M.check` needs from the disk, sent through `async`: Cargo.toml's
--- version (or ""), then, for a library built in `target/`, the first of
--- Cargo.toml, Cargo.lock and src/** newer than it (or "").
local function scan_sources(async, root, library, in_target)
  local uv = vim.uv or vim.loop
  local text = ""
  local f = io.open(root .. "/Cargo.toml", "rb")
  if f then
    text = f:read(65536) or ""
    f:close()
  end
  local version = ("\n" .. text):match('\n%[package%][^%[]-\nversion%s*=%s*"([^"]+)"') or ""
  local built = in_target == "1" and (uv.fs_stat(library) or {}).mtime
  if not built then
    async:send(version, "")
    return
  end
  local function newer(path)
    local st = uv.fs_stat(path)
    return st and (st.mtime.sec > built.sec or (st.mtime.sec == built.sec and st.mtime.nsec > built.nsec))
  end
  for _, rel in ipairs({ "Cargo.toml", "Cargo.lock" }) do
    if newer(root .. "/" .. rel) then
      async:send(version, rel)
      return
    end
  end
  local function walk(dir, rel, depth)
    local handle = uv.fs_scandir(dir)
    while handle do
      local name, kind = uv.fs_scandir_next(handle)
      if not name then
        break
      end
      local path, sub = dir .. "/" .. name, rel == "" and name or (rel .. "/" .. name)
      if kind == "directory" and depth < 4 then
        local found = walk(path, sub, depth + 1)
        if found then
          return found
        end
      elseif kind == "file" and newer(path) then
        return "src/" .. sub
      end
    end
    return nil
  end
  async:send(version, walk(root .. "/src", "", 1) or "")
end

--- Why the library `module`, loaded from `path`, is older than the
--- plugin's code under `root`, or nil: its version is not the plugin's
--- (Cargo.toml), or, built in `target/`, a source file is newer than it.
--- `on_done(why)` on the main thread; the files are looked at on a worker
--- thread (dozens of stats: not the main thread's work).
---@param module table
---@param path string
---@param root string
---@param on_done fun(why: string|nil)
function M.check(module, path, root, on_done)
  local ok, res = pcall(module.version)
  local own = ok and type(res) == "string" and res or nil
  local in_target = vim.startswith(path, vim.fs.joinpath(root, "target")) and "1" or "0"
  -- A thread of its own (not the libuv pool, whose four threads would be
  -- started for this), which answers through an async handle.
  local answer
  answer = vim.uv.new_async(function(version, newer)
    answer:close()
    vim.schedule(function()
      if version ~= "" and own and own ~= version then
        return on_done(
          ("run :Amp install or :Amp build: the native library is v%s, the plugin v%s"):format(own, version)
        )
      end
      if newer ~= "" then
        return on_done(("run :Amp build: the native library is older than %s"):format(newer))
      end
      on_done(nil)
    end)
  end)
  vim.uv.new_thread(scan_sources, answer, root, path, in_target)
end

--- M.check, and a warning when the library is stale.
function M.report(module, path, root)
  M.check(module, path, root, function(why)
    if why then
      require("amp.notify").notify("amp: " .. why, vim.log.levels.WARN)
    end
  end)
end

return M
