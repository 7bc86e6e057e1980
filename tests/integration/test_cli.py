"""Working with the shipping Amp CLI: a restart keeps the port (and the real
CLI reconnects by itself), the CLI plugin that gives the agent Neovim's
diagnostics (installed by :Amp cli-plugin, run by the real CLI), connection
notices and the statusline, what :Amp send says with no agent, the log, and
start-up (deferred past VimEnter; no E739 race over the data directory).

The real CLI (tests/fixtures/amp-cli, npm) runs in a pseudo-terminal. Its
terminal UI starts only after ampcode.com said who the user is, so it is
pointed (AMP_URL) at tests/fixtures/amp-cli/offline_server.py, which answers
those start-up requests; its editor client, lockfile discovery, reconnect
logic and plugin runtime are the CLI's own.
"""
from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from conftest import NVIM, REPO, AmpEnv, lua_literal, open_client, wait_for
from harness import connections_of_session

CLI_FIXTURE = REPO / "tests" / "fixtures" / "amp-cli"
AMP_BIN = CLI_FIXTURE / "node_modules" / "@ampcode" / "cli-linux-x64" / "amp"
PLUGIN = REPO / "amp-plugin" / "amp-nvim-rs-diagnostics.ts"

sys.path.insert(0, str(CLI_FIXTURE))
import offline_server  # noqa: E402


def require_cli() -> None:
    if not AMP_BIN.exists():
        pytest.fail(f"the Amp CLI is not installed: npm ci --prefix {CLI_FIXTURE}")


@pytest.fixture
def amp_service():
    server, _ = offline_server.serve()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


class AmpCli:
    """The real `amp` in a pseudo-terminal, its log in a file of our own."""

    def __init__(self, env: AmpEnv, cwd: Path, service: str, args: list[str] | None = None):
        require_cli()
        self.log_path = env.root / f"amp-cli-{time.monotonic_ns()}.log"
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        environ = dict(env.environ, AMP_URL=service, AMP_API_KEY="sk-offline-test",
                       AMP_SKIP_UPDATE_CHECK="1", TERM="xterm-256color", PLUGINS="all")
        self.proc = subprocess.Popen(
            [str(AMP_BIN), "--log-file", str(self.log_path), *(args or [])],
            cwd=str(cwd), env=environ, stdin=slave, stdout=slave, stderr=slave,
            start_new_session=True)
        os.close(slave)
        self.master = master
        self.screen = bytearray()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.screen.extend(data)

    def log(self) -> list[dict]:
        try:
            text = self.log_path.read_text("utf-8", errors="replace")
        except OSError:
            return []
        out = []
        for line in text.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def connects(self) -> list[dict]:
        return [e for e in self.log() if e.get("message") == "ide-client: connected"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=5)
        os.close(self.master)


@pytest.fixture
def cli_factory(amp_service):
    started: list[AmpCli] = []

    def start(env: AmpEnv, cwd: Path, args: list[str] | None = None) -> AmpCli:
        cli = AmpCli(env, cwd, amp_service, args)
        started.append(cli)
        return cli

    yield start
    for cli in started:
        cli.close()


def clients(ed) -> int:
    return int(ed.lua("return require('amp').status().clients or 0"))


def record_echo(ed) -> None:
    """Every line shown in the message area or by vim.notify, in order."""
    ed.lua("""
        _G.amp_shown = {}
        local echo, notify = vim.api.nvim_echo, vim.notify
        vim.api.nvim_echo = function(chunks, history, opts)
          local text = {}
          for _, c in ipairs(chunks) do table.insert(text, c[1]) end
          table.insert(_G.amp_shown, table.concat(text))
          return echo(chunks, history, opts)
        end
        vim.notify = function(msg, level, opts)
          table.insert(_G.amp_shown, tostring(msg))
        end
    """)


def shown(ed) -> list[str]:
    return ed.lua("return _G.amp_shown") or []


# ---------------------------------------------------------------- the port survives a restart


def test_restart_and_stop_start_keep_the_port(nvim_factory):
    ed = nvim_factory()
    path, lock = ed.wait_lockfile()
    port = lock["port"]
    ed.nvim.command("Amp restart")
    new_path, new_lock = ed.wait_lockfile(where=lambda d: d["authToken"] != lock["authToken"])
    assert new_lock["port"] == port and new_path == path, (lock, new_lock)
    ed.connect().ping()

    ed.nvim.command("Amp stop")
    wait_for(lambda: not path.exists(), 5, "the lockfile to go")
    ed.nvim.command("Amp start")
    _, again = ed.wait_lockfile(where=lambda d: d["authToken"] != new_lock["authToken"])
    assert again["port"] == port
    ed.connect().ping()


