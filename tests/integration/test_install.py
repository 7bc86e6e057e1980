"""`:Amp install`: the prebuilt library of a release, from a local HTTP
server serving the real built library, into a copy of the plugin that has
no library yet (as a fresh clone without Rust)."""

import hashlib
import http.server
import os
import shutil
import stat
import subprocess
import threading
import time
from pathlib import Path

import pynvim
import pytest

from conftest import LIBRARY, NVIM, REPO

VERSION = next(line.split('"')[1] for line in (REPO / "Cargo.toml").read_text().splitlines()
               if line.startswith("version = "))


def platform() -> str:
    u = os.uname()
    osname = {"Linux": "linux", "Darwin": "macos"}[u.sysname]
    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}[u.machine]
    return f"{osname}-{arch}"


ARTIFACT = f"amp_core-v{VERSION}-{platform()}.so"


class ReleaseServer:
    """Serves ``files`` (path -> bytes) on 127.0.0.1; a path in ``truncated``
    announces its whole length but sends half and hangs up."""

    def __init__(self, tls=None):
        self.files: dict[str, bytes] = {}
        self.truncated: set[str] = set()
        # path -> function(handler): answers that need more than bytes
        self.special: dict = {}
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path in server.special:
                    server.special[self.path](self)
                    return
                body = server.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.path in server.truncated:
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.connection.shutdown(2)
                    return
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
            self.url = f"https://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def publish(self, data: bytes, checksum: str | None = None):
        self.files[f"/v{VERSION}/{ARTIFACT}"] = data
        digest = checksum or hashlib.sha256(data).hexdigest()
        self.files[f"/v{VERSION}/{ARTIFACT}.sha256"] = f"{digest}  {ARTIFACT}\n".encode()

    def close(self):
        self.httpd.shutdown()


@pytest.fixture
def release():
    server = ReleaseServer()
    yield server
    server.close()


@pytest.fixture
def plugin(tmp_path) -> Path:
    """The plugin as a fresh clone has it: sources, no library."""
    root = tmp_path / "plugin"
    for part in ("lua", "plugin", "doc"):
        shutil.copytree(REPO / part, root / part)
    shutil.copy(REPO / "Cargo.toml", root / "Cargo.toml")
    assert not (root / "lua" / "amp_core.so").exists()
    return root


