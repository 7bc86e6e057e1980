"""Hardening (issue #11): hostile file names, special files, connection and
log floods, memory budgets, main-thread fairness, symlinked lock directories,
prompts. Against a real headless Neovim and real clients, loopback only.

Every flood here is bounded in time; memory tests have an RSS watchdog.
Figures are printed: run with ``-s`` to see them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import threading
import time
from pathlib import Path

import pytest

from conftest import (file_uri, flood_diagnostics_and_log_moves, responsive, tighter_time_bound_fixture,
                      wait_for)
from resilience_helpers import OP_TEXT, RawWs, amp_log, frame, wait_clients

_hardening_time_bound = tighter_time_bound_fixture(60.0, "hardening test")


# --------------------------------------------------------------------------
# 1. openURI: file names are never command text; special files are refused
# --------------------------------------------------------------------------

HOSTILE_NAMES = [
    # The brief's name, and one that does run on `vim.cmd("edit " .. fnameescape(name))`:
    # fnameescape leaves "(", ")", "." and "," alone, and vim.cmd runs each line.
    "evil\nlua=vim.g.pwned=1",
    "evil\nlua=vim.api.nvim_set_var(vim.v.progname,1)",
    # shell-ish and Ex-special characters
    "sh $(touch PWNED) `touch PWNED2`; |let g:pwned=1| %#<cfile>*.txt",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=["newline-lua=", "newline-runs", "shellish"])
def test_openuri_hostile_file_name_opens_that_file_runs_nothing(editor, name):
    ws = editor.env.workspace
    target = ws / name
    target.write_text("the hostile file\n", encoding="utf-8")
    c = editor.connect()
    result = c.call("openURI", {"uri": file_uri(target)})
    assert result.get("success") is True, result
    got = editor.lua("return vim.api.nvim_buf_get_name(0)")
    assert got == str(target), f"opened {got!r}, not {str(target)!r}"
    assert editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)") == ["the hostile file"]
    assert editor.lua("return vim.g.pwned") is None
    assert editor.lua("return vim.g.nvim") is None
    assert not (ws / "PWNED").exists() and not (ws / "PWNED2").exists()
    # Only the file itself (and its buffer) exist; nothing else was created.
    assert sorted(p.name for p in ws.iterdir()) == [name]


def release_fifo_readers(path) -> None:
    """Opens the FIFO for writing a few times, so a reader blocked in open() goes on."""
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            time.sleep(0.05)
            continue
        time.sleep(0.05)
        os.close(fd)


@pytest.mark.parametrize("kind", ["fifo", "socket", "chardev"])
def test_openuri_refuses_special_files_quickly(editor, kind, tmp_path):
    if kind == "fifo":
        path = editor.env.workspace / "a pipe"
        os.mkfifo(path)
    elif kind == "socket":
        path = tmp_path / "s.sock"
        srv = socket.socket(socket.AF_UNIX)
        srv.bind(str(path))
    else:
        path = "/dev/null"
    c = editor.connect()
    before = editor.lua("return vim.api.nvim_buf_get_name(0)")
    t = time.monotonic()
    try:
        result = c.call("openURI", {"uri": file_uri(path)}, timeout=3)
    except TimeoutError:
        if kind == "fifo":
            release_fifo_readers(path)  # or the teardown's :qa! would wait forever
        raise AssertionError(f"openURI of a {kind} got no answer: Neovim hangs opening it") from None
    took = time.monotonic() - t
    print(f"\nopenURI of a {kind} refused in {took * 1000:.1f} ms: {result}")
    assert result.get("success") is False, result
    assert "only regular files and directories" in result.get("message", ""), result
    assert took < 1.0
    responsive(editor, 1.0)
    assert editor.lua("return vim.api.nvim_buf_get_name(0)") == before
    # A symlink to a FIFO is refused too (the target decides).
    if kind == "fifo":
        link = editor.env.workspace / "link to pipe"
        link.symlink_to(path)
        try:
            result = c.call("openURI", {"uri": file_uri(link)}, timeout=3)
        except TimeoutError:
            release_fifo_readers(path)
            raise AssertionError("openURI of a link to a FIFO got no answer: Neovim hangs opening it") from None
        assert result.get("success") is False, result
        responsive(editor, 1.0)
    c.ping("still served")


# --------------------------------------------------------------------------
# 2. handshake / file-descriptor flood
# --------------------------------------------------------------------------


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def nofile_limits(pid: int) -> tuple[str, str]:
    for line in open(f"/proc/{pid}/limits"):
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return soft, hard
    raise AssertionError("no 'Max open files' in /proc/pid/limits")


def test_half_open_connection_flood_editor_and_agent_keep_working(nvim_factory):
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 2300
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            pytest.skip(f"the test itself needs {want} descriptors (hard limit {hard})")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    ed = nvim_factory()
    port = ed.lock["port"]
    # The server raised its soft limit of open files to the hard limit.
    nsoft, nhard = nofile_limits(ed.pid)
    assert nsoft == nhard, f"soft limit {nsoft} not raised to the hard limit {nhard}"
    baseline = open_fds(ed.pid)
    target = ed.env.workspace / "saved.txt"
    target.write_text("before\n")
    ed.edit(target)

    FLOOD = 2000
    socks: list[socket.socket] = []
    stop = threading.Event()
    peak = {"fds": 0}

    def flood():
        for i in range(FLOOD):
            if stop.is_set():
                return
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=2)
                # An unfinished request: the handshake never completes.
                s.sendall(b"GET /?auth=x HTTP/1.1\r\nHost: localhost\r\n")
                socks.append(s)
            except OSError:
                time.sleep(0.001)

    def watch_fds():
        while not stop.is_set():
            try:
                peak["fds"] = max(peak["fds"], open_fds(ed.pid))
            except OSError:
                pass
            time.sleep(0.01)

    t0 = time.monotonic()
    threads = [threading.Thread(target=flood, daemon=True), threading.Thread(target=watch_fds, daemon=True)]
    for t in threads:
        t.start()
    try:
        # While the flood runs: the user's :w works, an agent connects and is answered.
        ed.nvim.current.buffer[:] = ["after"]
        t = time.monotonic()
        ed.nvim.command("write")
        write_took = time.monotonic() - t
        assert target.read_text() == "after\n"
        assert write_took < 1.0, f":w took {write_took:.3f} s during the flood"
        connected, tries = None, 0
        while connected is None and tries < 5:
            tries += 1
            try:
                connected = ed.connect()
                connected.ping("during the flood", timeout=5)
            except Exception:
                connected = None
                time.sleep(0.2)
        assert connected is not None, "no agent could connect during the flood"
        threads[0].join(timeout=20)
        flood_took = time.monotonic() - t0
        connected.ping("after the flood", timeout=5)
        fresh = ed.connect()
        fresh.ping("fresh after the flood", timeout=5)
        responsive(ed, 1.0)
        time.sleep(0.1)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=5)
        for s in socks:
            s.close()
    print(f"\n{FLOOD} half-open connections in {flood_took:.2f} s: nvim fds baseline {baseline}, "
          f"peak {peak['fds']}; :w {write_took * 1000:.1f} ms; agent connected on try {tries}")
    # At most max_pending_handshakes (16) half-open connections are kept, 4 x 16 for
    # a moment while all are younger than 500 ms, plus a few in passing (the
    # code before this limit held all 2,000).
    assert peak["fds"] - baseline < 150, f"fds grew from {baseline} to {peak['fds']}"


# --------------------------------------------------------------------------
# 3. logging: refused handshakes with huge Origin headers
# --------------------------------------------------------------------------


def test_refused_handshake_flood_with_huge_origins_keeps_the_log_small(nvim_factory):
    cap = 64 * 1024
    ed = nvim_factory(log_max_bytes=cap)
    port = ed.lock["port"]
    log_path = Path(ed.lua("return require('amp').get_config().log_file"))
    # Visible ASCII only: the HTTP parser refuses control characters in values
    # itself (log::escape's unit test covers them).
    huge = "https://evil.test/" + "A" * 6000 + "\"'%1b[2J" + "B" * 1000
    N = 300
    t0 = time.monotonic()
    refused = 0
    for i in range(N):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall((f"GET / HTTP/1.1\r\nHost: localhost:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                   f"Origin: {huge}{i}\r\n\r\n").encode("latin-1"))
        head = b""
        try:
            while b"\r\n\r\n" not in head:
                chunk = s.recv(65536)
                if not chunk:
                    break
                head += chunk
        except OSError:
            pass
        if head.startswith(b"HTTP/1.1 403"):
            refused += 1
            assert len(head) < 2000, f"the refusal echoes the header: {len(head)} bytes"
        s.close()
    took = time.monotonic() - t0
    assert refused == N, f"{refused} of {N} refused"
    c = ed.connect()
    c.ping("still served")
    time.sleep(0.3)  # the writer thread
    size = log_path.stat().st_size
    old = log_path.with_name(log_path.name + ".1")
    old_size = old.stat().st_size if old.exists() else 0
    text = log_path.read_text("utf-8", errors="replace")
    lines = [l for l in text.splitlines() if "handshake refused" in l]
    print(f"\n{N} refused handshakes with 7 KB Origins in {took:.2f} s: log {size} B (+ {old_size} B in .1), "
          f"{len(lines)} 'handshake refused' lines, longest line {max(map(len, text.splitlines()))} chars")
    assert size <= cap and old_size <= cap
    assert 1 <= len(lines) <= 20, len(lines)
    assert all(len(l) < 600 for l in text.splitlines()), "a log line carries the whole header"


def test_log_file_is_rotated_at_its_cap(nvim_factory):
    cap = 16 * 1024
    ed = nvim_factory(log_max_bytes=cap)
    log_path = Path(ed.lua("return require('amp').get_config().log_file"))
    for i in range(400):
        ed.lua("require('amp.native').call('log', 'info', ...)", f"line {i} " + "z" * 100)
    old = log_path.with_name(log_path.name + ".1")
    wait_for(lambda: old.exists(), 5, "the rotated log file")
    time.sleep(0.2)
    assert log_path.stat().st_size <= cap and old.stat().st_size <= cap
    assert not log_path.with_name(log_path.name + ".2").exists()
    assert "line 399" in log_path.read_text()


# --------------------------------------------------------------------------
# 4. memory: one in-flight budget for all requests
# --------------------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class RssWatchdog:
    """Samples a process's RSS; kills it (SIGKILL) past ``limit`` bytes of growth."""

    def __init__(self, pid: int, limit: int):
        self.pid, self.limit = pid, limit
        self.baseline = rss_bytes(pid)
        self.peak = self.baseline
        self.killed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                rss = rss_bytes(self.pid)
            except (OSError, AssertionError):
                return
            self.peak = max(self.peak, rss)
            if rss - self.baseline > self.limit:
                self.killed = True
                os.kill(self.pid, signal.SIGKILL)
                return
            time.sleep(0.01)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.peak - self.baseline


