--- `:Amp install`: the prebuilt native library of this plugin's release for
--- this platform, without a Rust toolchain.
---
--- The library is downloaded (curl, in the background) next to its place,
--- its SHA-256 checked against the release's `.sha256` file, and renamed
--- into place (`lua/amp_core.so`) in one step: a loaded library is never
--- overwritten, and a failed or tampered download leaves nothing behind.
--- When the release has no library for this platform (or there is no
--- release URL, or no curl), `cargo build --release` runs instead
--- (`:Amp build`). Each outcome is one line. See `:help amp-install`.
local M = {}
local H = {}

--- Where the library goes, relative to the plugin root (a candidate of
--- lua/amp/native.lua).
M.target = "lua/amp_core.so"

--- `<os>-<arch>` of the running system as release files name it, or nil.
---@return string|nil
function M.platform()
  local u = vim.uv.os_uname()
  local os = ({ Linux = "linux", Darwin = "macos" })[u.sysname]
  local arch = ({ x86_64 = "x86_64", amd64 = "x86_64", aarch64 = "aarch64", arm64 = "aarch64" })[u.machine]
  return os and arch and (os .. "-" .. arch) or nil
end

--- The release file of `version` for `platform`.
function M.artifact(version, platform)
  return ("amp_core-v%s-%s.so"):format(version, platform)
end

--- The plugin's version, as Cargo.toml says (the library's own version).
---@param root string
---@return string|nil
function M.version(root)
  local file = io.open(vim.fs.joinpath(root, "Cargo.toml"), "r")
  if not file then
    return nil
  end
  local text = file:read("*a")
  file:close()
  return ("\n" .. text):match('\n%[package%][^%[]-\nversion%s*=%s*"([^"]+)"')
end

--- The release's download base: `install.url` ("{version}" is replaced),
--- else GitHub's, from the `origin` remote of the plugin's clone when it is
--- on GitHub (read from .git/config: no process on the main thread).
---@return string|nil
function H.base_url(configured, root, version)
  if configured then
    return (configured:gsub("{version}", version))
  end
  local file = io.open(vim.fs.joinpath(root, ".git", "config"), "r")
  if not file then
    return nil
  end
  local text = file:read("*a")
  file:close()
  local remote = text:match('%[remote "origin"%][^%[]-\n%s*url%s*=%s*([^\n]+)') or ""
  remote = vim.trim(remote)
  local repo = remote:match("github%.com[:/]([^/]+/[^/]-)%.git$") or remote:match("github%.com[:/]([^/]+/[^/]+)$")
  return repo and ("https://github.com/%s/releases/download/v%s"):format(repo, version) or nil
end

--- The largest library accepted (bytes): a bigger answer is refused before
--- it is written (Content-Length) or cut off where it passes the cap.
M.max_library_bytes = 64 * 1024 * 1024
--- The largest `.sha256` answer accepted, and read (bytes).
M.max_checksum_bytes = 4096

H.running = false

--- Whether an install is running (one at a time).
---@return boolean
function M.running()
  return H.running
end

--- Starts the install. `on_done(ok, message)` runs on the main thread
--- after the one-line message was shown.
---
--- The library is downloaded into a private temp file (a unique name,
--- mode 0600, beside its place), its SHA-256 compared with the release's
--- `.sha256`, renamed into place, and the file in place hashed again: only
--- then does the line say what was installed. An https URL stays on https
--- (redirects to http are refused). Sizes are capped (M.max_*_bytes).
---@param on_done? fun(ok: boolean, message: string)
function M.run(on_done)
  if H.running then
    require("amp.notify").notify(
      "amp: wait for the :Amp install that is running: one runs at a time",
      vim.log.levels.WARN
    )
    return false
  end
  -- From here on a missing library is what this run is about: setup()
  -- must not report it as an error (lua/amp/core.lua).
  H.running = true
  local function finish(message, ok)
    H.running = false
    require("amp.notify").notify(message, ok and vim.log.levels.INFO or vim.log.levels.ERROR)
    if on_done then
      on_done(ok, message)
    end
  end
  local root = require("amp.native").root()
  local version, platform = M.version(root), M.platform()
  local config = require("amp").get_config()
  local base = version and H.base_url(config.install.url, root, version)
  local why_not = not version and "the plugin's version is unknown (no Cargo.toml)"
    or not platform and ("no prebuilt library for %s %s"):format(vim.uv.os_uname().sysname, vim.uv.os_uname().machine)
    or not base and "no release URL (set install.url)"
    or vim.fn.executable("curl") ~= 1 and "curl is not installed"
    or nil
  if why_not then
    H.running = false
    return H.build_instead(why_not, on_done)
  end
  local name = M.artifact(version, platform)
  local url = base .. "/" .. name
  local final = vim.fs.joinpath(root, M.target)
  -- A private temp file of this run's own (mkstemp: O_EXCL, mode 0600).
  local fd, tmp = vim.uv.fs_mkstemp(final .. ".download-XXXXXX")
  if not fd then
    return finish(("amp: make %s writable to install: %s"):format(vim.fs.dirname(final), tostring(tmp)), false)
  end
  vim.uv.fs_close(fd)
  local sum_fd, sum_tmp = vim.uv.fs_mkstemp(final .. ".sha256-XXXXXX")
  if not sum_fd then
    os.remove(tmp)
    return finish(("amp: make %s writable to install: %s"):format(vim.fs.dirname(final), tostring(sum_tmp)), false)
  end
  vim.uv.fs_close(sum_fd)
  local function fail(message)
    os.remove(tmp)
    os.remove(sum_tmp)
    finish(message, false)
  end
  require("amp.notify").progress(("amp: downloading %s ..."):format(name))
  H.curl(url, tmp, M.max_library_bytes, function(code, stderr)
    if code == 22 and stderr:find("404", 1, true) then
      os.remove(tmp)
      os.remove(sum_tmp)
      H.running = false
      return H.build_instead(("the release has no %s"):format(name), on_done)
    end
    if code ~= 0 then
      return fail(
        ("amp: check install.url or the network: could not download %s (%s); nothing was changed"):format(
          name,
          H.curl_error(stderr, code, M.max_library_bytes)
        )
      )
    end
    H.curl(url .. ".sha256", sum_tmp, M.max_checksum_bytes, function(sum_code, sum_err)
      local want = sum_code == 0 and H.read_head(sum_tmp, M.max_checksum_bytes):match("^%s*(%x+)")
      if not want or #want ~= 64 then
        return fail(
          ("amp: nothing was changed: no checksum for %s (%s)"):format(
            name,
            sum_code == 0 and "not a SHA-256" or H.curl_error(sum_err, sum_code, M.max_checksum_bytes)
          )
        )
      end
      os.remove(sum_tmp)
      want = want:lower()
      H.sha256(tmp, function(got)
        if got ~= want then
          return fail(
            ("amp: nothing was changed: %s does not match its checksum (got %s, want %s)"):format(
              name,
              got and got:sub(1, 12) or "none",
              want:sub(1, 12)
            )
          )
        end
        local ok, err = vim.uv.fs_rename(tmp, final)
        if not ok then
          return fail(("amp: nothing was changed: could not put the library in place: %s"):format(err))
        end
        -- The bytes now in place are the ones said to be installed.
        H.sha256(final, function(placed)
          if placed ~= want then
            os.remove(final)
            return finish(
              ("amp: run :Amp install again: the library in place changed after its check (%s)"):format(name),
              false
            )
          end
          finish(("amp: installed %s (checksum verified)%s"):format(name, H.load_note()), true)
        end)
      end)
    end)
  end)
  return true