def test_restart_takes_another_port_when_the_old_one_is_taken(nvim_factory):
    import socket
    ed = nvim_factory()
    port = ed.lock["port"]
    ed.nvim.command("Amp stop")
    squatter = socket.socket()
    try:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        ed.nvim.command("Amp start")
        _, lock = ed.wait_lockfile()
        assert lock["port"] != port
        ed.connect().ping()
    finally:
        squatter.close()


def test_a_changed_fixed_port_wins_over_the_previous_one(nvim_factory):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    ed = nvim_factory()
    ed.lua("require('amp').setup(...)", {"server": {"port": free}, "log_level": "debug"})
    _, lock = ed.wait_lockfile(where=lambda d: d["port"] == free)
    assert lock["port"] == free


def test_the_real_cli_reconnects_after_amp_restart(nvim_factory, cli_factory):
    """The CLI finds the editor by its lockfile and connects; after
    :Amp restart (new token, same port) and after :Amp stop / :Amp start it
    comes back by itself: it re-reads only the lockfile of the port it knew.

    The reconnections are seen from the sockets: the CLI writes its log
    through a buffer that may hold an "ide-client: connected" line for
    many seconds (seen: 8 s, and more than 15 s), so only the first
    connection, logged at start-up, is read from the log."""
    ed = nvim_factory()
    record_echo(ed)
    port = ed.lock["port"]
    cli = cli_factory(ed.env, ed.cwd)
    wait_for(lambda: cli.connects(), 30, f"the CLI to connect (log: {cli.log_path})")
    assert cli.connects()[0].get("port") == port, cli.connects()
    wait_for(lambda: clients(ed) == 1, 10, "Neovim to count the CLI")
    wait_for(lambda: "amp: Amp connected" in shown(ed), 5, "the connect notice")

    def reconnected(before: set[int]) -> set[int]:
        # A connection of the CLI's own processes to the port, not one it
        # had before, that the server took (it checks the new token).
        now = connections_of_session(cli.proc.pid, port)
        return now if now and not now & before and clients(ed) == 1 else set()

    first = wait_for(lambda: connections_of_session(cli.proc.pid, port), 5, "the CLI's socket")
    ed.nvim.command("Amp restart")
    second = wait_for(lambda: reconnected(first), 15, "the CLI to reconnect after :Amp restart")
    assert ed.lock["port"] == port
    # Counted as an agent once the connection stays (connection.lua's settle time).
    wait_for(lambda: shown(ed).count("amp: Amp connected") == 2, 5, "the second connect notice")

    ed.nvim.command("Amp stop")
    time.sleep(2.5)  # the CLI dials the dead port meanwhile
    ed.nvim.command("Amp start")
    wait_for(lambda: reconnected(second), 15, "the CLI to reconnect after :Amp stop, :Amp start")
    wait_for(lambda: shown(ed).count("amp: Amp connected") == 3, 5, "the third connect notice")
    notices = [s for s in shown(ed) if "connected" in s]
    assert notices.count("amp: Amp connected") == 3, notices
    assert all("\n" not in s and len(s) < 80 for s in notices), notices


# ---------------------------------------------------------------- the CLI plugin for diagnostics


def test_cli_plugin_install_status_remove(nvim_factory):
    ed = nvim_factory()
    record_echo(ed)
    target = ed.env.config_home / "amp" / "plugins" / "amp-nvim-rs-diagnostics.ts"
    ed.nvim.command("Amp cli-plugin")
    assert "not installed" in shown(ed)[-1], shown(ed)
    ed.nvim.command("Amp cli-plugin install")
    assert target.read_bytes() == PLUGIN.read_bytes()
    assert shown(ed)[-1].startswith("amp: installed the Amp CLI plugin"), shown(ed)
    ed.nvim.command("Amp cli-plugin status")
    assert shown(ed)[-1].startswith("amp: the Amp CLI plugin is installed"), shown(ed)
    target.write_text("// an older version\n")
    ed.nvim.command("Amp cli-plugin")
    assert "out of date" in shown(ed)[-1], shown(ed)
    ed.nvim.command("checkhealth amp")
    report = "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    assert "Amp CLI plugin" in report and "out of date" in report, report
    assert "amp (the Amp CLI)" in report, report
    ed.nvim.command("Amp cli-plugin remove")
    assert not target.exists()
    assert ed.lua("return vim.fn.getcompletion('Amp cli-plugin ', 'cmdline')") == ["install", "remove", "status"]


