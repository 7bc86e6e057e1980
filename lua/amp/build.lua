--- `:Amp build`: builds the native library (`cargo build --release` in the
--- plugin's directory) without blocking the editor. Progress shows in the
--- command line (not kept in :messages); the result is one line. The full
--- output of a failed build is written to `amp-build.log` beside the log file.
local M = {}
local H = {}

H.job = nil ---@type vim.SystemObj?

--- Whether a build is running.
---@return boolean
function M.running()
  return H.job ~= nil
end

--- Starts the build. `on_done(ok, message)` is called on the main thread
--- when it ends (after the one-line message was shown). `why`: why it
--- builds (`:Amp install` falling back), said on the same line as what
--- happens, so that one line is all there is (two lines in a row would
--- stop Neovim at a hit-enter prompt).
---@param on_done? fun(ok: boolean, message: string)
---@param why? string
---@return boolean started
function M.run(on_done, why)
  local because = why and (" (" .. why .. ")") or ""
  if H.job then
    H.notify("amp: wait for the :Amp build that is running: one runs at a time", vim.log.levels.WARN)
    return false
  end
  if vim.fn.executable("cargo") ~= 1 then
    H.notify(
      "amp: install Rust (https://rustup.rs), then :Amp build: no cargo on PATH" .. because,
      vim.log.levels.ERROR
    )
    return false
  end
  local native = require("amp.native")
  local root = native.root()
  local started = vim.uv.hrtime()
  local compiled, output, last_shown = 0, {}, 0
  H.progress("amp: cargo build --release ..." .. because)

  local function on_output(_, data)
    if not data then
      return
    end
    vim.schedule(function()
      for line in data:gmatch("[^\r\n]+") do
        output[#output + 1] = line
        local crate = line:match("^%s*Compiling (%S+)")
        if crate then
          compiled = compiled + 1
          local now = vim.uv.hrtime()
          if now - last_shown > 1e8 then -- at most 10 updates a second
            last_shown = now
            H.progress(("amp: cargo build --release: compiling %s (%d crates so far)"):format(crate, compiled))
          end
        end
      end
    end)
  end

  local ok_spawn, job = pcall(vim.system, { "cargo", "build", "--release", "--color", "never" }, {
    cwd = root,
    text = true,
    stdout = on_output,
    stderr = on_output,
  }, function(result)
    vim.schedule(function()
      H.job = nil
      local seconds = (vim.uv.hrtime() - started) / 1e9
      local ok, message = H.finish(result, output, seconds, native)
      H.notify(message, ok and vim.log.levels.INFO or vim.log.levels.ERROR)
      if on_done then
        on_done(ok, message)
      end
    end)
  end)
  if not ok_spawn then
    H.notify("amp: check cargo: it could not be run: " .. (tostring(job):gsub("\n.*", "")), vim.log.levels.ERROR)
    return false
  end
  H.job = job
  return true
end

--- The one-line result of a finished build.
function H.finish(result, output, seconds, native)
  if result.code == 0 then
    if native.loaded() then
      -- The running library stays loaded (it cannot be swapped in place).
      return true, ("amp: restart Neovim to use the new library: built in %.1f s"):format(seconds)
    end
    local _, err = native.load()
    if err then
      return false, ("amp: see :checkhealth amp: built in %.1f s, but the library does not load"):format(seconds)
    end
    return true, ("amp: built and loaded the native library in %.1f s"):format(seconds)
  end
  local log = H.write_log(output)
  local first_error
  for _, line in ipairs(output) do
    if line:match("^error") then
      first_error = line
      break
    end
  end
  return false,
    ("amp: %scargo build --release failed (exit %d)%s"):format(
      log and ("read " .. vim.fn.fnamemodify(log, ":~") .. ": ") or "",
      result.code,
      first_error and (": " .. first_error) or ""
    )
end

-- One screen line (amp.notify cuts it to fit): a longer message stops
-- Neovim at a hit-enter prompt.
function H.notify(text, level)
  require("amp.notify").notify(text, level)
end

-- The output of a failed build, next to the log file.
function H.write_log(output)
  local ok, config = pcall(function()
    return require("amp").get_config()
  end)
  local dir = ok and config.log_file and vim.fs.dirname(config.log_file) or vim.fn.stdpath("log")
  local path = vim.fs.joinpath(dir, "amp-build.log")
  vim.fn.mkdir(dir, "p")
  if pcall(vim.fn.writefile, output, path) then
    return path
  end
end

-- Progress in the command line, not kept in :messages (no hit-enter prompt).
function H.progress(text)
  require("amp.notify").progress(text)
end

return M
