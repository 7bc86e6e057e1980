"""The README's install snippets, verbatim, start a real Neovim that works.

Each ```lua block of README.md marked `<!-- snippet: NAME -->` is taken
as it is written and run the way the README says to use it:

  lazy-dir  a lazy.nvim spec, in `require("lazy").setup({ spec = { ... } })`
            with the real lazy.nvim (tests/integration/lazy_nvim.py), the
            clone at ~/src/amp.nvim-rs (a link to this repository, built);
  lazy-url  the same from the Git URL, lazy.nvim cloning it and running
            `build = ":Amp install"`, which downloads the release's library
            from https://github.com/...;
  vim-pack  Neovim 0.12's vim.pack, in init.lua, in the real TUI (tmux: its
            install asks for a confirmation), the same URL;
  rtp       no plugin manager.

Nothing leaves the machine: the Git URL is a local bare repository made
from the working tree (git's `url.<base>.insteadOf`, in the test HOME's
.gitconfig), and github.com's release download is a local HTTPS server
with a test certificate authority (curl's own configuration, .curlrc:
`connect-to` and `cacert`). The snippets themselves are not changed.

Each then checks what a new user checks first: `:Amp` exists at once, the
server is up (its lockfile is written) with no key pressed, `:help amp`
and `:help amp-config` open amp.txt, `:checkhealth amp` finds the checks,
and the snippet's keys are mapped; the lazy.nvim build step reports no
failure.
"""
from __future__ import annotations

import hashlib
import http.server
import os
import re
import shutil
import ssl
import subprocess
import threading
import time
from pathlib import Path

import pynvim
import pytest

import lazy_nvim
from conftest import LIBRARY, NVIM, REPO, AmpEnv, read_lockfiles

README = REPO / "README.md"
VERSION = next(line.split('"')[1] for line in (REPO / "Cargo.toml").read_text().splitlines()
               if line.startswith("version = "))
ARTIFACT = f"amp_core-v{VERSION}-linux-x86_64.so"


def snippets() -> dict[str, str]:
    text = README.read_text("utf-8")
    found = dict(re.findall(r"<!-- snippet: ([\w-]+) -->\n```lua\n(.*?)```", text, re.S))
    assert set(found) == {"lazy-dir", "lazy-url", "vim-pack", "rtp"}, sorted(found)
    return found


def nvim_version() -> tuple[int, int]:
    out = subprocess.run([NVIM, "--version"], capture_output=True, text=True).stdout
    major, minor = re.match(r"NVIM v(\d+)\.(\d+)", out).groups()
    return int(major), int(minor)


def lazy_init(env: AmpEnv, spec: str) -> str:
    """A user's init.lua with lazy.nvim (already in its place, as its own
    bootstrap leaves it) and the README's spec."""
    lazy_dir = env.data_home / "nvim" / "lazy" / "lazy.nvim"
    if not lazy_dir.exists():
        lazy_dir.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(lazy_nvim.ensure(), lazy_dir)
        # A clone, as its bootstrap makes it (lazy.nvim reads its own Git
        # state for its lockfile).
        git = ["git", "-C", str(lazy_dir), "-c", "user.name=test", "-c", "user.email=test@localhost"]
        subprocess.run(["git", "init", "-q", "-b", "main", str(lazy_dir)], check=True)
        subprocess.run(git + ["add", "-A"], check=True)
        subprocess.run(git + ["commit", "-q", "-m", f"lazy.nvim {lazy_nvim.VERSION}"], check=True)
    return f"""
local lazypath = vim.fn.stdpath("data") .. "/lazy/lazy.nvim"
vim.opt.rtp:prepend(lazypath)
require("lazy").setup({{
  spec = {{
{spec}
  }},
  rocks = {{ enabled = false }},
  change_detection = {{ enabled = false }},
}})
"""


def clone_link(env: AmpEnv) -> None:
    """~/src/amp.nvim-rs: this repository (with its built library)."""
    src = env.home / "src"
    src.mkdir(exist_ok=True)
    (src / "amp.nvim-rs").symlink_to(REPO)


