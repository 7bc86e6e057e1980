#!/usr/bin/env python3
"""Benchmarks of amp.nvim-rs in a real headless Neovim with real WebSocket clients.

Prints figures, not pass/fail: each next to its target, in one final table,
which is also written as Markdown to benches/RESULTS.md.

    scripts/bench                      # installs, builds, runs this
    .venv/bin/python benches/bench.py  # run only (needs target/release/libamp_core.so)

Options: --quick (fewer samples), --no-results (do not write RESULTS.md),
--only N[,N...] (run only these benchmark numbers).

Environment: AMP_NVIM overrides the nvim binary (default .venv/bin/nvim).

How things are measured
- Clients used for latency are raw WebSocket clients driven by one epoll
  thread: a frame's arrival time is taken right after the recv() that
  completed it, with no Python WebSocket library in the way. Requests with
  20 MB payloads use the `websockets` sync client.
- "Main thread" CPU is read two ways: from /proc/<pid>/task/<pid>/stat
  (utime+stime, clock ticks, 10 ms granularity) and from
  clock_gettime(CLOCK_THREAD_CPUTIME_ID) called on Neovim's main thread
  through LuaJIT's FFI (ns resolution). The table uses the FFI figure when
  it is available; both are printed in the details.
- matchparen is disabled in every Neovim started here (baseline included):
  it is Neovim's own CursorMoved handler, not the plugin's, and only adds noise.
- 7 (annotations) runs the JS provider benches/providers/many.mjs through the
  plugin's Node host, with a UI attached (UiDrain), and times one refresh inside
  Neovim until the annotations are on screen (see LUA_ANNOTATE), scrolling
  through the file (LUA_SCROLL) and the decoration provider's cost (LUA_ON_WIN).
- 9 (leaks) reads malloc's bytes in use (mallinfo2) and the Lua heap after a
  full Lua GC around long loops of native calls and readFile requests.
- 11 (keys during big edits) types j every 30 ms into one window while an
  agent's 20 MiB editFiles of a file shown in another window arrive back to
  back; latency is CursorMoved's time on the main thread minus the time the
  key was sent (as 10), RSS is sampled from /proc.
- Everything here competes with whatever else runs on the machine: CPU-time
  figures rise under load too (shared cores and caches), so the load average
  at the start and at the end is recorded with the results.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import re
import select
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable

# The integration tests' harness: Neovim, its HOME/XDG tree, lockfiles, clients.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))
import harness  # noqa: E402
import review_latency  # noqa: E402
from harness import (LIBRARY, NVIM, REPO, AmpEnv, flood_diagnostics_and_log_moves, open_client,  # noqa: E402
                     time_limit, upgrade_request)

RESULTS_MD = REPO / "benches" / "RESULTS.md"
CLK_TCK = os.sysconf("SC_CLK_TCK")
MIB = 1024 * 1024


def log(msg: str) -> None:
    print(msg, flush=True)


# --------------------------------------------------------------------------
# time limits
# --------------------------------------------------------------------------


class StepTimeout(Exception):
    pass


# --------------------------------------------------------------------------
# statistics
# --------------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    s = sorted(values)
    if not s:
        return float("nan")
    k = max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))
    return s[k]


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


# --------------------------------------------------------------------------
# Neovim
# --------------------------------------------------------------------------

STARTED: list[subprocess.Popen] = []


def kill_all() -> None:
    for p in STARTED:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # its own session: only this nvim
            except (ProcessLookupError, PermissionError):
                pass
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


class Editor(harness.Editor):
    """A headless Neovim 0.11 with (or without) the plugin, attached over RPC
    (the tests' Editor), in a HOME/XDG tree under `root`; matchparen off."""

    def __init__(self, root: Path, *, plugin: bool, setup_opts: str = "{ auto_start = true }"):
        env = AmpEnv(root, "work")
        super().__init__(env, env.workspace, setup_opts, None, plugin=plugin,
                         extra_cmds=("let g:loaded_matchparen = 1", LUA_ORPHAN_WATCH))
        STARTED.append(self.proc)
        self.root = root
        self.workspace = env.workspace
        self.context_note = ""
        self._lock = self.wait_lockfile()[1] if plugin else None

    @property
    def lock(self) -> dict | None:
        """The lockfile as it was when Neovim started (None without the plugin)."""
        return self._lock

    def ensure_context_attached(self) -> None:
        """The cursor autocmds must come from the plugin; if this build does not
        create them, attach lua/amp/context.lua the way the plugin would, and say so."""
        have = self.lua("""
            local ok, list = pcall(vim.api.nvim_get_autocmds, { group = 'AmpEditorContext', event = 'CursorMoved' })
            return ok and #list > 0
        """)
        if not have:
            self.lua("require('amp.context').attach(assert(require('amp.native').load()))")
            self.context_note = ("the plugin did not create its cursor autocmds; the benchmark attached "
                                 "lua/amp/context.lua itself")

    def main_task_ticks(self) -> int:
        fields = Path(f"/proc/{self.pid}/task/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        # fields[0] is field 3 (state): utime is field 14, stime field 15
        return int(fields[11]) + int(fields[12])

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return -1

    def heap_bytes(self) -> tuple[float, float] | None:
        """(bytes malloc has handed out and not got back, over every arena: mallinfo2
        uordblks + hblkhd; Lua heap bytes), after a full Lua GC. None without mallinfo2."""
        got = self.lua(LUA_HEAP)
        return None if got is None else (float(got[0]), float(got[1]))

    def thread_cpu_ns(self) -> float:
        """CPU time of Neovim's main thread (CLOCK_THREAD_CPUTIME_ID via LuaJIT FFI)."""
        return float(self.lua(LUA_THREAD_CPU + "return amp_bench_thread_cpu_ns()"))

    def status(self) -> dict:
        return self.lua("return require('amp').status()")

    def close(self) -> None:
        self.shutdown()


# Every Neovim started here quits by itself if this script dies without killing it.
LUA_ORPHAN_WATCH = ("lua local p = vim.uv.os_getppid(); local t = vim.uv.new_timer(); "
                    "t:start(1000, 1000, function() if vim.uv.os_getppid() ~= p then t:stop(); "
                    "vim.schedule(function() vim.cmd('qa!') end) end end)")


LUA_HEAP = r"""
collectgarbage('collect')
collectgarbage('collect')
local ok, ffi = pcall(require, 'ffi')
if not ok then return nil end
if not amp_bench_mallinfo2 then
  pcall(ffi.cdef, [[
    struct amp_bench_mallinfo2 { size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost; };
    struct amp_bench_mallinfo2 mallinfo2(void);
  ]])
  local found = pcall(function() return ffi.C.mallinfo2 end)
  if not found then return nil end
  amp_bench_mallinfo2 = ffi.C.mallinfo2
end
local m = amp_bench_mallinfo2()
return { tonumber(m.uordblks) + tonumber(m.hblkhd), collectgarbage('count') * 1024 }
"""


LUA_THREAD_CPU = r"""
if not amp_bench_thread_cpu_ns then
  local ffi = require('ffi')
  pcall(ffi.cdef, [[
    typedef struct { long tv_sec; long tv_nsec; } amp_bench_timespec;
    int clock_gettime(int clk_id, amp_bench_timespec *tp);
  ]])
  local ts = ffi.new('amp_bench_timespec')
  function amp_bench_thread_cpu_ns()
    ffi.C.clock_gettime(3, ts) -- CLOCK_THREAD_CPUTIME_ID
    return tonumber(ts.tv_sec) * 1e9 + tonumber(ts.tv_nsec)
  end
end
"""


# --------------------------------------------------------------------------
# raw WebSocket clients on one epoll thread (latency measurements)
# --------------------------------------------------------------------------


def raw_upgrade(port: int, token: str, rcvbuf: int | None = None, timeout: float = 5) -> tuple[socket.socket, bytes]:
    """Opens a WebSocket by hand; returns the socket and bytes read past the headers."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(timeout)
    s.connect(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(upgrade_request(port, token))
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise RuntimeError("server closed during the handshake")
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    if not head.startswith(b"HTTP/1.1 101"):
        raise RuntimeError(f"upgrade refused: {head[:200]!r}")
    return s, rest


class Poller(threading.Thread):
    """Reads many raw WebSocket connections on one thread; records every frame
    with its arrival time (perf_counter right after the completing recv)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.ep = select.epoll()
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.conns: dict[int, dict] = {}
        self.frames: list[list[tuple[float, int, bytes]]] = []  # per client: (t, opcode, payload)
        self.wake_r, self.wake_w = os.pipe()
        self.ep.register(self.wake_r, select.EPOLLIN)
        self.running = True
        self.start()

    def add(self, port: int, token: str) -> int:
        s, rest = raw_upgrade(port, token)
        s.setblocking(False)
        with self.lock:
            idx = len(self.frames)
            self.frames.append([])
            self.conns[s.fileno()] = {"sock": s, "buf": bytearray(rest), "idx": idx, "closed": False}
            self._parse(self.conns[s.fileno()], time.perf_counter())
        self.ep.register(s.fileno(), select.EPOLLIN)
        return idx

    def count(self, idx: int) -> int:
        with self.lock:
            return len(self.frames[idx])

    def wait_for(self, pred: Callable[[], Any], timeout: float) -> Any:
        with self.cond:
            return self.cond.wait_for(pred, timeout)

    def run(self) -> None:
        while self.running:
            events = self.ep.poll(0.5)
            for fd, ev in events:
                if fd == self.wake_r:
                    return
                conn = self.conns.get(fd)
                if conn is None or conn["closed"]:
                    continue
                try:
                    data = conn["sock"].recv(1 << 20)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                t = time.perf_counter()
                with self.cond:
                    if not data:
                        conn["closed"] = True
                        with contextlib.suppress(Exception):
                            self.ep.unregister(fd)
                    else:
                        conn["buf"] += data
                        self._parse(conn, t)
                    self.cond.notify_all()

    def _parse(self, conn: dict, t: float) -> None:
        buf = conn["buf"]
        while len(buf) >= 2:
            b0, b1 = buf[0], buf[1]
            n = b1 & 0x7F
            off = 2
            if n == 126:
                if len(buf) < 4:
                    return
                n = struct.unpack(">H", buf[2:4])[0]
                off = 4
            elif n == 127:
                if len(buf) < 10:
                    return
                n = struct.unpack(">Q", buf[2:10])[0]
                off = 10
            if b1 & 0x80:  # servers never mask
                off += 4
            if len(buf) < off + n:
                return
            payload = bytes(buf[off:off + n])
            del buf[:off + n]
            opcode = b0 & 0x0F
            if opcode == 0x9:  # ping -> pong (masked with a zero key)
                with contextlib.suppress(OSError):
                    conn["sock"].send(bytes([0x8A, 0x80 | len(payload)]) + b"\0\0\0\0" + payload)
                continue
            self.frames[conn["idx"]].append((t, opcode, payload))

    def stop(self) -> None:
        self.running = False
        with contextlib.suppress(OSError):
            os.write(self.wake_w, b"x")
        self.join(timeout=2)
        for conn in self.conns.values():
            with contextlib.suppress(OSError):
                conn["sock"].close()


try:
    from websockets.speedups import apply_mask  # C implementation shipped with websockets
except ImportError:  # pragma: no cover
    def apply_mask(data: bytes, mask: bytes) -> bytes:
        n = len(data)
        key = (mask * (n // 4 + 1))[:n]
        return (int.from_bytes(data, "little") ^ int.from_bytes(key, "little")).to_bytes(n, "little")


class RawClient:
    """A blocking raw WebSocket client for big requests: the request frame is
    built (and masked) before the clock starts, and the response's arrival is
    the moment its last byte was read, before any JSON parsing."""

    def __init__(self, port: int, token: str):
        self.sock, rest = raw_upgrade(port, token)
        self.sock.settimeout(60)
        self.buf = bytearray(rest)
        self.first = 0.0  # arrival of the first bytes after the last request was sent
        self._t = 0.0  # arrival of the bytes last read

    @staticmethod
    def frame(payload: bytes) -> bytes:
        n = len(payload)
        if n < 126:
            head = bytes([0x81, 0x80 | n])
        elif n < 65536:
            head = bytes([0x81, 0x80 | 126]) + struct.pack(">H", n)
        else:
            head = bytes([0x81, 0x80 | 127]) + struct.pack(">Q", n)
        key = os.urandom(4)
        return head + key + apply_mask(payload, key)

    def request(self, frame: bytes) -> tuple[float, float, bytes]:
        """Sends a prepared frame; returns (t_sent_start, t_response_complete, payload)."""
        t0 = time.perf_counter()
        self.sock.sendall(frame)
        self.first = 0.0
        message: bytearray | None = None  # a text message still arriving in fragments
        while True:
            while True:
                got = self._next()
                if got is None:
                    break
                op, fin, payload, t = got
                if op == 0x1:
                    message = bytearray(payload)
                elif op == 0x0 and message is not None:
                    message += payload
                else:
                    continue
                if fin:
                    whole, message = bytes(message), None
                    if whole.startswith(b'{"serverResponse"'):
                        return t0, t, whole
            chunk = self.sock.recv(1 << 22)
            if not chunk:
                raise RuntimeError("server closed the connection")
            self._t = time.perf_counter()
            if not self.first:
                self.first = self._t
            self.buf += chunk

    def _next(self) -> tuple[int, bool, bytes, float] | None:
        buf = self.buf
        if len(buf) < 2:
            return None
        b0, n, off = buf[0], buf[1] & 0x7F, 2
        if n == 126:
            if len(buf) < 4:
                return None
            n, off = struct.unpack(">H", buf[2:4])[0], 4
        elif n == 127:
            if len(buf) < 10:
                return None
            n, off = struct.unpack(">Q", buf[2:10])[0], 10
        if len(buf) < off + n:
            return None
        payload = bytes(buf[off:off + n])
        del buf[:off + n]
        op = b0 & 0x0F
        if op == 0x9:
            self.sock.sendall(bytes([0x8A, 0x80 | len(payload)]) + b"\0\0\0\0" + payload)
        return op, bool(b0 & 0x80), payload, self._t

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


SELECTION = b'"selectionDidChange"'


def first_selection_after(poller: Poller, idx: int, start: int) -> float | None:
    for t, op, payload in poller.frames[idx][start:]:
        if op == 0x1 and SELECTION in payload:
            return t
    return None


# --------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------


class Results:
    def __init__(self):
        self.rows: list[tuple[str, str, str, str]] = []
        self.notes: list[str] = []

    def add(self, name: str, figure: str, target: str, met: bool | None) -> None:
        mark = "n/a" if met is None else ("yes" if met else "NO")
        self.rows.append((name, figure, target, mark))
        log(f"  -> {name}: {figure}  (target {target}: {mark})")

    def note(self, text: str) -> None:
        self.notes.append(text)
        log(f"  note: {text}")


# --------------------------------------------------------------------------
# the benchmarks
# --------------------------------------------------------------------------


def make_file(path: Path, lines: int) -> None:
    path.write_text("".join(f"line {i:06d} the quick brown fox jumps over the lazy dog é→😀\n" for i in range(lines)),
                    encoding="utf-8")


def bench_rpc_baseline(bare: Editor, res: Results, samples: int) -> float:
    """nvim_input round trip with the plugin not loaded."""
    f = bare.workspace / "keys.txt"
    make_file(f, 100)
    bare.edit(f)
    times = []
    for i in range(samples + 20):
        t0 = time.perf_counter()
        bare.nvim.input("j" if i % 2 == 0 else "k")
        t1 = time.perf_counter()
        if i >= 20:
            times.append(t1 - t0)
        time.sleep(0.002)
    p50, p99 = percentile(times, 50), percentile(times, 99)
    res.add("1b. bare RPC round trip of nvim_input (no plugin; part of 1)",
            f"p50 {ms(p50)}, p99 {ms(p99)} (n={len(times)})", "(reference)", None)
    return p50


def bench_keystroke(ed: Editor, poller: Poller, res: Results, samples: int, rpc_p50: float | None) -> None:
    f = ed.workspace / "keys.txt"
    make_file(f, 100)
    ed.edit(f)
    ed.ensure_context_attached()
    idx = poller.add(ed.lock["port"], ed.lock["authToken"])
    # initial frames (metadata, visible files, selection)
    poller.wait_for(lambda: first_selection_after(poller, idx, 0) is not None, 3)
    time.sleep(0.1)
    keystroke_run(ed, poller, idx, res, samples, rpc_p50, one_way=False)
    keystroke_run(ed, poller, idx, res, samples, rpc_p50, one_way=True)


def keystroke_run(ed: Editor, poller: Poller, idx: int, res: Results, samples: int, rpc_p50: float | None,
                  one_way: bool) -> None:
    lat, rpc, missed = [], [], 0
    for i in range(samples + 10):
        start = poller.count(idx)
        t0 = time.perf_counter()
        # one_way: an RPC notification (no response awaited), so no round trip is included
        key = "j" if i % 2 == 0 else "k"
        if one_way:
            ed.nvim.request("nvim_input", key, async_=True)
        else:
            ed.nvim.input(key)
        t1 = time.perf_counter()
        got = poller.wait_for(lambda: first_selection_after(poller, idx, start), 1.0)
        if i >= 10:
            rpc.append(t1 - t0)
            if got is None:
                missed += 1
            else:
                lat.append(got - t0)
        pause = t0 + 0.030 - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
    label = ("1. keystroke -> selectionDidChange, nvim_input as RPC notification (one way)" if one_way
             else "1. keystroke -> selectionDidChange at the client (pynvim nvim_input request)")
    if not lat:
        res.add(label, "not measured: no selectionDidChange arrived", "p50 <= 1 ms, p99 <= 3 ms", False)
        return
    p50, p99 = percentile(lat, 50), percentile(lat, 99)
    extra = f", {missed} missed" if missed else ""
    res.add(label, f"p50 {ms(p50)}, p99 {ms(p99)} (n={len(lat)}{extra})", "p50 <= 1 ms, p99 <= 3 ms",
            p50 <= 1e-3 and p99 <= 3e-3 and not missed)
    if rpc_p50 is not None and not one_way:
        res.note(f"keystroke latency minus the bare nvim_input round trip p50 ({ms(rpc_p50)}): "
                 f"p50 {ms(max(0.0, p50 - rpc_p50))}, p99 {ms(max(0.0, p99 - rpc_p50))}; "
                 f"nvim_input round trip with the plugin loaded: p50 {ms(percentile(rpc, 50))}")


def bench_job_flood(ed: Editor, poller: Poller, res: Results, samples: int) -> None:
    """Keystroke -> selectionDidChange while two clients keep 64 getDiagnostics
    each in flight, every one a few ms of main-thread work: the bridge runs
    jobs for ~4 ms per main-loop turn, so keys get in between."""
    f = ed.workspace / "flood.txt"
    make_file(f, 3000)
    ed.edit(f)
    ed.ensure_context_attached()
    flood_diagnostics_and_log_moves(ed)
    port, token = ed.lock["port"], ed.lock["authToken"]
    idx = poller.add(port, token)
    poller.wait_for(lambda: first_selection_after(poller, idx, 0) is not None, 3)
    request = RawClient.frame(json.dumps(
        {"clientRequest": {"id": "f", "getDiagnostics": {"path": str(f)}}}).encode())
    one = RawClient(port, token)
    t = time.perf_counter()
    one.sock.sendall(request)
    got = b""
    while b"serverResponse" not in got:
        got += one.sock.recv(1 << 20)
    alone = time.perf_counter() - t
    one.sock.close()
    stop = threading.Event()
    answered = [0]

    def flood() -> None:
        s, _ = raw_upgrade(port, token)
        s.settimeout(0.5)
        s.sendall(request * 64)
        marker = b'{"serverResponse"'
        tail = b""  # shorter than the marker: an answer split across reads is counted once
        while not stop.is_set():
            try:
                data = s.recv(1 << 20)
            except (socket.timeout, BlockingIOError):
                continue
            except OSError:
                return
            if not data:
                return
            data = tail + data
            n = data.count(marker)
            tail = data[-(len(marker) - 1):]
            if n > 0:
                answered[0] += n
                s.sendall(request * n)
        s.close()

    threads = [threading.Thread(target=flood, daemon=True) for _ in range(2)]
    for th in threads:
        th.start()
    lat, missed, sent_ns = [], 0, []
    try:
        time.sleep(0.5)
        before = answered[0]
        t_start = time.perf_counter()
        for i in range(samples):
            start = poller.count(idx)
            t0 = time.perf_counter()
            sent_ns.append(time.monotonic_ns())  # CLOCK_MONOTONIC, as vim.uv.hrtime()
            ed.nvim.request("nvim_input", "j", async_=True)
            got_at = poller.wait_for(lambda: first_selection_after(poller, idx, start), 2.0)
            if got_at is None:
                missed += 1
            else:
                lat.append(got_at - t0)
            pause = t0 + 0.030 - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
        rate = (answered[0] - before) / (time.perf_counter() - t_start)
    finally:
        stop.set()
        for th in threads:
            th.join(timeout=3)
    moves = ed.lua("return _G.amp_moves")
    handled = []
    for i, t0 in enumerate(sent_ns):
        at = next((t for t, line in moves if line >= 1000 + i + 1), None)
        if at is not None:
            handled.append((at - t0) / 1e9)
    label = ("10. keystroke -> CursorMoved on the main thread while 2 clients keep 64 getDiagnostics each "
             "in flight (one-way nvim_input)")
    if not handled:
        res.add(label, "not measured: no CursorMoved recorded", "p99 <= 16 ms (one frame)", False)
        return
    p50, p99 = percentile(handled, 50), percentile(handled, 99)
    res.add(label, f"p50 {ms(p50)}, p99 {ms(p99)} (n={len(handled)}); getDiagnostics {ms(alone)} alone, "
            f"{rate:.0f} answered/s during the run", "p99 <= 16 ms (one frame)", p99 <= 16e-3)
    if lat:
        extra = f", {missed} missed" if missed else ""
        res.add("10. same, keystroke -> selectionDidChange at the client (tokio busy with the flood's answers)",
                f"p50 {ms(percentile(lat, 50))}, p99 {ms(percentile(lat, 99))} (n={len(lat)}{extra})",
                "(reference)", None)


LUA_MOVES = LUA_THREAD_CPU + r"""
local n = ...
local set, exec = vim.api.nvim_win_set_cursor, vim.api.nvim_exec_autocmds
local c0, w0 = amp_bench_thread_cpu_ns(), vim.uv.hrtime()
for i = 1, n do
  set(0, { (i % 2) + 1, 0 })
  exec('CursorMoved', {})
end
return { amp_bench_thread_cpu_ns() - c0, vim.uv.hrtime() - w0 }
"""


# The plugin's hot path alone: the same cursor moves, with what its
# buffer-local CursorMoved callback does outside Visual mode
# (lib.cursor_moved(name), which reads the cursor and its line through the C
# API) called inline instead of through an autocmd (or not at all).
LUA_MOVES_DIRECT = LUA_THREAD_CPU + r"""
local n, call = ...
local api = vim.api
local set = api.nvim_win_set_cursor
local cursor_moved = assert(require('amp.native').load()).cursor_moved
local name = api.nvim_buf_get_name(0)
local c0 = amp_bench_thread_cpu_ns()
if call then
  for i = 1, n do
    set(0, { (i % 2) + 1, 0 })
    cursor_moved(name)
  end
else
  for i = 1, n do
    set(0, { (i % 2) + 1, 0 })
  end
end
return amp_bench_thread_cpu_ns() - c0
"""


def one_move_run(ed: Editor, n: int) -> dict:
    """n cursor moves (each followed by CursorMoved); main-thread CPU and wall per move (µs)."""
    k0 = ed.main_task_ticks()
    cpu_ns, wall_ns = ed.lua(LUA_MOVES, n)
    k1 = ed.main_task_ticks()
    return {"proc": (k1 - k0) / CLK_TCK * 1e6 / n, "ffi": cpu_ns / 1e3 / n, "wall": wall_ns / 1e3 / n}


def interleaved(run_a: Callable[[], dict], run_b: Callable[[], dict], reps: int) -> dict:
    """Runs a and b alternately `reps` times. Returns the medians of a and of b and the
    median of the per-pair differences b - a: a load that changes during the benchmark
    (other processes on shared cores) moves both runs of a pair alike."""
    a_runs, b_runs = [], []
    for _ in range(reps):
        a_runs.append(run_a())
        b_runs.append(run_b())
        time.sleep(0.02)
    out = {}
    for key in a_runs[0]:
        out[key] = {"a": statistics.median(x[key] for x in a_runs), "b": statistics.median(x[key] for x in b_runs),
                    "diff": statistics.median(y[key] - x[key] for x, y in zip(a_runs, b_runs))}
    return out


def with_autocmd(ed: Editor, spec: str, run: Callable[[], dict]) -> Callable[[], dict]:
    """`run` with one extra CursorMoved autocmd (`spec`: the options after the group) in place."""
    def go() -> dict:
        ed.lua("vim.api.nvim_create_autocmd('CursorMoved', { group = vim.api.nvim_create_augroup('AmpBenchEmpty', {}), "
               + spec + " })")
        try:
            return run()
        finally:
            ed.lua("vim.api.nvim_del_augroup_by_name('AmpBenchEmpty')")
    return go


def bench_cpu_per_move(bare: Editor, ed: Editor, poller: Poller, res: Results, n: int, reps: int) -> None:
    # Both editors show the same two-line file.
    for e in (bare, ed):
        f = e.workspace / "moves.txt"
        f.write_text("first line é→😀\nsecond line\n", encoding="utf-8")
        e.edit(f)
    ed.ensure_context_attached()
    for e in (bare, ed):  # warm-up (JIT, allocator)
        one_move_run(e, n // 5)
    bare_run = lambda: one_move_run(bare, n)
    # Reference: what any Lua CursorMoved autocmd costs, with an empty callback.
    empty = interleaved(bare_run, with_autocmd(bare, "callback = function() end", bare_run), reps)
    empty_local = interleaved(bare_run, with_autocmd(bare, "buffer = 0, callback = function() end", bare_run), reps)
    # The keystroke benchmark left one client connected; make it 1 exactly.
    clients = ed.status().get("clients", 0)
    rss_rows = []
    base = None
    for want in (1, 10):
        while clients < want:
            poller.add(ed.lock["port"], ed.lock["authToken"])
            clients += 1
        deadline = time.monotonic() + 5
        while ed.status().get("clients") != want and time.monotonic() < deadline:
            time.sleep(0.05)
        rss0 = ed.rss_kib()
        got = interleaved(bare_run, lambda: one_move_run(ed, n), reps)
        ed.lua("collectgarbage('collect')")
        rss_rows.append((want, (ed.rss_kib() - rss0) * 1024 / (n * reps)))
        base = got
        d_ffi, d_proc = got["ffi"]["diff"], got["proc"]["diff"]
        res.add(f"2. main-thread CPU per cursor move over baseline, {want} client{'s' if want > 1 else ''}",
                f"{d_ffi:.2f} µs (thread clock); {d_proc:.2f} µs (/proc ticks)",
                "<= 3 µs", d_ffi <= 3.0)
        log(f"  plugin, {want} client(s): {got['ffi']['b']:.2f} µs/move (FFI), {got['proc']['b']:.2f} µs (/proc), "
            f"{got['wall']['b']:.2f} µs wall; baseline {got['ffi']['a']:.2f} µs (FFI), {got['wall']['a']:.2f} µs wall")
    # The same baseline-free loop for RSS: no plugin at all.
    rss0 = bare.rss_kib()
    for _ in range(reps):
        bare_run()
    bare.lua("collectgarbage('collect')")
    base_rss = (bare.rss_kib() - rss0) * 1024 / (n * reps)
    moves = n * reps
    res.add(f"2x. RSS growth per cursor move ({moves} moves each, after a Lua GC)",
            ", ".join(f"{b:.0f} B/move with {c} client{'s' if c > 1 else ''}" for c, b in rss_rows)
            + f"; baseline {base_rss:.0f} B/move", "bounded (0 B/move)",
            all(b < 16 for _, b in rss_rows))
    direct = interleaved(lambda: {"ffi": ed.lua(LUA_MOVES_DIRECT, n, False) / 1e3 / n},
                         lambda: {"ffi": ed.lua(LUA_MOVES_DIRECT, n, True) / 1e3 / n}, reps)
    res.note(f"for reference, one empty Lua CursorMoved autocmd adds {empty['ffi']['diff']:.2f} µs/move "
             f"(thread clock) to the same loop ({empty_local['ffi']['diff']:.2f} µs when buffer-local: no "
             f"pattern match); Neovim spends that on any Lua autocmd callback, so the plugin's are buffer-local. "
             f"The plugin's own part: its callback's call, lib.cursor_moved(name) (which reads the cursor and its "
             f"line), made inline, no autocmd, 10 clients: {direct['ffi']['diff']:.2f} µs/move")
    res.note(f"cursor moves: {n} per run; plugin and baseline runs alternate, {reps} pairs, median of the "
             f"per-pair differences; baseline main-thread CPU {base['ffi']['a']:.2f} µs/move (thread clock), "
             f"{base['proc']['a']:.2f} µs/move (/proc, {1e6 / CLK_TCK / n:.2f} µs/move resolution)")


LUA_BIG_BUFFER = r"""
local lines, width = ...
local t = {}
local tail = ' lorem ipsum dolor sit amet, consectetur adipiscing elit é→😀 '
for i = 1, lines do
  local s = string.format('%08d', i) .. tail
  t[i] = s .. string.rep('x', width - #s)
end
vim.api.nvim_buf_set_lines(0, 0, -1, false, t)
return #t
"""


def big_text(lines: int, width: int, variant: int = 0) -> str:
    tail = " lorem ipsum dolor sit amet, consectetur adipiscing elit é→😀 "
    out = []
    for i in range(1, lines + 1):
        s = f"{i:08d}" + tail
        out.append(s + ("x" if variant == 0 else "y") * (width - len(s.encode("utf-8"))))
    return "\n".join(out) + "\n"


def rpc_cpu_overhead(ed: Editor) -> float:
    """Main-thread CPU of one thread_cpu_ns() RPC (subtracted from request figures)."""
    vals = []
    for _ in range(5):
        a = ed.thread_cpu_ns()
        b = ed.thread_cpu_ns()
        vals.append(b - a)
    return statistics.median(vals)


# Where readFile's main-thread time goes: the pieces of H.snapshot
# (src/editor/helpers.lua) timed alone on the same buffer, and what copying the
# text straight out of Neovim's memline costs (the C functions ml_get_buf /
# ml_get_buf_len that the nvim 0.11 binary exports, called through LuaJIT's
# FFI as Rust would call them). CPU of the main thread, median of `reps`; the
# full Lua GC that collects each piece's garbage is timed separately.
LUA_SNAPSHOT_PARTS = LUA_THREAD_CPU + r"""
local reps = ...
local api = vim.api
local cpu = amp_bench_thread_cpu_ns
local buf = api.nvim_get_current_buf()
local out = {}
local function t(key, f)
  local v, g = {}, {}
  for _ = 1, reps do
    collectgarbage('collect')
    local c0 = cpu()
    local keep = f()
    local c1 = cpu()
    keep = nil
    collectgarbage('collect')
    v[#v + 1], g[#g + 1] = (c1 - c0) / 1e6, (cpu() - c1) / 1e6
  end
  table.sort(v); table.sort(g)
  out[key] = { v[math.ceil(#v / 2)], g[math.ceil(#g / 2)] }
end
t('get_lines', function() return api.nvim_buf_get_lines(buf, 0, -1, true) end)
t('get_lines_concat', function() return table.concat(api.nvim_buf_get_lines(buf, 0, -1, true), '\n') end)
local ok, ffi = pcall(require, 'ffi')
if ok and pcall(ffi.cdef, [[
  typedef struct file_buffer amp_bench_buf_T;
  amp_bench_buf_T *buflist_findnr(int nr);
  char *ml_get_buf(amp_bench_buf_T *buf, int32_t lnum);
  int ml_get_buf_len(amp_bench_buf_T *buf, int32_t lnum);
  void *memcpy(void *dst, const void *src, size_t n);
]]) and pcall(function() return ffi.C.ml_get_buf end) then
  local size = api.nvim_buf_get_offset(buf, api.nvim_buf_line_count(buf))
  t('memline_copy', function()
    local b = ffi.C.buflist_findnr(buf)
    local n = api.nvim_buf_line_count(buf)
    local dst = ffi.new('uint8_t[?]', size)
    local off = 0
    for l = 1, n do
      local len = ffi.C.ml_get_buf_len(b, l)
      ffi.C.memcpy(dst + off, ffi.C.ml_get_buf(b, l), len)
      off = off + len
      if l < n then
        dst[off] = 10
        off = off + 1
      end
    end
    return dst
  end)
end
return out
"""


def bench_big_requests(ed: Editor, res: Results, reps: int) -> None:
    width = 79  # bytes per line without the newline: 80 bytes a line
    lines = 20 * MIB // (width + 1)
    overhead = rpc_cpu_overhead(ed)

    # 3. readFile of a 20 MB unsaved buffer
    f = ed.workspace / "unsaved.txt"
    f.write_text("small file on disk\n")
    ed.edit(f)
    ed.lua(LUA_BIG_BUFFER, lines, width)
    assert ed.lua("return vim.bo.modified"), "buffer should be modified"
    size = ed.lua("return vim.fn.line2byte(vim.fn.line('$') + 1) - 1")
    client = RawClient(ed.lock["port"], ed.lock["authToken"])
    try:
        walls, cpus, ticks, firsts = [], [], [], []
        for r in range(reps):
            frame = RawClient.frame(json.dumps({"clientRequest": {"id": f"r{r}", "readFile": {"path": str(f)}}}).encode())
            c0, k0 = ed.thread_cpu_ns(), ed.main_task_ticks()
            t0, t1, raw = client.request(frame)
            firsts.append(client.first - t0 if client.first else float("nan"))
            c1, k1 = ed.thread_cpu_ns(), ed.main_task_ticks()
            body = json.loads(raw)["serverResponse"]
            got = body.get("readFile") or body.get("result") or {}
            if not got.get("success") or len(got.get("content", "").encode()) != size:
                raise RuntimeError(f"readFile failed or returned the wrong size: {str(body)[:300]}")
            walls.append(t1 - t0)
            cpus.append((c1 - c0 - overhead) / 1e9)
            ticks.append((k1 - k0) / CLK_TCK)
            time.sleep(0.05)
        wall, cpu, tick = statistics.median(walls), statistics.median(cpus), statistics.median(ticks)
        res.add(f"3. readFile, {size / MIB:.0f} MiB unsaved buffer: wall at the client",
                f"{ms(wall)} (median of {reps}; min {ms(min(walls))})", "<= 60 ms", wall <= 0.060)
        res.add("3. readFile, same: main-thread CPU",
                f"{ms(cpu)} (thread clock); {ms(tick)} (/proc ticks)", "<= 25 ms", cpu <= 0.025)
        res.note(f"readFile: the first byte of the response reached the client after {ms(statistics.median(firsts))} "
                 f"(median), the last after {ms(wall)}")
        parts = ed.lua(LUA_SNAPSHOT_PARTS, 3)
        gl, glc = parts["get_lines"], parts["get_lines_concat"]
        text = (f"readFile main thread, alternatives timed alone on the same buffer (CPU, median of 3; then the full "
                f"Lua GC of their garbage): through Lua (vim.api.nvim_buf_get_lines, a Lua string per line) "
                f"{gl[0]:.1f} ms (+{gl[1]:.1f} ms GC), with table.concat {glc[0]:.1f} ms (+{glc[1]:.1f} ms GC)")
        if "memline_copy" in parts:
            mc = parts["memline_copy"]
            text += (f"; copying the lines straight from the memline (ml_get_buf/ml_get_buf_len + memcpy via FFI, "
                     f"no Lua strings) {mc[0]:.1f} ms (+{mc[1]:.1f} ms GC)")
        res.note(text)

        # 4. editFile with 20 MB fullContent, file on disk and loaded in a buffer
        g = ed.workspace / "edited.txt"
        text0 = big_text(lines, width)
        g.write_text(text0, encoding="utf-8")
        ed.edit(g)
        base_lines = text0.split("\n")
        for label, whole in (("a few lines changed", False), ("every line changed", True)):
            walls, cpus, ticks = [], [], []
            for r in range(reps):
                if whole:
                    new = big_text(lines, width, variant=1 if r % 2 == 0 else 0)
                else:
                    mod = list(base_lines)
                    for k in range(5):
                        j = (k * lines // 5 + 7 * r + 1) % lines
                        mod[j] = mod[j][:20] + f" edited {r}-{k} " + mod[j][35:]
                    new = "\n".join(mod)
                frame = RawClient.frame(json.dumps(
                    {"clientRequest": {"id": f"e{label[0]}{r}", "editFile": {"path": str(g), "fullContent": new}}},
                    ensure_ascii=False).encode("utf-8"))
                c0, k0 = ed.thread_cpu_ns(), ed.main_task_ticks()
                t0, t1, raw = client.request(frame)
                c1, k1 = ed.thread_cpu_ns(), ed.main_task_ticks()
                body = json.loads(raw)["serverResponse"]
                got = body.get("editFile") or body.get("result") or {}
                if not got.get("success"):
                    raise RuntimeError(f"editFile failed: {str(body)[:300]}")
                walls.append(t1 - t0)
                cpus.append((c1 - c0 - overhead) / 1e9)
                ticks.append((k1 - k0) / CLK_TCK)
                time.sleep(0.1)
            if g.read_text(encoding="utf-8") != new:
                raise RuntimeError("editFile: the file on disk does not hold the new content")
            wall, cpu, tick = statistics.median(walls), statistics.median(cpus), statistics.median(ticks)
            res.add(f"4. editFile, {len(new.encode()) / MIB:.0f} MiB fullContent ({label}): wall",
                    f"{ms(wall)} (median of {reps})", "(no target)", None)
            res.add(f"4. editFile, same ({label}): main-thread CPU",
                    f"{ms(cpu)} (thread clock); {ms(tick)} (/proc ticks)", "(no target)", None)

        # 4b. the same few-lines edit where the bytes on disk need care: a CRLF
        # file with a BOM (renamed into place), and a file with a second hard
        # link (written in place by :write, through a backup)
        for label, bom, eol, link in (("CRLF + BOM", b"\xef\xbb\xbf", "\r\n", False),
                                      ("hard link, in place", b"", "\n", True)):
            h = ed.workspace / ("crlf.txt" if not link else "linked.txt")
            h.write_bytes(bom + text0.replace("\n", eol).encode("utf-8"))
            if link:
                os.link(h, h.with_name("linked-2.txt"))
            ed.edit(h)
            walls, cpus = [], []
            for r in range(reps):
                mod = list(base_lines)
                for k in range(5):
                    j = (k * lines // 5 + 7 * r + 3) % lines
                    mod[j] = mod[j][:20] + f" edited {r}-{k} " + mod[j][35:]
                new = eol.join(mod)
                frame = RawClient.frame(json.dumps(
                    {"clientRequest": {"id": f"x{label[0]}{r}", "editFile": {"path": str(h), "fullContent": new}}},
                    ensure_ascii=False).encode("utf-8"))
                c0 = ed.thread_cpu_ns()
                t0, t1, raw = client.request(frame)
                c1 = ed.thread_cpu_ns()
                got = json.loads(raw)["serverResponse"].get("editFile") or {}
                if not got.get("success"):
                    raise RuntimeError(f"editFile ({label}) failed: {str(got)[:300]}")
                walls.append(t1 - t0)
                cpus.append((c1 - c0 - overhead) / 1e9)
                time.sleep(0.1)
            if h.read_bytes() != bom + new.encode("utf-8"):
                raise RuntimeError(f"editFile ({label}): the file on disk does not hold the new bytes")
            res.add(f"4b. editFile, 20 MiB, a few lines changed ({label}): wall / main-thread CPU",
                    f"{ms(statistics.median(walls))} / {ms(statistics.median(cpus))} (median of {reps})",
                    "(no target)", None)
    finally:
        client.close()


LUA_LOG_MOVES = r"""
_G.amp_moves = {}
vim.api.nvim_create_autocmd("CursorMoved", { callback = function()
  local t = _G.amp_moves
  t[#t + 1] = { vim.uv.hrtime(), vim.api.nvim_win_get_cursor(0)[1] }
end })
"""


def bench_keys_during_big_edits(res: Results, tmp: Path, keys: int) -> None:
    """Keystroke -> CursorMoved on the main thread while an agent's 20 MiB
    editFiles arrive one after another, for a file shown in a window of its
    own (every line changed, then a few lines changed). The keys (j, one
    way, every 30 ms) go to another window; the time is CursorMoved's
    vim.uv.hrtime() minus the time the key was sent (time.monotonic_ns, the
    same clock), so the tokio side's load does not count. Neovim's RSS is
    sampled from /proc meanwhile."""
    ed = Editor(tmp / "edits", plugin=True)
    try:
        width = 79
        lines = 20 * MIB // (width + 1)
        big = ed.workspace / "big.txt"
        big.write_text(big_text(lines, width), encoding="utf-8")
        keys_file = ed.workspace / "keys.txt"
        make_file(keys_file, 3000)
        ed.edit(big)
        ed.nvim.command("split " + ed.nvim.funcs.fnameescape(str(keys_file)))
        ed.lua("vim.api.nvim_win_set_cursor(0, { 1000, 0 })")
        ed.lua(LUA_LOG_MOVES)
        base_lines = big_text(lines, width).split("\n")
        rss0 = ed.rss_kib()
        for label, whole in (("every line changed", True), ("a few lines changed", False)):
            ed.lua("vim.api.nvim_win_set_cursor(0, { 1000, 0 }); _G.amp_moves = {}")
            stop = threading.Event()
            done = {"edits": 0, "failed": "", "peak": ed.rss_kib()}

            def agent() -> None:
                client = open_client(ed.lock["port"], ed.lock["authToken"], compression=None, timeout=10)
                try:
                    r = 0
                    while not stop.is_set():
                        r += 1
                        if whole:
                            new = big_text(lines, width, variant=r % 2)
                        else:
                            mod = list(base_lines)
                            for k in range(5):
                                j = (k * lines // 5 + 7 * r + 1) % lines
                                mod[j] = mod[j][:20] + f" edited {r}-{k} " + mod[j][35:]
                            new = "\n".join(mod)
                        got = client.call("editFile", {"path": str(big), "fullContent": new}, timeout=60)
                        if not got.get("success"):
                            done["failed"] = str(got)[:200]
                            return
                        done["edits"] += 1
                finally:
                    client.close()

            def sample_rss() -> None:
                while not stop.is_set():
                    done["peak"] = max(done["peak"], ed.rss_kib())
                    time.sleep(0.01)

            threads = [threading.Thread(target=agent, daemon=True), threading.Thread(target=sample_rss, daemon=True)]
            for th in threads:
                th.start()
            sent = []
            try:
                time.sleep(0.3)  # the first edit is on its way
                for i in range(keys):
                    sent.append(time.monotonic_ns())
                    ed.nvim.request("nvim_input", "j", async_=True)
                    time.sleep(0.03)
                time.sleep(0.3)
            finally:
                stop.set()
                for th in threads:
                    th.join(timeout=90)
            moves = ed.lua("return _G.amp_moves")
            handled, missed = [], 0
            for i, t0 in enumerate(sent):
                at = next((t for t, line in moves if line >= 1000 + i + 1), None)
                if at is None:
                    missed += 1
                else:
                    handled.append((at - t0) / 1e9)
            name = f"12. keystroke -> CursorMoved while 20 MiB editFiles arrive ({label}, file shown)"
            if not handled or done["failed"]:
                res.add(name, f"not measured: {done['failed'] or 'no CursorMoved recorded'}", "p99 <= 16 ms", False)
                continue
            p50, p99 = percentile(handled, 50), percentile(handled, 99)
            extra = f", {missed} missed" if missed else ""
            res.add(name, f"p50 {ms(p50)}, p99 {ms(p99)}, max {ms(max(handled))} (n={len(handled)}{extra}); "
                    f"{done['edits']} edits applied meanwhile; RSS peak +{(done['peak'] - rss0) / 1024:.0f} MiB",
                    "p99 <= 16 ms (one frame)", p99 <= 16e-3 and not missed)
        res.note("11: Neovim's RSS while the edits arrive includes its undo history: each edit that changes "
                 "every line keeps the 20 MiB it replaced (as for the user's own edits, up to 'undolevels')")
    finally:
        ed.close()


def bench_broadcast(ed: Editor, poller: Poller, res: Results, n_clients: int, samples: int) -> None:
    f = ed.workspace / "keys.txt"
    if not f.exists():
        make_file(f, 100)
    ed.edit(f)
    ed.ensure_context_attached()
    have = ed.status().get("clients", 0)
    idxs = list(range(len(poller.frames)))  # every client already connected reads too
    for _ in range(n_clients - have):
        idxs.append(poller.add(ed.lock["port"], ed.lock["authToken"]))
    deadline = time.monotonic() + 10
    while ed.status().get("clients") != n_clients and time.monotonic() < deadline:
        time.sleep(0.05)
    count = ed.status().get("clients")
    if count != n_clients:
        raise RuntimeError(f"{count} clients connected instead of {n_clients}")
    time.sleep(0.3)
    lasts, firsts, missed = [], [], 0
    for i in range(samples + 5):
        starts = {k: poller.count(k) for k in idxs}
        t0 = time.perf_counter()
        ed.nvim.input("j" if i % 2 == 0 else "k")

        def all_arrived():
            ts = [first_selection_after(poller, k, starts[k]) for k in idxs]
            return ts if all(t is not None for t in ts) else None

        ts = poller.wait_for(all_arrived, 2.0)
        if i >= 5:
            if ts is None:
                missed += 1
            else:
                lasts.append(max(ts) - t0)
                firsts.append(min(ts) - t0)
        pause = t0 + 0.050 - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
    if not lasts:
        res.add(f"5. broadcast to {n_clients} clients", "not measured: no complete round arrived", "(no target)", None)
        return
    extra = f", {missed} incomplete" if missed else ""
    res.add(f"5. keystroke -> last of {n_clients} clients has selectionDidChange",
            f"p50 {ms(percentile(lasts, 50))}, p99 {ms(percentile(lasts, 99))} (n={len(lasts)}{extra}); "
            f"first client p50 {ms(percentile(firsts, 50))}", "(no target)", None)


def bench_startup(res: Results, runs: int, tmp: Path) -> None:
    own, setup_wall = [], []
    detail = {}
    for r in range(runs):
        root = tmp / f"startup{r}"
        env = AmpEnv(root).environ
        st = root / "startuptime.log"
        out = root / "setup_us"
        setup = (f"lua local t = vim.uv.hrtime(); require('amp').setup({{ auto_start = true }}); "
                 f"vim.fn.writefile({{ tostring((vim.uv.hrtime() - t) / 1e3) }}, '{out}')")
        p = subprocess.Popen([NVIM, "--headless", "--clean", "--startuptime", str(st), "--cmd", f"set rtp^={REPO}",
                              "-c", setup, "-c", "qa!"], cwd=str(root), env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        STARTED.append(p)
        p.wait(timeout=15)
        total = 0.0
        for line in st.read_text(errors="replace").splitlines():
            m = re.match(r"^\s*[\d.]+\s+[\d.]+\s+([\d.]+):\s+(.*)$", line)
            if not m:
                continue
            self_ms, what = float(m.group(1)), m.group(2)
            own_file = any(what.startswith(f"sourcing {REPO}/{d}/") for d in ("plugin", "lua", "after", "ftplugin"))
            if own_file or re.match(r"require\('amp[.')]", what):
                total += self_ms
                key = what.replace(str(REPO) + "/", "")
                detail.setdefault(key, []).append(self_ms)
        own.append(total)
        setup_wall.append(float(out.read_text().strip()) / 1e3)
    t = statistics.median(own)
    res.add("6. plugin load at startup (own --startuptime entries)", f"{t:.3f} ms (median of {runs})",
            "<= 2 ms", t <= 2.0)
    res.add("6. setup() wall on the start-up path (the library and the server come after VimEnter)",
            f"{statistics.median(setup_wall):.3f} ms (median of {runs})", "(reference)", None)
    res.note("startup entries (median self ms): " +
             ", ".join(f"{k} {statistics.median(v):.3f}" for k, v in detail.items()))
    # The main thread's own CPU time until the library and the server are
    # up, the way benches/startuptime.py measures it (see there).
    import startuptime
    cache = tmp / "startup-loader-cache"
    cache.mkdir(exist_ok=True)
    base = [startuptime.one(startuptime.CONFIGS["on rtp, no setup()"], str(REPO), str(cache)) for _ in range(runs)]
    full = [startuptime.one(startuptime.CONFIGS["defaults"], str(REPO), str(cache)) for _ in range(runs)]
    after = (statistics.median(r["idle"] - r["vimenter"] for r in full)
             - statistics.median(r["idle"] - r["vimenter"] for r in base))
    before = statistics.median(r["plugin_file"] + r["setup"] for r in full)
    total = before + after
    res.add("6. main-thread CPU until the library and the server are up (plugin/amp.lua + setup() + after VimEnter)",
            f"{total:.2f} ms ({before:.2f} + {after:.2f}; median of {runs})", "<= 1 ms", total <= 1.0)


PROVIDER_MANY = REPO / "benches" / "providers" / "many.mjs"

# One annotation refresh of the current buffer, timed on Neovim's main thread.
#   mode "cached":  require('amp.openctx').refresh(buf) - the provider's answer
#                   for this content is in the native client's cache;
#   mode "refresh": :Amp annotations refresh - forgets metas and cached results,
#                   so the provider (Node) is called again.
# Benchmark 7 runs with a UI attached (UiDrain), so the figures include drawing
# the screen and sending it to a UI, as a user's Neovim does.
UI_COLUMNS, UI_LINES = 200, 50


class UiDrain:
    """A UI attached to a Neovim over a socket of its own (as the TUI, a separate
    process, is), UI_COLUMNS x UI_LINES: Neovim draws its screen at that size and
    sends every redraw; a thread reads and drops them."""

    def __init__(self, sock_path: str, columns: int = UI_COLUMNS, lines: int = UI_LINES):
        import msgpack  # pynvim's dependency
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(sock_path)
        self.sock.sendall(msgpack.packb([0, 1, "nvim_ui_attach", [columns, lines, {"rgb": True, "ext_linegrid": True}]]))
        self.thread = threading.Thread(target=self._drain, name="ui-drain", daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        with contextlib.suppress(OSError):
            while self.sock.recv(1 << 16):
                pass

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join(timeout=5)


# One refresh of the annotations of the current buffer, shown in the current
# window from its first line. The namespace is cleared and the screen redrawn
# first (untimed).
# Returns CPU of the main thread (ms):
#   request: the synchronous part (the command / refresh() call: reads the
#            buffer's text, hands it to the native client);
#   render:  from the render job's first editor call until the annotations are
#            on screen: the render job, then the redraw that draws the window
#            (forced with nvim__redraw({flush = true}), as Neovim redraws when it
#            has processed the job; it is the redraw that sets the extmarks of the
#            lines in view). The start is taken by wrapping
#            vim.api.nvim_buf_get_changedtick (annotations::render's first editor
#            call; render reaches vim.api through the table at call time); the end
#            right after that redraw, done in vim.wait's condition, which Neovim
#            checks right after each event it processes, so the idle wait before
#            the answer arrives is not counted. If the wrapper was not reached,
#            render is nil and only `total` counts.
#   total:   everything between the call and the end, idle waiting included.
# and wall ms from the call to the annotations on screen.
LUA_ANNOTATE = LUA_THREAD_CPU + r"""
local mode, timeout_ms = ...
local api = vim.api
local cpu, hrtime = amp_bench_thread_cpu_ns, vim.uv.hrtime
local ns = api.nvim_create_namespace('amp_openctx')
local buf, win = api.nvim_get_current_buf(), api.nvim_get_current_win()
api.nvim_win_set_cursor(win, { 1, 0 })
api.nvim_buf_clear_namespace(buf, ns, 0, -1)
api.nvim__redraw({ flush = true })
collectgarbage('collect') -- each run pays for its own garbage only
local function marks_in_view()
  local top, bottom = vim.fn.line('w0', win) - 1, vim.fn.line('w$', win) - 1
  return #api.nvim_buf_get_extmarks(buf, ns, { top, 0 }, { bottom, -1 }, {})
end
local real = api.nvim_buf_get_changedtick
local c_mark, c_done, w_done = nil, nil, nil
local function done()
  if not c_mark then
    return false -- no answer yet
  end
  api.nvim__redraw({ flush = true })
  local c, w = cpu(), hrtime()
  if marks_in_view() > 0 then
    c_done, w_done = c, w
    return true
  end
  return false
end
local c0, w0 = cpu(), hrtime()
if mode == 'cached' then
  require('amp.openctx').refresh(buf)
else
  vim.cmd('Amp annotations refresh')
end
local c1 = cpu()
api.nvim_buf_get_changedtick = function(b)
  c_mark = c_mark or cpu()
  return real(b)
end
local ok, waited = pcall(vim.wait, timeout_ms, done, 50)
api.nvim_buf_get_changedtick = real
if not (ok and waited) then
  return { ok = false }
end
-- What the screen shows on the window's first line (the buffer's first line
-- has three annotations).
local row = vim.fn.screenpos(win, vim.fn.line('w0', win), 1).row
local cells = {}
for col = 1, vim.o.columns do
  cells[col] = vim.fn.screenstring(row, col)
end
local listed = vim.b[buf].amp_openctx_annotations
return {
  ok = true,
  request = (c1 - c0) / 1e6,
  render = c_mark and (c_done - c_mark) / 1e6 or nil,
  total = (c_done - c0) / 1e6,
  wall = (w_done - w0) / 1e6,
  extmarks = #api.nvim_buf_get_extmarks(buf, ns, 0, -1, {}),
  in_view = marks_in_view(),
  on_screen = table.concat(cells):find('benchmark annotation', 1, true) ~= nil,
  listed = type(listed) == 'string' and #listed or nil,
}
"""


# Scrolls the current window through the whole buffer, page by page (CTRL-F),
# with the redraw after each page forced and timed: main-thread CPU (ms) in
# total and per page, and the extmarks there are at the end.
LUA_SCROLL = LUA_THREAD_CPU + r"""
local api = vim.api
local cpu = amp_bench_thread_cpu_ns
local ns = api.nvim_create_namespace('amp_openctx')
local win, count = api.nvim_get_current_win(), api.nvim_buf_line_count(0)
api.nvim_win_set_cursor(win, { 1, 0 })
api.nvim__redraw({ flush = true })
collectgarbage('collect')
local per_page = {}
local c0 = cpu()
while vim.fn.line('w$', win) < count do
  local c = cpu()
  vim.cmd('normal! \6')
  api.nvim__redraw({ flush = true })
  per_page[#per_page + 1] = (cpu() - c) / 1e6
end
local total = (cpu() - c0) / 1e6
table.sort(per_page)
return {
  pages = #per_page,
  total = total,
  median = per_page[math.ceil(#per_page / 2)],
  max = per_page[#per_page],
  extmarks = #api.nvim_buf_get_extmarks(0, ns, 0, -1, {}),
}
"""


# The decoration provider's cost in a window whose buffer has no annotations
# (a 50-line scratch buffer made current): the native on_win called directly
# n times (µs per call), and full redraws of the window (nvim__redraw, valid =
# false) with the provider set, with a Lua on_win that returns false at once
# instead (what Neovim's call of a provider costs) and with none, interleaved
# `reps` times (µs per redraw). nil when the library has no openctx_on_win.
LUA_ON_WIN = LUA_THREAD_CPU + r"""
local n, reps = ...
local api = vim.api
local cpu = amp_bench_thread_cpu_ns
local on_win = require('amp.native').load().openctx_on_win
if type(on_win) ~= 'function' then
  return nil
end
local ns = api.nvim_create_namespace('amp_openctx')
local annotated = api.nvim_get_current_buf()
vim.cmd('enew')
local plain, win = api.nvim_get_current_buf(), api.nvim_get_current_win()
local lines = {}
for i = 1, 50 do
  lines[i] = ('plain line %d without annotations'):format(i)
end
api.nvim_buf_set_lines(plain, 0, -1, false, lines)
local function calls(buf)
  local c = cpu()
  for _ = 1, n do
    on_win('win', win, buf, 0, 49)
  end
  return (cpu() - c) / n / 1e3
end
local function redraws(count)
  local c = cpu()
  for _ = 1, count do
    api.nvim__redraw({ win = win, valid = false, flush = true })
  end
  return (cpu() - c) / count / 1e3
end
calls(plain)
local function lua_noop()
  return false
end
local out = { call_plain = calls(plain), call_drawn = calls(annotated), with = {}, noop = {}, without = {} }
for _ = 1, reps do
  api.nvim_set_decoration_provider(ns, { on_win = on_win })
  out.with[#out.with + 1] = redraws(math.floor(n / 10))
  api.nvim_set_decoration_provider(ns, { on_win = lua_noop })
  out.noop[#out.noop + 1] = redraws(math.floor(n / 10))
  api.nvim_set_decoration_provider(ns, {})
  out.without[#out.without + 1] = redraws(math.floor(n / 10))
end
api.nvim_set_decoration_provider(ns, { on_win = on_win })
vim.cmd('buffer ' .. annotated .. ' | bwipeout! ' .. plain)
return out
"""


def bench_annotations(res: Results, tmp: Path, reps: int) -> None:
    label = "7. 5,000 annotations rendered on one buffer"
    if shutil.which("node") is None:
        res.add(label, "not measured: node (OpenCtx JS providers) is not installed", "<= 10 ms", None)
        return
    uri = PROVIDER_MANY.as_uri()
    ed = Editor(tmp / "annotations", plugin=True,
                setup_opts=f"{{ auto_start = true, openctx = {{ providers = {{ ['{uri}'] = true }} }} }}")
    ui = UiDrain(ed.sock)
    try:
        f = ed.workspace / "annotated.txt"
        f.write_text("".join(f"{i:05d} let value_{i} = compute(value_{i - 1}) + {i % 97}; // é→\n" for i in range(5000)),
                     encoding="utf-8")
        t0 = time.perf_counter()
        ed.edit(f)  # BufReadPost asks the provider (starts the Node host)
        count_marks = "return #vim.api.nvim_buf_get_extmarks(0, vim.api.nvim_create_namespace('amp_openctx'), 0, -1, {})"
        first = None
        while time.perf_counter() - t0 < 20:
            if ed.lua(count_marks):
                first = time.perf_counter() - t0
                break
            time.sleep(0.02)
        if first is None:
            res.add(label, "not measured: no annotation was drawn within 20 s of opening the file", "<= 10 ms", False)
            return
        lines = ed.lua("return vim.api.nvim_buf_line_count(0)")
        size = ed.lua("return vim.api.nvim_buf_get_offset(0, vim.api.nvim_buf_line_count(0))")
        screen = ed.lua("return { vim.o.columns, vim.o.lines, vim.api.nvim_win_get_height(0) }")
        ed.lua(LUA_ANNOTATE, "cached", 10000)  # warm-up
        ed.lua("collectgarbage('collect')")
        rss0 = ed.rss_kib()
        runs: dict[str, list[dict]] = {"cached": [], "refresh": []}
        scrolls: dict[str, list[dict]] = {"first": [], "again": []}
        for r in range(reps):
            for mode in ("cached", "refresh"):
                got = ed.lua(LUA_ANNOTATE, mode, 10000)
                if not got.get("ok"):
                    raise RuntimeError(f"{mode}: the annotations were not drawn again within 10 s")
                if not got.get("on_screen"):
                    raise RuntimeError(f"{mode}: the annotations are not on the screen: {got}")
                runs[mode].append(got)
                log(f"  {mode}: " + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in got.items()))
                time.sleep(0.05)
            # After a fresh answer: scrolling draws the lines as they come into
            # view; the second time through they are all drawn.
            for when in ("first", "again"):
                got = ed.lua(LUA_SCROLL)
                scrolls[when].append(got)
                log(f"  scroll, {when}: " + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                                      for k, v in got.items()))
        ed.lua("collectgarbage('collect')")
        rss_growth = (ed.rss_kib() - rss0) / 1024
        med = lambda mode, key: statistics.median(x[key] for x in runs[mode])
        marks = runs["cached"][-1]["extmarks"]
        in_view = runs["cached"][-1]["in_view"]
        listed = runs["cached"][-1].get("listed")
        have_render = all(x.get("render") is not None for x in runs["cached"] + runs["refresh"])
        if have_render:
            render = med("cached", "render")
            res.add(f"{label}: main-thread CPU from the answer to the annotations on screen (answer cached)",
                    f"{render:.2f} ms (median of {reps}; provider called again: {med('refresh', 'render'):.2f} ms)",
                    "<= 10 ms", render <= 10.0)
        req_c, req_r = med("cached", "request"), med("refresh", "request")
        res.add("7. same, main thread per refresh: request side + render",
                (f"{req_c + med('cached', 'render'):.2f} ms cached ({req_c:.2f} ms request side); "
                 f"{req_r + med('refresh', 'render'):.2f} ms with :Amp annotations refresh ({req_r:.2f} ms request side)")
                if have_render else f"total incl. idle waiting {med('cached', 'total'):.2f} ms cached, "
                                    f"{med('refresh', 'total'):.2f} ms refreshed",
                "(reference)" if have_render else "<= 10 ms", None if have_render else med("cached", "total") <= 10)
        res.add("7. same, wall: refresh -> annotations on screen",
                f"{med('cached', 'wall'):.1f} ms cached, {med('refresh', 'wall'):.1f} ms provider called again "
                f"(median of {reps}); first drawing after opening the file {first * 1e3:.0f} ms (Node host start)",
                "(reference)", None)
        smed = lambda when, key: statistics.median(x[key] for x in scrolls[when])
        pages = scrolls["first"][-1]["pages"]
        res.add("7. same, scrolling through the whole file page by page (CTRL-F + redraw), main-thread CPU",
                f"after a new answer {smed('first', 'total'):.1f} ms for {pages} pages "
                f"({smed('first', 'median'):.3f} ms per page, median; max {smed('first', 'max'):.3f}); "
                f"through again, all drawn: {smed('again', 'total'):.1f} ms "
                f"({smed('again', 'median'):.3f} ms per page) (medians of {reps})",
                "(reference)", None)
        on_win = ed.lua(LUA_ON_WIN, 20000, 5)
        if on_win is not None:
            redraw = {k: statistics.median(on_win[k]) for k in ("with", "noop", "without")}
            res.add("7. decoration provider per redraw of a window without annotations",
                    f"on_win {on_win['call_plain']:.2f} µs per call (a buffer with annotations, all drawn: "
                    f"{on_win['call_drawn']:.2f} µs); full redraw of a 50-line window {redraw['with']:.1f} µs with "
                    f"the provider, {redraw['noop']:.1f} µs with a Lua on_win returning false, {redraw['without']:.1f} "
                    f"µs with none (medians of 5 interleaved runs)",
                    "(reference)", None)
        res.note(f"annotations: provider benches/providers/many.mjs (a JS module run by the plugin's Node host) returns "
                 f"5,000 annotations for a {lines}-line, {size / 1024:.0f} KiB buffer (4,853 annotated lines, 2-3 "
                 f"titles on a few); a UI of {screen[0]}x{screen[1]} is attached (its output read and dropped), the "
                 f"window shows {screen[2]} lines; {in_view} extmarks in view after a refresh, {marks} in the buffer"
                 + (f"; b:amp_openctx_annotations is {listed / 1024:.0f} KiB of JSON" if listed is not None else "")
                 + f"; RSS after {2 * reps} refreshes and a Lua GC: {rss_growth:+.1f} MiB")
        res.note("annotations: 'render' = main-thread CPU from the render job's first editor call (a wrapper on "
                 "vim.api.nvim_buf_get_changedtick) until the annotations are on screen: the job, then the redraw "
                 "Neovim does after it (forced with nvim__redraw({flush = true}) in vim.wait's condition, checked "
                 "right after each processed event), which draws the lines in view and sends the screen to the UI; "
                 "'request side' = the synchronous refresh()/:Amp annotations refresh call. Idle waiting for the "
                 "provider is not counted")
    finally:
        ui.close()
        ed.close()


LUA_FLOOD = r"""
local n, message = ...
local broadcast = require('amp.native').call
local reached = 0
for i = 1, n do
  local r = broadcast('broadcast', 'userSentMessage', { message = message })
  reached = reached + (r or 0)
end
return reached
"""


def bench_slow_client(ed: Editor, res: Results, total: int) -> None:
    port, token = ed.lock["port"], ed.lock["authToken"]
    message = "x" * 200
    chunks = 20
    ed.lua(LUA_FLOOD, 500, message)  # warm up
    slow, _ = raw_upgrade(port, token, rcvbuf=4096)  # never read from again
    deadline = time.monotonic() + 5
    while ed.status().get("clients") != 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)
    rss0 = ed.rss_kib()
    peak = rss0
    reached = 0
    t0 = time.perf_counter()
    for _ in range(chunks):
        reached += ed.lua(LUA_FLOOD, total // chunks, message)
        peak = max(peak, ed.rss_kib())
    produce = time.perf_counter() - t0
    disconnected_after = None
    t1 = time.perf_counter()
    while time.perf_counter() - t1 < 20:
        peak = max(peak, ed.rss_kib())
        if ed.status().get("clients") == 0:
            disconnected_after = time.perf_counter() - t0
            break
        time.sleep(0.1)
    rss1 = ed.rss_kib()
    growth_peak = (peak - rss0) / 1024
    growth_end = (rss1 - rss0) / 1024
    res.add(f"8. RSS growth, {total} notifications to a client that never reads",
            f"peak +{growth_peak:.1f} MiB, end +{growth_end:.1f} MiB", "<= 16 MB", growth_peak * MIB <= 16e6)
    # still responsive?
    t = time.perf_counter()
    ed.nvim.eval("1 + 1")
    rpc = time.perf_counter() - t
    t = time.perf_counter()
    with contextlib.closing(open_client(port, token, compression=None)) as alive:
        alive.ping("alive", timeout=5)
    ping = time.perf_counter() - t
    verdict = (f"disconnected {disconnected_after:.1f} s after the flood began" if disconnected_after is not None
               else "still connected 20 s after the flood")
    res.add("8. slow client: disconnected? Neovim responsive?",
            f"{verdict}; RPC {ms(rpc)}, new client connect+ping {ms(ping)}; "
            f"{reached} deliveries queued, flood took {produce:.2f} s", "disconnected, responsive",
            disconnected_after is not None and rpc < 0.5)
    slow.close()
    time.sleep(0.3)
    # Control: the same notifications with no client connected at all.
    ed.lua("collectgarbage('collect')")
    c0 = ed.rss_kib()
    for _ in range(chunks):
        ed.lua(LUA_FLOOD, total // chunks, message)
    ed.lua("collectgarbage('collect')")
    control = (ed.rss_kib() - c0) / 1024
    res.add(f"8. control: RSS growth, the same {total} notifications, no client connected",
            f"+{control:.1f} MiB ({control * MIB / total:.0f} B per notification)", "(reference)", None)
    res.note(f"slow client: RSS grew {growth_peak:.1f} MiB with the slow client and {control:.1f} MiB "
             f"for the same loop with no client at all, so the slow client's own share is "
             f"{growth_peak - control:+.1f} MiB" +
             ("; the rest grows with every native call (see 9)" if control * MIB / total >= 16 else ""))


# Native calls checked for leaks: name -> the Lua expression called in the loop.
LEAK_CALLS = {
    "selection_changed()": "lib.selection_changed()",
    "visible_files_changed()": "lib.visible_files_changed()",
    "buffers_changed()": "lib.buffers_changed()",
    "status()": "lib.status()",
    "broadcast(name, payload)": "lib.broadcast('userSentMessage', { message = 'x' })",
    "log(level, message)": "lib.log('trace', 'hello')",
    "openctx_running()": "lib.openctx_running()",
}

LUA_CALL_LOOP = r"""
local n = ...
local lib = assert(require('amp.native').load())
for i = 1, n do %s end
"""


def bench_leaks(res: Results, tmp: Path, calls: int, requests: int) -> None:
    """Memory kept per native call and per main-thread job, after a full Lua GC.

    Measured as the change of malloc's bytes in use (glibc mallinfo2: uordblks +
    hblkhd, every arena; read through LuaJIT's FFI) and of the Lua heap, which
    unlike RSS do not move when the allocator keeps or returns pages. Each loop
    runs once as a warm-up (a tenth as long), then is measured; the readFile
    requests are sent one at a time (each is its own job and bridge drain) in
    three phases, median."""
    ed = Editor(tmp / "leaks", plugin=True)
    try:
        if ed.heap_bytes() is None:
            res.add("9. leak check", "not measured: no mallinfo2 (glibc >= 2.33) via LuaJIT FFI", "-", None)
            return
        f = ed.workspace / "leak.txt"
        make_file(f, 10)
        ed.edit(f)
        ed.ensure_context_attached()
        sock, _ = raw_upgrade(ed.lock["port"], ed.lock["authToken"])  # selection is published to one client
        deadline = time.monotonic() + 5
        while ed.status().get("clients") != 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)

        def kept(run: Callable[[], None], n: int) -> tuple[float, float, float]:
            c0, l0 = ed.heap_bytes()
            r0 = ed.rss_kib()
            run()
            c1, l1 = ed.heap_bytes()
            return (c1 - c0) / n, (l1 - l0) / n, (ed.rss_kib() - r0) * 1024 / n

        rows = []
        for name, expr in LEAK_CALLS.items():
            code = LUA_CALL_LOOP % expr
            ed.lua(code, max(1, calls // 10))
            t0 = time.perf_counter()
            c, l, r = kept(lambda: ed.lua(code, calls), calls)
            rows.append((name, c, l, r, (time.perf_counter() - t0) / calls * 1e6))

        # readFile requests: each runs one job on the main thread through the bridge.
        client = RawClient(ed.lock["port"], ed.lock["authToken"])
        frame = RawClient.frame(json.dumps({"clientRequest": {"id": "leak", "readFile": {"path": str(f)}}}).encode())

        def one_at_a_time(n: int) -> None:
            for _ in range(n):
                client.sock.sendall(frame)
                while True:
                    item = client._next()
                    if item is None:
                        chunk = client.sock.recv(1 << 20)
                        if not chunk:
                            raise RuntimeError("server closed the connection")
                        client.buf += chunk
                        continue
                    if item[0] == 0x1 and item[2].startswith(b'{"serverResponse"'):
                        break

        one_at_a_time(max(1, requests // 3))
        phases = []
        t0 = time.perf_counter()
        for _ in range(3):
            phases.append(kept(lambda: one_at_a_time(requests), requests))
        per_request_us = (time.perf_counter() - t0) / (3 * requests) * 1e6
        client.close()
        sock.close()
        bridge = tuple(statistics.median(p[i] for p in phases) for i in range(3))
        noise = 8.0
        res.add(f"9. memory kept per native call ({calls} calls each, after a Lua GC; malloc in use + Lua heap)",
                "; ".join(f"{n} {c + l:.1f} B" for n, c, l, _, _ in rows), f"0 B/call (< {noise:.0f} B: noise)",
                all(c + l < noise for _, c, l, _, _ in rows))
        res.add(f"9. memory kept per readFile request, i.e. per bridge job ({requests} requests x 3, one at a time)",
                f"{bridge[0] + bridge[1]:.1f} B/request (malloc {bridge[0]:.1f} B, Lua heap {bridge[1]:.1f} B; "
                f"phases " + ", ".join(f"{c + l:.1f}" for c, l, _ in phases) + f" B; RSS {bridge[2]:+.1f} B)",
                f"0 B/request (< {noise:.0f} B: noise)", bridge[0] + bridge[1] < noise)
        res.note("leak check, RSS growth per call for comparison: " +
                 ", ".join(f"{n} {r:+.1f} B" for n, _, _, r, _ in rows) +
                 f"; wall per call: " + ", ".join(f"{n} {us:.2f} µs" for n, _, _, _, us in rows) +
                 f"; readFile {per_request_us:.0f} µs/request")
        if max([c + l for _, c, l, _, _ in rows] + [bridge[0] + bridge[1]]) >= noise:
            res.note("leak check: memory that stays allocated after every call (a Lua GC included) is lost; "
                     "`heaptrack -p <nvim pid>` around the loop names the allocation site")
    finally:
        ed.close()


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------


def machine() -> str:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    nvim_v = subprocess.run([NVIM, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), {cpu}, Linux {platform.release()}, "
            f"{nvim_v}; load average at start {load}")


def revision() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown revision"
    return f"commit {head or '?'}{' with uncommitted changes' if dirty else ''}"


def render_table(rows: list[tuple[str, str, str, str]]) -> str:
    head = ("benchmark", "figure", "target", "met?")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(4)]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
    return "\n".join([line(head), line(tuple("-" * w for w in widths))] + [line(r) for r in rows])


def render_markdown(rows, notes, mach: str, when: str) -> str:
    out = ["# Benchmark results", "",
           f"Run {when} on {mach}.", "", f"Plugin: {revision()}.", "",
           "Reproduce: `scripts/bench` (installs the venv, builds with `cargo build --release`, then runs "
           "`.venv/bin/python benches/bench.py`).", "",
           "| benchmark | figure | target | met? |", "|---|---|---|---|"]
    for r in rows:
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
    if notes:
        out += ["", "Notes:", ""] + [f"- {n}" for n in notes]
    out += ["", "How each figure is measured is described at the top of `benches/bench.py`.", ""]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-results", action="store_true")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    only = {int(x) for x in args.only.split(",") if x.strip()} or set(range(1, 13))
    q = args.quick
    if not Path(NVIM).exists():
        print(f"nvim not found at {NVIM} (set AMP_NVIM)", file=sys.stderr)
        return 2
    if not LIBRARY.exists():
        print(f"{LIBRARY} missing: run cargo build --release", file=sys.stderr)
        return 2

    res = Results()
    mach = machine()
    log(f"machine: {mach}")
    tmp = Path(tempfile.mkdtemp(prefix="amp-bench-"))
    started = time.monotonic()

    def step(name: str, limit: float, fn: Callable[[], None]) -> None:
        log(f"\n== {name}")
        t = time.monotonic()
        try:
            with time_limit(limit, StepTimeout(f"{name}: exceeded {limit:.0f} s")):
                fn()
        except Exception as e:  # noqa: BLE001 - a failed step is reported, the others still run
            res.add(name, f"error: {type(e).__name__}: {str(e)[:200]}", "-", False)
            traceback.print_exc()
        log(f"   ({time.monotonic() - t:.1f} s)")

    bare = ed = big = flood = None
    poller = Poller()
    try:
        rpc_p50 = None
        if only & {1, 2}:
            def start_bare():
                nonlocal bare
                bare = Editor(tmp / "bare", plugin=False)
            step("start Neovim without the plugin", 15, start_bare)
        if only & {1, 2, 5, 10}:
            def start_ed():
                nonlocal ed
                ed = Editor(tmp / "main", plugin=True, setup_opts="{ auto_start = true, server = { max_clients = 64 } }")
            step("start Neovim with the plugin", 15, start_ed)
        if 1 in only and bare and ed:
            def b1():
                nonlocal rpc_p50
                rpc_p50 = bench_rpc_baseline(bare, res, 100 if q else 300)
                bench_keystroke(ed, poller, res, 100 if q else 300, rpc_p50)
            step("1. keystroke latency", 40, b1)
        if 2 in only and bare and ed:
            step("2. main-thread CPU per cursor move", 60,
                 lambda: bench_cpu_per_move(bare, ed, poller, res, 10_000 if q else 50_000, 3 if q else 9))
        if 5 in only and ed:
            step("5. broadcast to 50 clients", 40, lambda: bench_broadcast(ed, poller, res, 50, 40 if q else 100))
        if 10 in only and ed:
            step("10. keystrokes under a main-thread job flood", 60,
                 lambda: bench_job_flood(ed, poller, res, 100 if q else 300))
        poller.stop()
        for e in (bare, ed):
            if e:
                e.close()
        if only & {3, 4}:
            def b34():
                nonlocal big
                big = Editor(tmp / "big", plugin=True)
                bench_big_requests(big, res, 3 if q else 5)
            step("3/4. readFile and editFile, 20 MB", 90, b34)
            if big:
                big.close()
        if 6 in only:
            step("6. plugin load time", 40, lambda: bench_startup(res, 3 if q else 7, tmp))
        if 7 in only:
            step("7. 5,000 OpenCtx annotations", 60, lambda: bench_annotations(res, tmp, 3 if q else 5))
        if 8 in only:
            def b8():
                nonlocal flood
                flood = Editor(tmp / "flood", plugin=True)
                bench_slow_client(flood, res, 20_000 if q else 100_000)
            step("8. slow client", 60, b8)
            if flood:
                flood.close()
        if 9 in only:
            step("9. leak check of native calls", 60,
                 lambda: bench_leaks(res, tmp, 50_000 if q else 200_000, 2_000 if q else 6_000))
        if 11 in only:
            def b11():
                review = Editor(tmp / "review", plugin=True,
                                setup_opts="{ auto_start = true, agents = { amp = true, claude = true } }")
                try:
                    review_latency.run(review, res, UiDrain, percentile, ms)
                finally:
                    review.close()
            step("11. keystrokes while a 15 MiB proposal arrives and opens", 120, b11)
        if 12 in only:
            step("12. keystrokes while big edits arrive", 150,
                 lambda: bench_keys_during_big_edits(res, tmp, 100 if q else 300))
    finally:
        poller.stop()
        kill_all()
        shutil.rmtree(tmp, ignore_errors=True)

    for e in (ed, big, flood):
        if e is not None and e.context_note:
            res.note(e.context_note)
            break
    load_end = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    mach += f"; at the end {load_end}"
    log(f"\nfinished in {time.monotonic() - started:.0f} s\n")
    log(f"Machine: {mach}\n")
    log(render_table(res.rows))
    if res.notes:
        log("\nNotes:")
        for n in res.notes:
            log(f"- {n}")
    if not args.no_results and not args.only and not q:
        when = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
        RESULTS_MD.write_text(render_markdown(res.rows, res.notes, mach, when), encoding="utf-8")
        log(f"\nwrote {RESULTS_MD.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        sys.exit(main())
    finally:
        kill_all()
