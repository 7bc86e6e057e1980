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
--- when it ends (after the one-line message was shown).
---@param on_done? fun(ok: boolean, message: string)
---@return boolean started
function M.run(on_done)
  if H.job then
    vim.notify("amp: a build is already running", vim.log.levels.WARN)
    return false
  end
  if vim.fn.executable("cargo") ~= 1 then
    require("amp.compat").notify(
      "amp: cargo not found on PATH: install Rust (https://rustup.rs), then run :Amp build",
      vim.log.levels.ERROR
    )
    return false
  end
  local native = require("amp.native")
  local root = native.root()
  local started = vim.uv.hrtime()
  local compiled, output, last_shown = 0, {}, 0
  H.progress("amp: cargo build --release ...")

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
      message = H.fit(message)
      require("amp.compat").notify(message, ok and vim.log.levels.INFO or vim.log.levels.ERROR)
      if on_done then
        on_done(ok, message)
      end
    end)
  end)
  if not ok_spawn then
    require("amp.compat").notify("amp: could not run cargo: " .. (tostring(job):gsub("\n.*", "")), vim.log.levels.ERROR)
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
      return true, ("amp: built the native library in %.1f s; restart Neovim to use it"):format(seconds)
    end
    local _, err = native.load()
    if err then
      return false, ("amp: built in %.1f s, but the library does not load (see :checkhealth amp)"):format(seconds)
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
    ("amp: cargo build --release failed (exit %d%s)%s"):format(
      result.code,
      log and (", output in " .. vim.fn.fnamemodify(log, ":~")) or "",
      first_error and (": " .. first_error) or ""
    )
end

-- One screen line at most: a longer message stops Neovim at a hit-enter prompt.
function H.fit(text)
  local width = math.max(vim.o.columns - 12, 20)
  if vim.fn.strdisplaywidth(text) > width then
    text = vim.fn.strcharpart(text, 0, width - 3) .. "..."
  end
  return text
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
  vim.api.nvim_echo({ { H.fit(text) } }, false, {})
  vim.cmd.redraw()
end

return M
