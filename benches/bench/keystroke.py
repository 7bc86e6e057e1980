"""Benchmark 1: keystroke -> selectionDidChange at a client, and (1b) the bare
RPC round trip of nvim_input without the plugin, for reference."""

from __future__ import annotations

import time

from .clients import Poller, first_selection_after
from .editor import Editor
from .report import Results
from .run import Run
from .stats import ms, pace, percentile
from .texts import make_file


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
        pace(t0, 0.030)
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


def measure(run: Run, res: Results) -> None:
    samples = run.pick(100, 300)
    rpc_p50 = bench_rpc_baseline(run.bare, res, samples)
    bench_keystroke(run.ed, run.poller, res, samples, rpc_p50)