def diagnostics_buffer(ed, path: Path) -> None:
    path.write_text("let x = 1\nlet y = oops\n")
    ed.edit(path)
    ed.lua("""
        local ns = vim.api.nvim_create_namespace('amp-cli-test')
        vim.diagnostic.set(ns, 0, {
          { lnum = 1, col = 8, end_lnum = 1, end_col = 12, severity = vim.diagnostic.severity.ERROR,
            message = 'cannot find name oops' },
          { lnum = 0, col = 4, end_lnum = 0, end_col = 5, severity = vim.diagnostic.severity.WARN,
            message = 'x is never read' },
        })
    """)


def test_the_real_cli_runs_the_plugin_and_gets_neovims_diagnostics(nvim_factory, tmp_path):
    """`amp plugins exec` (the CLI's own plugin runtime) loads a harness that
    loads the installed plugin through the plugin API and calls its tool."""
    require_cli()
    ed = nvim_factory()
    ed.nvim.command("Amp cli-plugin install")
    installed = ed.env.config_home / "amp" / "plugins" / "amp-nvim-rs-diagnostics.ts"
    src = ed.cwd / "main.ts"
    diagnostics_buffer(ed, src)
    before = clients(ed)

    harness = tmp_path / "harness.ts"
    harness.write_text(f"""
import register from {json.dumps(str(installed))}
export default async function (amp) {{
  const tools = []
  register(new Proxy(amp, {{ get: (t, k) => k === 'registerTool' ? (d) => tools.push(d) : t[k] }}))
  const out = {{ names: tools.map((t) => t.name) }}
  for (const [key, path] of [['file', {json.dumps(str(src))}], ['dir', {json.dumps(str(ed.cwd))}],
                             ['elsewhere', '/nonexistent/place']]) {{
    try {{ out[key] = await tools[0].execute({{ path }}, {{}}) }} catch (e) {{ out[key] = 'ERROR ' + e.message }}
  }}
  try {{ await tools[0].execute({{ path: 'relative.ts' }}, {{}}) }} catch (e) {{ out.relative = 'ERROR ' + e.message }}
  console.error('RESULT ' + JSON.stringify(out))
}}
""")
    env = dict(ed.env.environ, PLUGINS="all", AMP_SKIP_UPDATE_CHECK="1")
    run = subprocess.run([str(AMP_BIN), "plugins", "exec", str(harness), "session.start"],
                         cwd=str(ed.cwd), env=env, capture_output=True, text=True, timeout=60)
    found = re.search(r"RESULT (\{.*\})", run.stdout + run.stderr)
    assert found, (run.returncode, run.stdout[-2000:], run.stderr[-2000:])
    out = json.loads(found.group(1))
    assert out["names"] == ["neovim_diagnostics"], out
    assert out["file"].splitlines() == [
        f"{src}:2:9: error: cannot find name oops",
        f"{src}:1:5: warning: x is never read",
    ], out
    assert out["dir"] == out["file"], out
    assert out["elsewhere"].startswith("No Neovim running amp.nvim-rs has /nonexistent/place"), out
    assert out["relative"].startswith("ERROR path must be an absolute"), out
    # one-request connections: gone again, and no notice
    wait_for(lambda: clients(ed) == before, 5, "the plugin's connections to close")


def test_the_real_cli_loads_the_installed_plugin_as_a_tool(nvim_factory, amp_service):
    """With the plugin installed, `amp tools list` (PLUGINS=all) lists its tool."""
    require_cli()
    ed = nvim_factory()
    ed.nvim.command("Amp cli-plugin install")
    env = dict(ed.env.environ, PLUGINS="all", AMP_URL=amp_service, AMP_API_KEY="sk-offline-test",
               AMP_SKIP_UPDATE_CHECK="1")
    run = subprocess.run([str(AMP_BIN), "tools", "list", "--json"], cwd=str(ed.cwd), env=env,
                         capture_output=True, text=True, timeout=90)
    assert "neovim_diagnostics" in run.stdout, (run.returncode, run.stdout[-3000:], run.stderr[-3000:])


# ---------------------------------------------------------------- notices and statusline


