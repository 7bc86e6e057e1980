"""Benchmark 10: keystrokes while two clients keep the main thread busy with
getDiagnostics requests."""

from __future__ import annotations

import json
import socket
import threading
import time

from harness import flood_diagnostics_and_log_moves

from .clients import Poller, RawClient, first_selection_after, raw_upgrade
from .editor import Editor
from .report import Results
from .run import Run
from .stats import ms, pace, percentile
from .texts import make_file


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
            pace(t0, 0.030)
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


def measure(run: Run, res: Results) -> None:
    bench_job_flood(run.ed, run.poller, res, run.pick(100, 300))
