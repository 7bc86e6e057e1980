"""Benchmark 9: memory kept per native call and per main-thread job (a
readFile request), after a full Lua GC."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Callable

from .clients import RawClient, raw_upgrade
from .editor import Editor
from .report import Results
from .run import Run
from .texts import make_file


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


def measure(run: Run, res: Results) -> None:
    bench_leaks(res, run.tmp, run.pick(50_000, 200_000), run.pick(2_000, 6_000))
