"""`:Amp install`: the prebuilt library of a release, from a local HTTP
server serving the real built library, into a copy of the plugin that has
no library yet (as a fresh clone without Rust)."""

import hashlib
import http.server
import os
import shutil
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

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.truncated: set[str] = set()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
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


def start_nvim(tmp_path, plugin: Path, url: str, path_env: str | None = None):
    sock = str(tmp_path / f"nvim-{len(list(tmp_path.glob('nvim-*.sock')))}.sock")
    env = dict(os.environ)
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env[name] = str(tmp_path / name.lower())
    if path_env is not None:
        env["PATH"] = path_env
    proc = subprocess.Popen([NVIM, "--headless", "--clean", "--listen", sock, "--cmd", f"set rtp^={plugin}"],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not os.path.exists(sock):
        assert time.monotonic() < deadline, "nvim did not start"
        time.sleep(0.02)
    nvim = pynvim.attach("socket", path=sock)
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

    def run(path_env=None):
        proc, nvim = start_nvim(tmp_path, plugin, release.url, path_env)
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
    notes = install(nvim, "cargo not found")
    assert any(f"the release has no {ARTIFACT}; building with cargo instead" in n for n in notes), notes
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
    assert stale == [f"amp: the native library is v{VERSION} but the plugin is v99.0.0: run :Amp install or :Amp build"]