class Nvim:
    """Neovim started from an init.lua (headless, or the TUI in tmux),
    attached over its --listen socket."""

    def __init__(self, env: AmpEnv, init_text: str, tui: bool = False, extra_env: dict | None = None):
        self.env = env
        self.init = env.root / "init.lua"
        self.init.write_text(init_text)
        self.sock = str(env.root / "nvim.sock")
        environ = dict(env.environ, **(extra_env or {}))
        self.tmux = None
        argv = [NVIM, "-u", str(self.init), "--listen", self.sock]
        if tui:
            self.tmux = str(env.root / "tmux.sock")
            command = ["env", "-i"] + [f"{k}={v}" for k, v in environ.items()] + argv
            subprocess.run(["tmux", "-S", self.tmux, "-f", "/dev/null", "new-session", "-d", "-s", "nvim",
                            "-x", "120", "-y", "40", "-c", str(env.workspace), "--"] + command, check=True)
            self.proc = None
        else:
            self.proc = subprocess.Popen([NVIM, "--headless"] + argv[1:], cwd=str(env.workspace), env=environ,
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=open(env.root / "nvim-stderr.log", "wb"))
        self.nvim = None

    def attach(self, timeout: float = 60) -> pynvim.Nvim:
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.nvim = pynvim.attach("socket", path=self.sock)
                return self.nvim
            except OSError:
                if self.proc is not None and self.proc.poll() is not None:
                    raise AssertionError(f"nvim exited: {(self.env.root / 'nvim-stderr.log').read_text()}")
                assert time.monotonic() < deadline, "nvim did not listen:\n" + self.screen()
                time.sleep(0.05)

    def screen(self) -> str:
        if not self.tmux:
            return ""
        return subprocess.run(["tmux", "-S", self.tmux, "capture-pane", "-p", "-t", "nvim"],
                              capture_output=True, text=True).stdout

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "-S", self.tmux, "send-keys", "-t", "nvim", *keys], check=True)

    def lockfile(self, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for data in read_lockfiles(self.env.lockfile_dir).values():
                if isinstance(data, dict) and data.get("pid") == self.pid():
                    return data
            messages = self.nvim.command_output("messages") if self.nvim else ""
            assert time.monotonic() < deadline, f"no lockfile; messages: {messages}\n{self.screen()}"
            time.sleep(0.1)

    def pid(self) -> int:
        return self.nvim.call("getpid")

    def close(self) -> None:
        try:
            if self.nvim:
                self.nvim.command("qa!")
        except Exception:
            pass
        if self.proc is not None:
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.tmux:
            subprocess.run(["tmux", "-S", self.tmux, "kill-server"], capture_output=True)


def check_works(nv: Nvim, keys: bool) -> None:
    nvim = nv.nvim
    # Once Neovim has started (a first install by the plugin manager is part
    # of its start-up; requests are answered while it waits for git)...
    deadline = time.monotonic() + 120
    while nvim.eval("v:vim_did_enter") != 1:
        assert time.monotonic() < deadline, "Neovim did not finish starting:\n" + nv.screen()
        time.sleep(0.1)
    # ... and no key pressed: the command, the help, the health check, the server.
    assert nvim.funcs.exists(":Amp") == 2
    lock = nv.lockfile()
    assert lock["workspaceFolders"] == [str(nv.env.workspace)], lock
    assert nvim.exec_lua("return require('amp').is_running()") is True
    for tag in ("amp", "amp-config", ":Amp-install"):
        try:
            nvim.command("help " + tag)
        except pynvim.NvimError as e:
            # The Neovim 0.12.4 the tests unpack from Debian's packages has
            # no tree-sitter parsers (separate packages), which its help
            # filetype plugin needs; the tag lookup is what is checked here.
            if 'language "vimdoc"' not in str(e):
                raise
            nvim.command("noautocmd help " + tag)
        assert nvim.current.buffer.name.endswith("doc/amp.txt"), (tag, nvim.current.buffer.name)
        assert f"*{tag}*" in nvim.current.line, (tag, nvim.current.line)
        nvim.command("helpclose")
    nvim.command("checkhealth amp")
    report = "\n".join(nvim.current.buffer[:])
    # ("- OK loaded", or "- ✅ OK loaded" from 0.11 on)
    assert "amp.nvim-rs: native library" in report and re.search(r"- (✅ )?OK loaded ", report), report
    assert "listening: amp on 127.0.0.1:" in report, report
    nvim.command("bwipeout!")
    if keys:
        assert "Amp status" in nvim.funcs.maparg("<leader>as", "n")
        assert "Amp open" in nvim.funcs.maparg("<C-,>", "t")
    messages = nvim.command_output("messages")
    assert not re.search(r"(?i)error|failed|not built yet", messages), messages


@pytest.fixture
def env(env_factory) -> AmpEnv:
    return env_factory()


@pytest.fixture
def started():
    all_started: list[Nvim] = []
    yield all_started
    for nv in all_started:
        nv.close()


def test_the_lazy_spec_for_a_local_clone_loads_the_plugin_at_start_up(env, started):
    clone_link(env)
    nv = Nvim(env, lazy_init(env, snippets()["lazy-dir"]))
    started.append(nv)
    nv.attach()
    check_works(nv, keys=True)
    assert nv.nvim.exec_lua("return require('lazy.core.config').plugins['amp.nvim-rs']._.loaded ~= nil")


def test_the_plain_runtimepath_snippet_works(env, started):
    clone_link(env)
    nv = Nvim(env, snippets()["rtp"])
    started.append(nv)
    nv.attach()
    check_works(nv, keys=False)


# ------------------------------------------------------ from the Git URL


def bare_repository(root: Path) -> Path:
    """A bare Git repository of the working tree as it is now (tracked and
    new files, committed changes or not; nothing built)."""
    work = root / "amp.nvim-rs-work"
    files = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, files):
        src = REPO / os.fsdecode(name)
        if src.is_file() and not src.is_symlink():
            dest = work / os.fsdecode(name)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)
    git = ["git", "-C", str(work), "-c", "user.name=test", "-c", "user.email=test@localhost"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "the working tree"], check=True)
    bare = root / "amp.nvim-rs.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    return bare


