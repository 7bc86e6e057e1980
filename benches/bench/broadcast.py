"""Benchmark 5: keystroke -> selectionDidChange at the last of 50 clients."""

from __future__ import annotations

import time

from .clients import Poller, first_selection_after
from .editor import Editor
from .report import Results
from .run import Run
from .stats import ms, pace, percentile
from .texts import make_file


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
        pace(t0, 0.050)
    if not lasts:
        res.add(f"5. broadcast to {n_clients} clients", "not measured: no complete round arrived", "(no target)", None)
        return
    extra = f", {missed} incomplete" if missed else ""
    res.add(f"5. keystroke -> last of {n_clients} clients has selectionDidChange",
            f"p50 {ms(percentile(lasts, 50))}, p99 {ms(percentile(lasts, 99))} (n={len(lasts)}{extra}); "
            f"first client p50 {ms(percentile(firsts, 50))}", "(no target)", None)


def measure(run: Run, res: Results) -> None:
    bench_broadcast(run.ed, run.poller, res, 50, run.pick(40, 100))
