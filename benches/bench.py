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
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime
import glob
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

import pynvim
from websockets.sync.client import connect as ws_connect

REPO = Path(__file__).resolve().parents[1]
LIBRARY = REPO / "target" / "release" / "libamp_core.so"
RESULTS_MD = REPO / "benches" / "RESULTS.md"
CLK_TCK = os.sysconf("SC_CLK_TCK")
MIB = 1024 * 1024


def nvim_binary() -> str:
    configured = os.environ.get("AMP_NVIM")
    if not configured:
        return str(REPO / ".venv" / "bin" / "nvim")
    p = Path(configured)
    return str(p.resolve() if p.exists() else p)


NVIM = nvim_binary()


def log(msg: str) -> None:
    print(msg, flush=True)


# --------------------------------------------------------------------------
# time limits
# --------------------------------------------------------------------------


class StepTimeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: float, what: str):
    """Raises StepTimeout in the main thread when `what` runs past `seconds`."""

    def on_alarm(signum, frame):
        raise StepTimeout(f"{what}: exceeded {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


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


class Editor:
    """A headless Neovim 0.11 with (or without) the plugin, attached over RPC."""

    def __init__(self, root: Path, *, plugin: bool, setup_opts: str = "{ auto_start = true }"):
        self.root = root
        self.plugin = plugin
        env = dict(os.environ)
        for var in ("AMP_DATA_HOME", "NVIM", "NVIM_LISTEN_ADDRESS", "VIMINIT", "MYVIMRC",
                    "NVIM_APPNAME", "VIMRUNTIME", "VIM", "XDG_CONFIG_DIRS", "XDG_DATA_DIRS"):
            env.pop(var, None)
        for name in ("home", "data", "state", "config", "cache", "work"):
            (root / name).mkdir(parents=True, exist_ok=True)
        env.update({
            "HOME": str(root / "home"),
            "XDG_DATA_HOME": str(root / "data"),
            "XDG_STATE_HOME": str(root / "state"),
            "XDG_CONFIG_HOME": str(root / "config"),
            "XDG_CACHE_HOME": str(root / "cache"),
            "NVIM_LOG_FILE": str(root / "nvim.log"),
        })
        self.env = env
        self.workspace = root / "work"
        self.sock = str(root / "nvim.sock")
        argv = [NVIM, "--headless", "--clean", "--listen", self.sock,
                "--cmd", "let g:loaded_matchparen = 1", "--cmd", LUA_ORPHAN_WATCH]
        if plugin:
            argv += ["--cmd", f"set rtp^={REPO}", "-c", f"lua require('amp').setup({setup_opts})"]
        self.stderr = open(root / "nvim-stderr.log", "wb")
        self.proc = subprocess.Popen(argv, cwd=str(self.workspace), env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self.stderr, start_new_session=True)
        STARTED.append(self.proc)
        self.pid = self.proc.pid
        deadline = time.monotonic() + 10
        while not os.path.exists(self.sock):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"nvim did not start: {(root / 'nvim-stderr.log').read_text(errors='replace')}")
            time.sleep(0.01)
        self.nvim = pynvim.attach("socket", path=self.sock)
        self.lock: dict | None = None
        if plugin:
            self.lock = self.wait_lockfile()
        self.context_note = ""

    def wait_lockfile(self, timeout: float = 10) -> dict:
        deadline = time.monotonic() + timeout
        pattern = os.path.join(self.env["XDG_DATA_HOME"], "amp", "ide", "*.json")
        while time.monotonic() < deadline:
            for f in glob.glob(pattern):
                try:
                    d = json.loads(Path(f).read_text())
                except (OSError, ValueError):
                    continue
                if d.get("pid") == self.pid:
                    return d
            time.sleep(0.02)
        raise RuntimeError(f"no lockfile within {timeout} s; stderr: "
                           f"{(self.root / 'nvim-stderr.log').read_text(errors='replace')}; "
                           f"messages: {self.nvim.command_output('messages')}")

    def lua(self, code: str, *args) -> Any:
        return self.nvim.exec_lua(code, *args)

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

    def thread_cpu_ns(self) -> float:
        """CPU time of Neovim's main thread (CLOCK_THREAD_CPUTIME_ID via LuaJIT FFI)."""
        return float(self.lua(LUA_THREAD_CPU + "return amp_bench_thread_cpu_ns()"))

    def edit(self, path: Path) -> None:
        self.nvim.command("edit " + self.nvim.funcs.fnameescape(str(path)))

    def status(self) -> dict:
        return self.lua("return require('amp').status()")

    def close(self) -> None:
        try:
            self.nvim.command("qa!")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)
        with contextlib.suppress(Exception):
            self.nvim.close()
        self.stderr.close()