def certificate_authority(root: Path) -> tuple[Path, Path, Path]:
    """A test CA and a certificate for github.com that it signed: (ca, cert, key)."""
    if not shutil.which("openssl"):
        pytest.fail("openssl is needed to make test certificates")
    ca_key, ca, key, csr, cert = (root / n for n in ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem"))
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True)  # noqa: E731
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=amp test CA",
        "-keyout", str(ca_key), "-out", str(ca))
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=github.com", "-keyout", str(key), "-out", str(csr))
    ext = root / "ext.cnf"
    ext.write_text("subjectAltName=DNS:github.com\n")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial", "-days", "1",
        "-extfile", str(ext), "-out", str(cert))
    return ca, cert, key


class Releases:
    """github.com's release downloads, on a local HTTPS port: the library
    this repository built, and its .sha256."""

    def __init__(self, cert: Path, key: Path, owner_repo: str):
        data = LIBRARY.read_bytes()
        base = f"/{owner_repo}/releases/download/v{VERSION}/{ARTIFACT}"
        files = {base: data, base + ".sha256": f"{hashlib.sha256(data).hexdigest()}  {ARTIFACT}\n".encode()}
        self.requests: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                outer.requests.append(self.path)
                body = files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()


@pytest.fixture
def github(env, tmp_path):
    """The snippets' URL, https://github.com/OWNER/amp.nvim-rs, served here:
    git clones the bare repository, curl downloads from the local server."""
    url = re.search(r'"(https://github\.com/[^"]+)"', snippets()["lazy-url"]).group(1)
    assert url in snippets()["vim-pack"]
    owner_repo = url.removeprefix("https://github.com/")
    bare = bare_repository(tmp_path)
    ca, cert, key = certificate_authority(tmp_path)
    releases = Releases(cert, key, owner_repo)
    (env.home / ".gitconfig").write_text(f'[url "file://{bare}"]\n\tinsteadOf = {url}\n'
                                         f'[protocol "file"]\n\tallow = always\n')
    curlrc = f'connect-to = "github.com:443:127.0.0.1:{releases.port}"\ncacert = "{ca}"\n'
    (env.home / ".curlrc").write_text(curlrc)
    (env.config_home / ".curlrc").write_text(curlrc)
    yield releases
    releases.close()


def test_the_lazy_spec_from_the_git_url_installs_the_release_and_starts(env, started, github):
    nv = Nvim(env, lazy_init(env, snippets()["lazy-url"]))
    started.append(nv)
    nv.attach()
    check_works(nv, keys=False)
    clone = env.data_home / "nvim" / "lazy" / "amp.nvim-rs"
    assert (clone / "lua" / "amp_core.so").read_bytes() == LIBRARY.read_bytes()
    assert [p for p in github.requests if p.endswith(ARTIFACT)], github.requests
    # lazy.nvim's build step (":Amp install") ended without an error.
    build = nv.nvim.exec_lua("""
        local plugin = require('lazy.core.config').plugins['amp.nvim-rs']
        local errors = {}
        local names = {}
        for _, task in ipairs(plugin._.tasks or {}) do
          table.insert(names, task.name)
          if task:has_errors() then table.insert(errors, task.name .. ': ' .. task:output(vim.log.levels.ERROR)) end
        end
        return { errors = errors, tasks = names }
    """)
    assert "build" in build["tasks"] and build["errors"] == [], build


def test_vim_pack_from_the_git_url_installs_the_release_and_starts(env, started, github):
    if nvim_version() < (0, 12):
        pytest.skip("vim.pack is Neovim 0.12's")
    nv = Nvim(env, snippets()["vim-pack"], tui=True)
    started.append(nv)
    # vim.pack asks before its first install.
    deadline = time.monotonic() + 30
    while "[Y]es" not in nv.screen() and "(Y)es" not in nv.screen():
        assert time.monotonic() < deadline, "no confirmation asked:\n" + nv.screen()
        time.sleep(0.1)
    nv.keys("y")
    nv.attach()
    check_works(nv, keys=False)
    clone = env.data_home / "nvim" / "site" / "pack" / "core" / "opt" / "amp.nvim-rs"
    assert (clone / "lua" / "amp_core.so").read_bytes() == LIBRARY.read_bytes()
    assert "Press ENTER" not in nv.screen(), nv.screen()
