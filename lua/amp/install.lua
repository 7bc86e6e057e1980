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

--- Starts the install. `on_done(ok, message)` runs on the main thread
--- after the one-line message was shown.
---@param on_done? fun(ok: boolean, message: string)
function M.run(on_done)
  local notify = function(message, ok)
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
    return H.build_instead(why_not, on_done)
  end
  local name = M.artifact(version, platform)
  local url = base .. "/" .. name
  local final = vim.fs.joinpath(root, M.target)
  local tmp = ("%s.download-%d"):format(final, vim.uv.os_getpid())
  require("amp.notify").notify(("amp: downloading %s ..."):format(name), vim.log.levels.INFO)
  H.curl({ "-o", tmp, url }, function(code, stderr)
    if code == 22 and stderr:find("404", 1, true) then
      os.remove(tmp)
      return H.build_instead(("the release has no %s"):format(name), on_done)
    end
    if code ~= 0 then
      os.remove(tmp)
      return notify(
        ("amp: could not download %s: %s; nothing was changed"):format(url, H.first_line(stderr, code)),
        false
      )
    end
    H.curl({ url .. ".sha256" }, function(sum_code, sum_err, sum_out)
      local want = sum_code == 0 and sum_out:match("^%s*(%x+)")
      if not want then
        os.remove(tmp)
        return notify(
          ("amp: no checksum for %s (%s); nothing was changed"):format(name, H.first_line(sum_err, sum_code)),
          false
        )
      end
      H.sha256(tmp, function(got)
        if not got or got:lower() ~= want:lower() then
          os.remove(tmp)
          return notify(
            ("amp: %s does not match its checksum (got %s, want %s); nothing was changed"):format(
              name,
              got and got:sub(1, 12) or "none",
              want:sub(1, 12)
            ),
            false
          )
        end
        local ok, err = vim.uv.fs_rename(tmp, final)
        if not ok then
          os.remove(tmp)
          return notify(("amp: could not put the library in place: %s"):format(err), false)
        end
        notify(("amp: installed %s (checksum verified)%s"):format(name, H.load_note()), true)
      end)
    end)
  end)
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

function H.build_instead(why, on_done)
  require("amp.notify").notify(("amp: %s; building with cargo instead"):format(why), vim.log.levels.WARN)
  require("amp.build").run(on_done)
end

--- Runs curl with `args`: `on_done(code, stderr, stdout)` on the main thread.
function H.curl(args, on_done)
  local cmd = { "curl", "--fail", "--silent", "--show-error", "--location", "--max-time", "300" }
  vim.list_extend(cmd, args)
  vim.system(cmd, { text = true }, function(result)
    vim.schedule(function()
      on_done(result.code, result.stderr or "", result.stdout or "")
    end)
  end)
end

--- The SHA-256 of a file, hex (sha256sum, or shasum on macOS).
function H.sha256(path, on_done)
  local cmd = vim.fn.executable("sha256sum") == 1 and { "sha256sum", path } or { "shasum", "-a", "256", path }
  vim.system(cmd, { text = true }, function(result)
    vim.schedule(function()
      on_done(result.code == 0 and (result.stdout or ""):match("^(%x+)") or nil)
    end)
  end)
end

function H.first_line(text, code)
  local line = vim.trim((text or ""):match("[^\n]*") or "")
  return line ~= "" and line or ("curl exit " .. tostring(code))
end

return M
