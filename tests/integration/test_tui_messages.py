"""No message of the plugin ever needs Enter: Neovim's real TUI in tmux at
80x24 (where a second line, or a line wider than the screen, stops it at
"Press ENTER", and the agent's requests wait there), for the messages of a
first run: a missing library, :Amp install without a release or network,
:Amp build without cargo, a mistyped subcommand, a missing agent, a send
with no agent. Each message puts its action first, so what is cut to fit
80 columns is the explanation, not what to do."""
from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import NVIM, REPO, AmpEnv

HIT_ENTER = "Press ENTER"


class Tui:
    """Neovim's TUI in a private tmux server, `cols` x `rows`."""

    def __init__(self, root: Path, init: Path, env: dict[str, str], cols: int = 80, rows: int = 24):
        if not shutil.which("tmux"):
            pytest.fail("tmux is needed for the TUI tests")
        self.socket = str(root / "tui-tmux.sock")
        command = ["env", "-i"] + [f"{k}={v}" for k, v in env.items()] + [NVIM, "-u", str(init)]
        subprocess.run(["tmux", "-S", self.socket, "-f", "/dev/null", "new-session", "-d", "-s", "tui",
                        "-x", str(cols), "-y", str(rows), "-c", str(root), "--"] + command, check=True)

    def screen(self) -> list[str]:
        done = subprocess.run(["tmux", "-S", self.socket, "capture-pane", "-p", "-t", "tui"],
                              capture_output=True, text=True)
        return done.stdout.rstrip("\n").split("\n")

    def last(self) -> str:
        return self.screen()[-1].rstrip()

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "-S", self.socket, "send-keys", "-t", "tui", *keys], check=True)

    def command(self, cmd: str) -> None:
        self.keys(":" + cmd, "Enter")

    def wait_last(self, prefix: str, timeout: float = 15) -> str:
        """Waits for the last screen line to start with `prefix`, checking
        all along that no hit-enter prompt shows."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            assert not any(HIT_ENTER in line for line in screen), "\n".join(screen)
            if screen[-1].startswith(prefix):
                return screen[-1].rstrip()
            if time.monotonic() > deadline:
                raise AssertionError(f"no line starting {prefix!r}; screen:\n" + "\n".join(screen))
            time.sleep(0.05)

    def stays_clear(self, seconds: float = 1.0) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            screen = self.screen()
            assert not any(HIT_ENTER in line for line in screen), "\n".join(screen)
            time.sleep(0.05)

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True)


@pytest.fixture
def no_release():
    """A release server that has nothing (404 for every file)."""
    class Nothing(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_error(404)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Nothing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def fresh_clone(tmp_path: Path) -> Path:
    """The plugin as a fresh clone has it: no library."""
    root = tmp_path / "amp.nvim-rs"
    for part in ("lua", "plugin", "doc"):
        shutil.copytree(REPO / part, root / part)
    shutil.copy(REPO / "Cargo.toml", root / "Cargo.toml")
    return root


def tool_path(tmp_path: Path) -> str:
    """A PATH with curl and the hashing tools, without cargo or any agent."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    for tool in ("curl", "sha256sum", "shasum", "prlimit", "env", "sh"):
        found = shutil.which(tool)
        if found and not (bindir / tool).exists():
            (bindir / tool).symlink_to(found)
    return str(bindir)


def tui_env(env: AmpEnv, path: str) -> dict[str, str]:
    out = {k: env.environ[k] for k in ("HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME",
                                       "XDG_CACHE_HOME")}
    out.update(PATH=path, TERM="xterm-256color", LANG="C.UTF-8")
    return out


def test_first_run_messages_at_80_columns_need_no_enter(amp_env, tmp_path, no_release):
    plugin = fresh_clone(tmp_path)
    init = tmp_path / "init.lua"
    init.write_text(f"""
vim.opt.rtp:prepend({str(plugin)!r})
require("amp").setup({{ install = {{ url = {no_release + "/v{version}"!r} }} }})
""")
    tui = Tui(tmp_path, init, tui_env(amp_env, tool_path(tmp_path)))
    try:
        # Start-up without the library: one line, what to run first.
        assert tui.wait_last("amp: run :Amp build or :Amp install: ")
        # :Amp install, the release has no library, no cargo: one line.
        tui.command("Amp install")
        line = tui.wait_last("amp: install Rust (https://rustup.rs), then :Amp build: no cargo")
        assert len(line) <= 80
        tui.stays_clear()
        # :Amp build without cargo: one line.
        tui.command("Amp build")
        tui.wait_last("amp: install Rust (https://rustup.rs), then :Amp build: no cargo")
        tui.stays_clear()
        # A mistyped subcommand: the action, not the list, comes first.
        tui.command("Amp strat")
        tui.wait_last("amp: see :Amp <Tab> for the subcommands; there is no \"strat\"")
        # :Amp open of an agent that is not installed.
        tui.command("Amp open opencode")
        tui.wait_last("amp: set terminal.cmd.opencode or install opencode")
        tui.stays_clear()
    finally:
        tui.close()


def test_install_without_a_network_needs_no_enter(amp_env, tmp_path):
    """curl cannot connect: the progress line and the failure replace each
    other on the one message line."""
    plugin = fresh_clone(tmp_path)
    init = tmp_path / "init.lua"
    # A port nothing listens on: connection refused at once.
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    init.write_text(f"""
vim.opt.rtp:prepend({str(plugin)!r})
require("amp").setup({{ install = {{ url = "http://127.0.0.1:{port}/v{{version}}" }} }})
""")
    tui = Tui(tmp_path, init, tui_env(amp_env, tool_path(tmp_path)))
    try:
        tui.wait_last("amp: run :Amp build or :Amp install: ")
        tui.command("Amp install")
        tui.wait_last("amp: check install.url or the network: could not download")
        tui.stays_clear()
    finally:
        tui.close()


def test_send_with_no_agent_needs_no_enter(amp_env, tmp_path):
    init = tmp_path / "init.lua"
    init.write_text(f"""
vim.opt.rtp:prepend({str(REPO)!r})
require("amp").setup({{}})
""")
    tui = Tui(tmp_path, init, tui_env(amp_env, tool_path(tmp_path)))
    try:
        deadline = time.monotonic() + 10
        while not list(amp_env.lockfile_dir.glob("*.json")):
            assert time.monotonic() < deadline, "no lockfile"
            time.sleep(0.05)
        tui.command("Amp send explain this file to me in a few words please")
        tui.wait_last("amp: run :Amp open to start an agent")
        tui.command("Amp status")
        tui.wait_last("amp: running, amp on :")
        tui.stays_clear()
    finally:
        tui.close()