def test_connect_and_disconnect_notices_and_statusline(nvim_factory):
    ed = nvim_factory()
    record_echo(ed)
    assert ed.lua("return require('amp').statusline()") == "amp"
    c = ed.connect()
    wait_for(lambda: "amp: Amp connected" in shown(ed), 5, "the connect notice")
    assert ed.lua("return require('amp').statusline()") == "amp: 1 agent (Amp)"
    c2 = ed.connect()
    wait_for(lambda: ed.lua("return require('amp').statusline()") == "amp: 2 agents (2 Amp)", 5, "two agents")
    c2.close()
    wait_for(lambda: "amp: Amp disconnected (1 left)" in shown(ed), 5, "the disconnect notice")
    c.close()
    wait_for(lambda: "amp: Amp disconnected" in shown(ed), 5, "the last disconnect notice")
    assert ed.lua("return require('amp').statusline()") == "amp"
    # a one-request client (the diagnostics plugin's kind) is not an agent
    n = len(shown(ed))
    quick = ed.connect()
    quick.ping()
    quick.close()
    time.sleep(0.6)
    assert [s for s in shown(ed)[n:] if "agent" in s] == [], shown(ed)
    ed.nvim.command("Amp stop")
    assert ed.lua("return require('amp').statusline()") == ""
    assert all(s.startswith("amp: ") and "\n" not in s for s in shown(ed)), shown(ed)


def test_a_connect_notice_never_makes_a_second_hit_enter_prompt(nvim_factory):
    """An agent connects just before Neovim stops at a hit-enter prompt for a
    multi-line message: once the user presses Enter, the notice must not
    stop Neovim at a second prompt, where the agent's requests would wait."""
    ed = nvim_factory()
    p = ed.cwd / "opened.txt"
    p.write_text("saved\n")
    ed.edit(p)
    ed.nvim.current.buffer[:] = ["unsaved"]
    c = ed.connect()
    ed.nvim.ui_attach(80, 24, rgb=True)
    try:
        ed.nvim.command("set cmdheight=1")
        ed.nvim.command('echo "one\\ntwo\\nthree"', async_=True)
        wait_for(lambda: ed.nvim.api.get_mode()["mode"] == "r", 5, "the hit-enter prompt")
        time.sleep(0.5)  # the connection settles into an agent meanwhile
        waiting = c.send_request("readFile", {"path": str(p)})
        ed.nvim.input("<CR>")
        assert c.recv_response(waiting, timeout=3)["readFile"]["content"] == "unsaved\n"
        wait_for(lambda: "amp: Amp connected" in ed.nvim.command_output("messages"), 5, "the notice")
    finally:
        for _ in range(5):  # a failure leaves a prompt: dismiss it so the detach is answered
            if ed.nvim.api.get_mode()["mode"] != "r":
                break
            ed.nvim.input("<CR>")
            time.sleep(0.1)
        ed.nvim.ui_detach()


def test_connection_notices_can_be_turned_off(nvim_factory):
    ed = nvim_factory(notify={"connections": False})
    record_echo(ed)
    c = ed.connect()
    wait_for(lambda: ed.lua("return require('amp').statusline()") == "amp: 1 agent (Amp)", 5, "the statusline")
    c.close()
    wait_for(lambda: ed.lua("return require('amp').statusline()") == "amp", 5, "the statusline")
    assert shown(ed) == []
    err = ed.lua("local ok, err = pcall(require('amp').setup, { notify = { connections = 1 } }); return err")
    assert "amp: setup: notify.connections must be a boolean, got 1" in err, err


def test_send_with_no_agent_says_so_and_keeps_nothing_for_later(nvim_factory):
    """No agent is connected: one line says nothing was sent and names
    :Amp open; nothing waits for an agent that connects later (a promise
    the shipping CLI would not keep: it ignores those notifications)."""
    ed = nvim_factory()
    record_echo(ed)
    ed.nvim.command("Amp send hello agent")
    want = "amp: run :Amp open to start an agent: none is connected, so nothing was sent"
    wait_for(lambda: shown(ed) and shown(ed)[-1] == want, 5, "the one line")
    ed.nvim.command("Amp prompt second")
    wait_for(lambda: len(shown(ed)) == 2 and shown(ed)[-1] == want, 5, "the second line")
    ed.nvim.command("Amp status")
    assert "waiting" not in shown(ed)[-1], shown(ed)
    c = ed.connect()
    with pytest.raises(TimeoutError):
        while True:
            msg = c.recv_message(timeout=1.0)
            note = msg.get("serverNotification") or {}
            assert not {"userSentMessage", "appendToPrompt"} & set(note), msg
    c.close()