# Every Neovim started here quits by itself if this script dies without killing it.
LUA_ORPHAN_WATCH = ("lua local p = vim.uv.os_getppid(); local t = vim.uv.new_timer(); "
                    "t:start(1000, 1000, function() if vim.uv.os_getppid() ~= p then t:stop(); "
                    "vim.schedule(function() vim.cmd('qa!') end) end end)")


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
    key = base64.b64encode(os.urandom(16)).decode()
    req = (f"GET /?auth={token} HTTP/1.1\r\nHost: localhost:{port}\r\nUpgrade: websocket\r\n"
           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
    s.sendall(req.encode())
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
        while True:
            while True:
                got = self._next()
                if got is None:
                    break
                op, payload, t = got
                if op == 0x1 and payload.startswith(b'{"serverResponse"'):
                    return t0, t, payload
            chunk = self.sock.recv(1 << 22)
            if not chunk:
                raise RuntimeError("server closed the connection")
            self._t = time.perf_counter()
            if not self.first:
                self.first = self._t
            self.buf += chunk

    def _next(self) -> tuple[int, bytes, float] | None:
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
        return op, payload, self._t

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


def measure_moves(ed: Editor, n: int, reps: int) -> dict:
    """Runs n cursor moves `reps` times; medians of main-thread CPU per move."""
    proc_us, ffi_us, wall_us = [], [], []
    rss0 = ed.rss_kib()
    for _ in range(reps):
        k0 = ed.main_task_ticks()
        cpu_ns, wall_ns = ed.lua(LUA_MOVES, n)
        k1 = ed.main_task_ticks()
        proc_us.append((k1 - k0) / CLK_TCK * 1e6 / n)
        ffi_us.append(cpu_ns / 1e3 / n)
        wall_us.append(wall_ns / 1e3 / n)
        time.sleep(0.05)
    ed.lua("collectgarbage('collect')")
    rss_per_move = (ed.rss_kib() - rss0) * 1024 / (n * reps)
    return {"proc": statistics.median(proc_us), "ffi": statistics.median(ffi_us), "wall": statistics.median(wall_us),
            "rss_b": rss_per_move}


def bench_cpu_per_move(bare: Editor, ed: Editor, poller: Poller, res: Results, n: int, reps: int) -> None:
    # Both editors show the same two-line file.
    for e in (bare, ed):
        f = e.workspace / "moves.txt"
        f.write_text("first line é→😀\nsecond line\n", encoding="utf-8")
        e.edit(f)
    ed.ensure_context_attached()
    base = measure_moves(bare, n, reps)
    log(f"  baseline (no plugin): {base['ffi']:.2f} µs/move main-thread CPU (FFI), "
        f"{base['proc']:.2f} µs (/proc ticks), {base['wall']:.2f} µs wall")
    # Reference: what any Lua CursorMoved autocmd costs, with an empty callback.
    bare.lua("vim.api.nvim_create_autocmd('CursorMoved', { group = vim.api.nvim_create_augroup('AmpBenchEmpty', {}),"
             " callback = function() end })")
    empty = measure_moves(bare, n, reps)
    bare.lua("vim.api.nvim_del_augroup_by_name('AmpBenchEmpty')")
    # The keystroke benchmark left one client connected; make it 1 exactly.
    clients = ed.status().get("clients", 0)
    rss_rows = []
    for want in (1, 10):
        while clients < want:
            poller.add(ed.lock["port"], ed.lock["authToken"])
            clients += 1
        deadline = time.monotonic() + 5
        while ed.status().get("clients") != want and time.monotonic() < deadline:
            time.sleep(0.05)
        got = measure_moves(ed, n, reps)
        rss_rows.append((want, got["rss_b"]))
        d_ffi, d_proc = got["ffi"] - base["ffi"], got["proc"] - base["proc"]
        res.add(f"2. main-thread CPU per cursor move over baseline, {want} client{'s' if want > 1 else ''}",
                f"{d_ffi:.2f} µs (thread clock); {d_proc:.2f} µs (/proc ticks)",
                "<= 3 µs", d_ffi <= 3.0)
        log(f"  plugin, {want} client(s): {got['ffi']:.2f} µs/move (FFI), {got['proc']:.2f} µs (/proc), "
            f"{got['wall']:.2f} µs wall (baseline {base['wall']:.2f})")
    moves = n * reps
    res.add(f"2x. RSS growth per cursor move ({moves} moves each, after a Lua GC)",
            ", ".join(f"{b:.0f} B/move with {c} client{'s' if c > 1 else ''}" for c, b in rss_rows)
            + f"; baseline {base['rss_b']:.0f} B/move", "bounded (0 B/move)",
            all(b < 16 for _, b in rss_rows))
    res.note(f"for reference, one empty Lua CursorMoved autocmd adds {empty['ffi'] - base['ffi']:.2f} µs/move "
             f"(thread clock) to the same loop")
    res.note(f"cursor moves: {n} per run, median of {reps} runs; baseline main-thread CPU "
             f"{base['ffi']:.2f} µs/move (thread clock), {base['proc']:.2f} µs/move (/proc, "
             f"{1e6 / CLK_TCK / n:.2f} µs/move resolution)")


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
    finally:
        client.close()


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
        for name in ("home", "data", "state", "config", "cache"):
            (root / name).mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.update({"HOME": str(root / "home"), "XDG_DATA_HOME": str(root / "data"),
                    "XDG_STATE_HOME": str(root / "state"), "XDG_CONFIG_HOME": str(root / "config"),
                    "XDG_CACHE_HOME": str(root / "cache")})
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
    res.add("6. setup() wall incl. native library load and server start",
            f"{statistics.median(setup_wall):.3f} ms (median of {runs})", "(reference)", None)
    res.note("startup entries (median self ms): " +
             ", ".join(f"{k} {statistics.median(v):.3f}" for k, v in detail.items()))


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
    url = f"ws://localhost:{port}/?auth={token}"
    t = time.perf_counter()
    with ws_connect(url, compression=None, open_timeout=5, ping_interval=None) as ws:
        ws.send(json.dumps({"clientRequest": {"id": "p", "ping": {"message": "alive"}}}))
        while True:
            m = json.loads(ws.recv(timeout=5))
            if "serverResponse" in m:
                break
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
             f"{growth_peak - control:+.1f} MiB; the rest grows with every native call (see 2x)")


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
    only = {int(x) for x in args.only.split(",") if x.strip()} or set(range(1, 9))
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
            with time_limit(limit, name):
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
        if only & {1, 2, 5}:
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
                 lambda: bench_cpu_per_move(bare, ed, poller, res, 10_000 if q else 50_000, 3))
        if 5 in only and ed:
            step("5. broadcast to 50 clients", 40, lambda: bench_broadcast(ed, poller, res, 50, 40 if q else 100))
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
            res.add("7. 5,000 annotations rendered on one buffer",
                    "not measured: OpenCtx annotations not implemented yet", "-", None)
        if 8 in only:
            def b8():
                nonlocal flood
                flood = Editor(tmp / "flood", plugin=True)
                bench_slow_client(flood, res, 20_000 if q else 100_000)
            step("8. slow client", 60, b8)
            if flood:
                flood.close()
    finally:
        poller.stop()
        kill_all()
        shutil.rmtree(tmp, ignore_errors=True)

    for e in (ed, big, flood):
        if e is not None and e.context_note:
            res.note(e.context_note)
            break
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