end

--- What happens with the new library in this session.
function H.load_note()
  local native = require("amp.native")
  if native.loaded() then
    return "; restart Neovim to use it"
  end
  local _, err = native.load()
  return err and "; it does not load (see :checkhealth amp)" or ""
end

-- (One line: build.run says what it does and why.)
function H.build_instead(why, on_done)
  require("amp.build").run(on_done, why)
end

--- Downloads `url` into the file `out` (curl, in the background), at most
--- `max_bytes`: `on_done(code, stderr)` on the main thread. An https URL
--- may not be redirected off https. Where `prlimit` exists (util-linux),
--- the file-size limit of curl's process caps the bytes written even when
--- the answer has no Content-Length (curl before 8.4 checks
--- `--max-filesize` against Content-Length only).
function H.curl(url, out, max_bytes, on_done)
  local cmd = {}
  if vim.fn.executable("prlimit") == 1 then
    vim.list_extend(cmd, { "prlimit", ("--fsize=%d"):format(max_bytes + 1), "--" })
  end
  vim.list_extend(cmd, {
    "curl",
    "--fail",
    "--silent",
    "--show-error",
    "--location",
    "--max-redirs",
    "5",
    "--max-time",
    "300",
    "--max-filesize",
    tostring(max_bytes),
    "--output",
    out,
  })
  if url:match("^https://") then
    vim.list_extend(cmd, { "--proto", "=https", "--proto-redir", "=https" })
  end
  cmd[#cmd + 1] = url
  vim.system(cmd, { text = true }, function(result)
    vim.schedule(function()
      local code = result.code
      if code == 0 and (result.signal or 0) ~= 0 then
        code = 128 + result.signal
      end
      -- Past the cap: curl's own check, or the kernel's (SIGXFSZ, EFBIG).
      local size = (vim.uv.fs_stat(out) or {}).size or 0
      if code == 0 and size > max_bytes then
        code = 63
      end
      on_done(code, result.stderr or "")
    end)
  end)
end

--- Why curl failed, in words.
function H.curl_error(stderr, code, max_bytes)
  if code == 63 or code == 153 or code == 128 + 25 or stderr:find("File size limit", 1, true) then
    return ("the answer is bigger than %d bytes"):format(max_bytes)
  end
  if code == 1 and stderr:find("Protocol", 1, true) then
    return "it was redirected off https"
  end
  return H.first_line(stderr, code)
end

--- At most `max` bytes from the start of the file at `path`.
function H.read_head(path, max)
  local file = io.open(path, "rb")
  if not file then
    return ""
  end
  local text = file:read(max) or ""
  file:close()
  return text
end

--- The SHA-256 of a file, lower-case hex (sha256sum, or shasum on macOS).
function H.sha256(path, on_done)
  local cmd = vim.fn.executable("sha256sum") == 1 and { "sha256sum", path } or { "shasum", "-a", "256", path }
  vim.system(cmd, { text = true }, function(result)
    vim.schedule(function()
      local hex = result.code == 0 and (result.stdout or ""):match("^(%x+)") or nil
      on_done(hex and hex:lower() or nil)
    end)
  end)
end

function H.first_line(text, code)
  local line = vim.trim((text or ""):match("[^\n]*") or "")
  return line ~= "" and line or ("curl exit " .. tostring(code))
end

return M