# ---------------------------------------------------------------- log, prefixes


def test_log_has_readable_times_and_opens_at_the_end(nvim_factory):
    ed = nvim_factory()
    ed.connect().ping()
    ed.lua("require('amp.native').call('log', 'info', 'the newest line')")
    log = Path(ed.lua("return require('amp').get_config().log_file"))
    wait_for(lambda: "the newest line" in log.read_text(), 5, "the log line")
    for line in log.read_text().splitlines():
        assert re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} (TRACE|DEBUG|INFO |WARN |ERROR) ", line), line
    ed.nvim.command("Amp log")
    row, last = ed.lua("return { vim.api.nvim_win_get_cursor(0)[1], vim.api.nvim_buf_line_count(0) }")
    assert row == last and last > 1


def test_the_plugins_own_log_is_never_an_agents_change(nvim_factory):
    """After :Amp log and :q the log buffer stays loaded while the server
    keeps appending to its file: that is no agent's change, so it is not
    watched, not counted for review and not reported as a visible file."""
    ed = nvim_factory()
    c = ed.connect()
    c.ping()
    ed.nvim.command("Amp log")
    log = ed.lua("return require('amp').get_config().log_file")
    assert ed.lua("return vim.api.nvim_buf_get_name(0)") == log
    assert ed.lua("return require('amp.buffer').file_of(0)") is None
    ed.nvim.command("q")
    assert ed.lua("return vim.api.nvim_buf_is_loaded(vim.fn.bufnr(...))", log)
    for i in range(3):
        ed.lua("require('amp.native').call('log', 'info', ...)", f"a new line {i}")
        c.ping()
        time.sleep(0.4)
    wait_for(lambda: "a new line 2" in Path(log).read_text(), 5, "the log lines")
    time.sleep(1.0)  # the watcher's debounce and the review's bookkeeping
    assert ed.lua("return require('amp').statusline()") == "amp: 1 agent (Amp)"
    assert ed.lua("return package.loaded['amp.review'] and require('amp.review').count() or 0") == 0
    ed.nvim.command("Amp review")
    assert ed.lua("return vim.api.nvim_buf_get_name(0)") != log
    # Opened by hand (:edit), the log is the plugin's own file all the same.
    ed.nvim.command("edit " + log.replace(" ", "\\ "))
    assert ed.lua("return require('amp.buffer').file_of(0)") is None


def test_messages_have_one_prefix():
    """Every message the Lua shell builds starts with "amp: "."""
    bad = []
    for path in (REPO / "lua" / "amp").rglob("*.lua"):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"[\"'](amp\.nvim(-rs)?|amp\.setup):", line) and "health.start" not in line:
                bad.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert bad == []


# ---------------------------------------------------------------- start-up


def test_setup_during_startup_starts_the_server_after_vimenter(nvim_factory, amp_env):
    """The library, its threads and the lockfile come after start-up: at
    VimEnter nothing is loaded yet; right after, the server runs."""
    from conftest import Editor
    ed = Editor(amp_env, amp_env.workspace, {"auto_start": True}, None,
                plugin_before="autocmd VimEnter * ++once lua vim.g.amp_at_enter = "
                              "{ loaded = require('amp.native').loaded(), lock = #vim.fn.glob(vim.env.XDG_DATA_HOME .. '/amp/ide/*.json', 0, 1) }")
    try:
        ed.wait_lockfile()
        assert ed.lua("return vim.g.amp_at_enter") == {"loaded": False, "lock": 0}
        assert ed.lua("return require('amp').is_running()") is True
    finally:
        ed.shutdown()