def start_nvim(tmp_path, plugin: Path, url: str, path_env: str | None = None, extra_env: dict | None = None):
    sock = str(tmp_path / f"nvim-{len(list(tmp_path.glob('nvim-*.sock')))}.sock")
    env = dict(os.environ)
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env[name] = str(tmp_path / name.lower())
    if path_env is not None:
        env["PATH"] = path_env
    env.update(extra_env or {})
    proc = subprocess.Popen([NVIM, "--headless", "--clean", "--listen", sock, "--cmd", f"set rtp^={plugin}"],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            nvim = pynvim.attach("socket", path=sock)
            break
        except OSError:  # not there yet, or not listening yet
            assert time.monotonic() < deadline, "nvim did not start"
            time.sleep(0.02)
    nvim.exec_lua("""
        _G.amp_notes = {}
        vim.notify = function(msg, level) table.insert(_G.amp_notes, msg) end
        require("amp").setup({ auto_start = false, openctx = { enabled = false }, install = { url = ... } })
    """, url + "/v{version}")
    return proc, nvim


def install(nvim, until: str, timeout: float = 30) -> list[str]:
    nvim.command("Amp install")
    deadline = time.monotonic() + timeout
    while True:
        notes = nvim.exec_lua("return _G.amp_notes")
        if any(until in n for n in notes):
            return notes
        assert time.monotonic() < deadline, f"no {until!r} in {notes!r}"
        time.sleep(0.05)


@pytest.fixture
def session(tmp_path, plugin, release):
    started = []

    def run(path_env=None, url=None, extra_env=None):
        proc, nvim = start_nvim(tmp_path, plugin, url or release.url, path_env, extra_env)
        started.append((proc, nvim))
        return nvim

    yield run
    for proc, nvim in started:
        try:
            nvim.command("qa!")
        except Exception:
            pass
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()


def leftovers(plugin: Path) -> list[str]:
    return sorted(n for n in os.listdir(plugin / "lua") if n.startswith("amp_core"))


def test_install_downloads_verifies_and_loads_the_real_library(session, plugin, release):
    release.publish(LIBRARY.read_bytes())
    nvim = session()
    notes = install(nvim, "installed")
    assert f"amp: installed {ARTIFACT} (checksum verified)" in notes, notes
    assert (plugin / "lua" / "amp_core.so").read_bytes() == LIBRARY.read_bytes()
    assert leftovers(plugin) == ["amp_core.so"]
    loaded = nvim.exec_lua("local n = require('amp.native') return { n.library_path(), n.call('version') }")
    assert loaded == [str(plugin / "lua" / "amp_core.so"), VERSION], loaded
    assert all("\n" not in n for n in notes)


def test_a_wrong_checksum_installs_nothing(session, plugin, release):
    release.publish(LIBRARY.read_bytes(), checksum="0" * 64)
    nvim = session()
    notes = install(nvim, "does not match its checksum")
    assert any("nothing was changed" in n for n in notes), notes
    assert leftovers(plugin) == []
    assert nvim.exec_lua("return require('amp.native').loaded()") is False


def test_a_truncated_download_installs_nothing(session, plugin, release):
    release.publish(LIBRARY.read_bytes())
    release.truncated.add(f"/v{VERSION}/{ARTIFACT}")
    nvim = session()
    notes = install(nvim, "could not download")
    assert any("nothing was changed" in n for n in notes), notes
    assert leftovers(plugin) == []


def test_no_library_for_the_release_falls_back_to_cargo_and_says_so(session, plugin, release, tmp_path):
    # No file published: the release has none. cargo is kept off PATH, so the
    # fallback's own one-line answer shows it was tried.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("curl", "git", "sha256sum"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    nvim = session(path_env=str(bin_dir))
    before = len(nvim.exec_lua("return _G.amp_notes"))  # setup()'s own line about the library
    notes = install(nvim, "no cargo on PATH")[before:]
    # One line says both (two in a row would make a hit-enter prompt).
    assert notes == ["amp: install Rust (https://rustup.rs), then :Amp build: no cargo on PATH "
                     f"(the release has no {ARTIFACT})"], notes
    assert leftovers(plugin) == []


def test_a_library_older_than_the_plugin_is_reported_in_one_line(session, plugin, release):
    release.publish(LIBRARY.read_bytes())
    nvim = session()
    install(nvim, "installed")
    time.sleep(0.5)  # past the first Neovim's own check
    assert not [n for n in nvim.exec_lua("return _G.amp_notes") if "plugin is v" in n]
    # The plugin moves on (a pull), the library does not.
    toml = plugin / "Cargo.toml"
    toml.write_text(toml.read_text().replace(f'version = "{VERSION}"', 'version = "99.0.0"', 1))
    nvim2 = session()
    deadline = time.monotonic() + 10
    while True:
        notes = nvim2.exec_lua("return _G.amp_notes")
        stale = [n for n in notes if "v99.0.0" in n]
        if stale:
            break
        assert time.monotonic() < deadline, notes
        time.sleep(0.05)
    assert stale == [f"amp: run :Amp install or :Amp build: the native library is v{VERSION}, the plugin v99.0.0"]



# ------------------------------------------------------------ trust (#22)


def chunks(handler, total: int, chunk: int = 1 << 20, length: bool = False, delay: float = 0.0):
    """Answers ``total`` zero bytes, announced (Content-Length) or not (the
    end of the answer is the end of the connection)."""
    handler.protocol_version = "HTTP/1.0"
    handler.send_response(200)
    if length:
        handler.send_header("Content-Length", str(total))
    handler.end_headers()
    sent = 0
    try:
        while sent < total:
            n = min(chunk, total - sent)
            handler.wfile.write(b"\0" * n)
            sent += n
            if delay:
                time.sleep(delay)
    except OSError:
        pass  # curl gave up: what the test wants


def test_a_second_install_is_refused_and_the_download_is_private(session, plugin, release):
    """While one install downloads (slowly), a second :Amp install is one
    line and starts nothing; the download goes to a temp file of its own
    (unique name, mode 0600) beside the library's place; what is installed
    is the verified file."""
    data = LIBRARY.read_bytes()
    release.publish(data)
    path = f"/v{VERSION}/{ARTIFACT}"

    calls = []

    def slow(handler):
        calls.append(handler.path)
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        step = len(data) // 20 + 1
        for i in range(0, len(data), step):
            handler.wfile.write(data[i:i + step])
            handler.wfile.flush()
            time.sleep(0.1)

    release.special[path] = slow
    nvim = session()
    nvim.command("Amp install")
    deadline = time.monotonic() + 10
    temps = []
    while not temps:
        temps = [n for n in os.listdir(plugin / "lua") if n.startswith("amp_core.so.download-")]
        assert time.monotonic() < deadline, os.listdir(plugin / "lua")
        time.sleep(0.02)
    assert len(temps) == 1 and len(temps[0]) > len("amp_core.so.download-") + 5, temps
    assert stat.S_IMODE(os.stat(plugin / "lua" / temps[0]).st_mode) == 0o600
    nvim.command("Amp install")
    notes = nvim.exec_lua("return _G.amp_notes")
    assert notes[-1] == "amp: wait for the :Amp install that is running: one runs at a time", notes
    deadline = time.monotonic() + 30
    while not any("installed" in n for n in nvim.exec_lua("return _G.amp_notes")):
        assert time.monotonic() < deadline, nvim.exec_lua("return _G.amp_notes")
        time.sleep(0.05)
    notes = nvim.exec_lua("return _G.amp_notes")
    assert notes.count("amp: wait for the :Amp install that is running: one runs at a time") == 1, notes
    assert calls == [path], calls  # one download
    assert not any(n.startswith("amp: downloading") for n in notes), notes  # progress: not a notification
    assert (plugin / "lua" / "amp_core.so").read_bytes() == data
    assert leftovers(plugin) == ["amp_core.so"]


@pytest.mark.parametrize("what,length", [("library", True), ("library", False),
                                         ("checksum", True), ("checksum", False)])
def test_oversized_answers_are_refused_or_cut_at_the_cap(session, plugin, release, what, length):
    """A 300 MB library or a 512 MB `.sha256`, announced or not: refused
    before it is written (Content-Length), or cut where it passes its cap
    (64 MiB; 4096 bytes), and nothing is installed."""
    release.publish(LIBRARY.read_bytes())
    path = f"/v{VERSION}/{ARTIFACT}" + (".sha256" if what == "checksum" else "")
    total = 300_000_000 if what == "library" else 512 * 1024 * 1024
    release.special[path] = lambda h: chunks(h, total, length=length)
    nvim = session()
    cap = 64 * 1024 * 1024 if what == "library" else 4096
    notes = install(nvim, "nothing was changed", timeout=60)
    assert any(f"the answer is bigger than {cap} bytes" in n for n in notes), notes
    assert leftovers(plugin) == []
    assert nvim.exec_lua("return require('amp.native').loaded()") is False
    # Neovim read at most the cap of the checksum file into its memory.
    assert nvim.exec_lua("return collectgarbage('count')") < 64 * 1024


@pytest.fixture
def tls(tmp_path):
    """A self-signed certificate for 127.0.0.1 (openssl), as an ssl context
    for a server and a CA file for curl (CURL_CA_BUNDLE)."""
    import ssl
    if not shutil.which("openssl"):
        pytest.fail("openssl is needed to make a test certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    return ctx, cert


def test_https_installs_and_a_redirect_to_http_is_refused(session, plugin, release, tls):
    """Over https the install works; an https URL redirected to http is not
    followed (the library and its checksum would come unauthenticated), and
    nothing is installed."""
    ctx, cert = tls
    secure = ReleaseServer(tls=ctx)
    try:
        data = LIBRARY.read_bytes()
        release.publish(data)  # the plain-http server has the real files
        path = f"/v{VERSION}/{ARTIFACT}"

        def to_http(handler):
            handler.send_response(302)
            handler.send_header("Location", release.url + handler.path)
            handler.send_header("Content-Length", "0")
            handler.end_headers()

        secure.special[path] = to_http
        secure.special[path + ".sha256"] = to_http
        env = {"CURL_CA_BUNDLE": str(cert)}
        nvim = session(url=secure.url, extra_env=env)
        notes = install(nvim, "nothing was changed")
        assert any("redirected off https" in n for n in notes), notes
        assert leftovers(plugin) == []
        assert not any("installed" in n for n in notes), notes

        # The same over https end to end: installed.
        secure.special.clear()
        secure.publish(data)
        nvim2 = session(url=secure.url, extra_env=env)
        notes = install(nvim2, "installed")
        assert f"amp: installed {ARTIFACT} (checksum verified)" in notes, notes
        assert (plugin / "lua" / "amp_core.so").read_bytes() == data
    finally:
        secure.close()


def test_install_as_a_plugin_managers_build_step_raises_nothing(plugin, release, tmp_path):
    """lazy.nvim runs `build = ":Amp install"` during start-up, right after
    setup() (from `opts`), as nvim_cmd(..., { output = true }): an error
    line there is its "build failed". setup() must not report the library
    that the install is about to bring; the install then loads it and
    starts the server."""
    release.publish(LIBRARY.read_bytes())
    out = tmp_path / "result.json"
    init = tmp_path / "init.lua"
    init.write_text(f"""
vim.opt.rtp:prepend({str(plugin)!r})
vim.cmd.runtime("plugin/amp.lua")
require("amp").setup({{ install = {{ url = {release.url + '/v{version}'!r} }}, openctx = {{ enabled = false }} }})
local ok, output = pcall(vim.api.nvim_cmd, vim.api.nvim_parse_cmd("Amp install", {{}}), {{ output = true }})
local function done()
  local status = require("amp").status()
  vim.fn.writefile({{ vim.json.encode({{ ok = ok, output = tostring(output), running = status.running,
    messages = vim.api.nvim_exec2("messages", {{ output = true }}).output }}) }}, {str(out)!r})
  vim.cmd("qa!")
end
local function wait(n)
  if require("amp").is_running() or n > 200 then return done() end
  vim.defer_fn(function() wait(n + 1) end, 50)
end
vim.api.nvim_create_autocmd("VimEnter", {{ callback = function() wait(0) end }})
""")
    env = dict(os.environ)
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env[name] = str(tmp_path / name.lower())
    subprocess.run([NVIM, "--headless", "-u", str(init)], env=env, cwd=str(tmp_path),
                   stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    import json
    result = json.loads(out.read_text())
    assert result["ok"] is True, result
    assert "not built yet" not in result["output"] and "not built yet" not in result["messages"], result
    assert result["running"] is True, result
    assert f"amp: installed {ARTIFACT} (checksum verified)" in result["messages"], result