MIB = 1024 * 1024


def test_in_flight_budget_bounds_memory_under_a_big_frame_flood(nvim_factory):
    """16 editFile messages of 32 MiB from one client while the main thread is
    busy: with a 64 MiB budget only about two are held at once."""
    budget = int(os.environ.get("AMP_TEST_BUDGET_MIB", "64")) * MIB
    ed = nvim_factory(server={"max_inflight_bytes": budget})
    target = ed.env.workspace / "big.txt"
    target.write_text("small\n")
    line = "x" * 99 + "\n"
    content = line * (32 * MIB // len(line))
    lock = ed.lock
    rw = RawWs(lock["port"], lock["authToken"], timeout=60)
    payloads = [json.dumps({"clientRequest": {"id": f"e{i}", "editFile": {"path": str(target), "fullContent": content}}})
                for i in range(2)]
    watchdog = RssWatchdog(ed.pid, limit=900 * MIB)
    # The main thread is busy for 4 s: requests that need it stay in flight.
    ed.nvim.request("nvim_exec_lua", "local t = vim.uv.hrtime() while vim.uv.hrtime() - t < 4e9 do end", [],
                    async_=True)
    sent = {"n": 0}

    def send_all():
        for i in range(16):
            rw.sock.sendall(frame(OP_TEXT, payloads[i % 2].replace(f'"e{i % 2}"', f'"e{i}"', 1).encode()))
            sent["n"] += 1

    sender = threading.Thread(target=send_all, daemon=True)
    t0 = time.monotonic()
    sender.start()
    try:
        time.sleep(3.0)
        sent_while_busy = sent["n"]
        answers = {}
        deadline = time.monotonic() + 45
        while len(answers) < 16:
            assert not watchdog.killed, "RSS watchdog killed nvim"
            _, op, payload = rw.recv_frame(max(0.01, deadline - time.monotonic()))
            if op != OP_TEXT:
                continue
            msg = json.loads(payload)
            inner = msg.get("serverResponse")
            if isinstance(inner, dict):
                answers[inner["id"]] = inner
        took = time.monotonic() - t0
    finally:
        growth = watchdog.stop()
    sender.join(timeout=10)
    assert not watchdog.killed, f"RSS grew past the watchdog's limit ({growth / MIB:.0f} MiB)"
    assert all("editFile" in a and a["editFile"]["success"] for a in answers.values()), \
        [a for a in answers.values() if "editFile" not in a][:1]
    print(f"\n16 x 32 MiB editFile from one client, budget {budget // MIB} MiB, main thread busy 4 s: "
          f"nvim RSS +{growth / MIB:.0f} MiB at peak (baseline {watchdog.baseline / MIB:.0f} MiB); "
          f"{sent_while_busy} of 16 sent while busy; all answered in {took:.1f} s")
    # Not all 16 frames could be pushed into the server while it was busy.
    assert sent_while_busy < 12, f"{sent_while_busy} frames of 32 MiB accepted while the main thread was busy"
    assert growth < 500 * MIB, f"RSS grew {growth / MIB:.0f} MiB"
    rw.close()
    responsive(ed, 2.0)


# --------------------------------------------------------------------------
# 5. main-thread jobs run on a time budget: typing is not starved
# --------------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def type_keys_and_measure(ed, keys: int, first_line: int) -> list[float]:
    """Sends ``keys`` times `j` (one way, 40 ms apart) and returns each key's
    latency in ms: CursorMoved's time on the main thread (vim.uv.hrtime,
    CLOCK_MONOTONIC) minus the time the key was sent (time.monotonic_ns, the
    same clock), so the tokio side's load does not count."""
    ed.lua("_G.amp_moves = {}")
    sent = []
    for _ in range(keys):
        sent.append(time.monotonic_ns())
        ed.nvim.request("nvim_input", "j", async_=True)  # one way: no round trip
        time.sleep(0.04)
    time.sleep(0.3)
    moves = ed.lua("return _G.amp_moves")
    latencies = []
    for i, t0 in enumerate(sent):
        want = first_line + i + 1  # 1-based line after key i
        at = next((t for t, line in moves if line >= want), None)
        assert at is not None, f"key {i} was never handled ({len(moves)} moves seen)"
        latencies.append((at - t0) / 1e6)
    return latencies


def test_job_flood_does_not_starve_keystrokes(nvim_factory):
    """Two clients keep 64 getDiagnostics each in flight (each a few ms of
    main-thread work); keys typed meanwhile are still handled at once.

    The bound is relative to figures of this run (the machine is shared and
    its load varies): the same keys typed with no flood give the baseline,
    and one request's main-thread cost gives the size of the queue. If the
    bridge ran the queued jobs without yielding, a key would wait behind
    most of the queue (128 requests: hundreds of ms); with jobs run a few ms
    a turn it waits one slice. The test fails when p99 exceeds the baseline
    by more than a quarter of the queue (and at least 40 ms): far from the
    normal figure, crossed only by a real regression. The figure itself is
    kept in scripts/bench (benches/RESULTS.md: p99 target 16 ms)."""
    ed = nvim_factory()
    noisy = ed.env.workspace / "noisy.txt"
    noisy.write_text("".join(f"line {i} with some text\n" for i in range(3000)))
    ed.edit(noisy)
    # 300 diagnostics: a getDiagnostics is a few ms of main-thread work.
    flood_diagnostics_and_log_moves(ed)
    KEYS = 60
    baseline = type_keys_and_measure(ed, KEYS, 1000)
    base_p99 = percentile(baseline, 99)
    ed.nvim.command("1000")
    flooders = [ed.connect() for _ in range(2)]
    # One request's main-thread cost: the queue's size in time.
    t = time.monotonic()
    flooders[0].call("getDiagnostics", {"path": str(noisy)}, timeout=10)
    one = time.monotonic() - t
    stop = threading.Event()
    answered = {"n": 0}

    def flood(c):
        inflight = 0
        while not stop.is_set():
            while inflight < 64:
                c.send_request("getDiagnostics", {"path": str(noisy)})
                inflight += 1
            try:
                msg = c.recv_message(timeout=2)
            except Exception:
                continue
            if "serverResponse" in msg:
                inflight -= 1
                answered["n"] += 1

    threads = [threading.Thread(target=flood, args=(c,), daemon=True) for c in flooders]
    for th in threads:
        th.start()
    try:
        time.sleep(0.5)  # the queue is full
        before = answered["n"]
        latencies = type_keys_and_measure(ed, KEYS, 1000)
        during = answered["n"] - before
    finally:
        stop.set()
        for th in threads:
            th.join(timeout=5)
    p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
    queue_ms = 128 * one * 1000
    bound = base_p99 + max(40.0, queue_ms / 4)
    print(f"\nkeystroke -> CursorMoved on the main thread under a getDiagnostics flood ({one * 1000:.1f} ms per "
          f"request alone, {during} answered while typing): p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
          f"max {max(latencies):.1f} ms; with no flood p99 {base_p99:.1f} ms; bound {bound:.0f} ms")
    assert during > 50, "the flood did not run"
    assert p99 < bound, f"keystrokes waited behind main-thread jobs: p99 {p99:.1f} ms (bound {bound:.0f} ms)"


# --------------------------------------------------------------------------
# 8. the plugin never stops Neovim at a hit-enter prompt
# --------------------------------------------------------------------------


def test_plugin_messages_fit_one_line_no_hit_enter_prompt(nvim_factory, env_factory):
    env = env_factory("a workspace with a rather long name " + "x" * 60)
    ed = nvim_factory(_env=env)
    c = ed.connect()
    opened = env.workspace / "opened.txt"
    opened.write_text("saved\n")
    ed.edit(opened)
    ed.nvim.current.buffer[:] = ["unsaved"]
    ed.nvim.ui_attach(80, 24, rgb=True)  # a UI, so messages can ask for Enter
    try:
        ed.nvim.command("set cmdheight=1")
        for what in ["Amp status", "Amp",
                     "lua require('amp.notify').notify(string.rep('long ', 60) .. '\\nsecond line\\nthird', vim.log.levels.WARN)",
                     "Amp send"]:
            ed.nvim.command(what, async_=True)
            time.sleep(0.15)
            mode = ed.nvim.api.get_mode()
            if mode["mode"] == "r":
                ed.nvim.input("<CR>")
            assert mode["mode"] != "r", f":{what} left Neovim at a hit-enter prompt"
            # A request that needs the main thread is answered at once.
            got = c.call("readFile", {"path": str(opened)}, timeout=2)
            assert got.get("content") == "unsaved\n", got
        assert ed.lua("return require('amp.notify').one_line('a\\nb', 80)") == "a | b"
        cut = ed.lua("return require('amp.notify').one_line(string.rep('é', 300), 40)")
        assert ed.nvim.funcs.strdisplaywidth(cut) <= 40 and cut.endswith("…"), cut
    finally:
        ed.nvim.ui_detach()