def test_the_library_is_mapped_and_its_runtime_made_off_the_main_thread(amp_env):
    """setup() during start-up maps the library on a thread of its own (and
    makes its tokio runtime there), so the main thread's load after VimEnter
    finds it: seen from VimEnter, before the main thread loads anything, in
    /proc/self/maps and the process's thread names."""
    from conftest import Editor
    probe = ("autocmd VimEnter * ++once lua "
             "local lib = vim.fn.resolve(vim.fn.fnamemodify(vim.api.nvim_get_runtime_file('lua/amp/init.lua', false)[1], ':h:h:h')) "
             ".. '/target/release/libamp_core.so'; "
             "local mapped, threads = false, 0; "
             "for _ = 1, 100 do "
             "  mapped = io.open('/proc/self/maps'):read('*a'):find(lib, 1, true) ~= nil; "
             "  threads = 0; "
             "  for _, t in ipairs(vim.fn.glob('/proc/self/task/*/comm', 0, 1)) do "
             "    if io.open(t):read('*l'):find('amp%-tokio') then threads = threads + 1 end end; "
             "  if mapped and threads > 0 then break end; vim.uv.sleep(50) end; "
             "vim.g.amp_at_enter = { loaded = package.loaded['amp.native'] ~= nil and require('amp.native').loaded(), "
             "mapped = mapped, threads = threads }")
    ed = Editor(amp_env, amp_env.workspace, {"auto_start": True}, None, plugin_before=probe)
    try:
        ed.wait_lockfile()
        at_enter = ed.lua("return vim.g.amp_at_enter")
        assert at_enter["loaded"] is False and at_enter["mapped"] is True and at_enter["threads"] >= 2, at_enter
        # init.lua maps the same files, in the same order, as amp.native loads.
        init = (REPO / "lua" / "amp" / "init.lua").read_text()
        listed = re.search(r'local candidates = "(.*?)"\s*\.\. "(.*?)"', init, re.S)
        assert (listed.group(1) + listed.group(2)).split("\\n") == ed.lua("return require('amp.native').candidates")
    finally:
        ed.shutdown()


def test_an_api_call_before_vimenter_does_the_deferred_work_at_once(amp_env):
    from conftest import Editor
    probe = ("lua require('amp').setup({ auto_start = false }); "
             "vim.g.amp_probe = { before = require('amp.native').loaded(), "
             "running = require('amp').is_running(), after = require('amp.native').loaded() }")
    ed = Editor(amp_env, amp_env.workspace, {"auto_start": False}, None, plugin_before=probe)
    try:
        assert ed.lua("return vim.g.amp_probe") == {"before": False, "running": False, "after": True}
    finally:
        ed.shutdown()


def test_an_invalid_option_given_during_startup_is_one_error_line_after_it(nvim_factory):
    ed = nvim_factory(_wait=False, server={"port": -1})
    want = "amp: setup: server.port must be an integer between 0 and 65535, got -1"
    wait_for(lambda: want in ed.messages(), 5, "the error line")
    assert ed.lua("return require('amp').is_running()") is False
    err = ed.lua("local ok, err = pcall(require('amp').setup, { server = { port = -1 } }); return err")
    assert want in err, err  # after start-up: raised, as before


def test_fresh_accounts_never_race_neovim_for_the_data_directory(tmp_path):
    """Many first starts in brand-new accounts (no ~/.local yet), several at
    once, each with a config that, like a plugin manager's bootstrap,
    creates directories under stdpath('data') and stdpath('state') at
    VimEnter while the plugin starts: no E739, every server starts."""
    config = tmp_path / "init.lua"
    config.write_text(f"""
vim.opt.rtp:prepend({lua_literal(str(REPO))})
require('amp').setup({{}})
vim.api.nvim_create_autocmd('VimEnter', {{ callback = function()
  vim.fn.mkdir(vim.fn.stdpath('data') .. '/site/pack/x/start', 'p')
  vim.fn.mkdir(vim.fn.stdpath('state') .. '/x', 'p')
  vim.schedule(function() vim.fn.mkdir(vim.fn.stdpath('data') .. '/lazy', 'p') end)
end }})
vim.api.nvim_create_autocmd('User', {{ pattern = 'AmpServerStarted', callback = function()
  vim.fn.writefile(vim.split(vim.fn.execute('messages'), '\\n'), vim.env.AMP_TEST_OUT)
  vim.cmd('qa!')
end }})
""")
    runs, parallel = 24, 6
    failures = []
    for batch in range(runs // parallel):
        procs = []
        for i in range(parallel):
            root = tmp_path / f"account{batch}-{i}"
            home = root / "home"
            home.mkdir(parents=True)
            env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "NVIM", "AMP_", "VIM"))}
            env.update(HOME=str(home), AMP_TEST_OUT=str(root / "messages.txt"))
            procs.append((root, subprocess.Popen(
                [NVIM, "--headless", "-u", str(config)], cwd=str(home), env=env,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)))
        for root, p in procs:
            try:
                _, err = p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate()
                failures.append(f"{root.name}: did not start the server and quit")
                continue
            out = root / "messages.txt"
            text = (out.read_text() if out.exists() else "") + err.decode(errors="replace")
            if "E739" in text or not out.exists():
                failures.append(f"{root.name}: {text.strip()!r}")
            assert (root / "home" / ".local" / "share" / "amp" / "ide").is_dir()
    assert failures == [], failures
