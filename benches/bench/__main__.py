"""Runs the benchmarks (see __init__.py): `.venv/bin/python benches/bench
[--quick] [--no-results] [--only N[,N...]]`."""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:
    # Run as `python benches/bench`: the package is imported from benches/,
    # not its files as top-level modules from benches/bench/.
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse  # noqa: E402
import datetime  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Callable  # noqa: E402

from bench import (annotations, big_requests, broadcast, cursor_moves, edits_latency, job_flood,  # noqa: E402
                   keystroke, leaks, review_latency, slow_client, startup)
from bench.clients import Poller  # noqa: E402
from bench.editor import kill_all  # noqa: E402
from bench.report import RESULTS_MD, Results, log, machine, render_markdown, render_table  # noqa: E402
from bench.run import Run, StepTimeout  # noqa: E402
from harness import LIBRARY, NVIM, REPO, time_limit  # noqa: E402  (on the path once bench is imported)


@dataclass(frozen=True)
class Benchmark:
    numbers: frozenset[int]  # what --only selects it by
    title: str  # its heading in the output (and its row if it fails)
    limit: float  # seconds before it is stopped
    measure: Callable[[Run, Results], None]
    # The Neovims it shares with the others ("bare": without the plugin,
    # "plugin": with it), started before the first benchmark and closed
    # after the last that share them.
    shares: tuple[str, ...] = ()


def benchmark(numbers: set[int], title: str, limit: float, measure: Callable[[Run, Results], None],
              shares: tuple[str, ...] = ()) -> Benchmark:
    return Benchmark(frozenset(numbers), title, limit, measure, shares)


# Every benchmark, in the order they run and are reported: the one place a
# benchmark is registered. Those that share Neovims come first.
BENCHMARKS = [
    benchmark({1}, "1. keystroke latency", 40, keystroke.measure, ("bare", "plugin")),
    benchmark({2}, "2. main-thread CPU per cursor move", 60, cursor_moves.measure, ("bare", "plugin")),
    benchmark({5}, "5. broadcast to 50 clients", 40, broadcast.measure, ("plugin",)),
    benchmark({10}, "10. keystrokes under a main-thread job flood", 60, job_flood.measure, ("plugin",)),
    benchmark({3, 4}, "3/4. readFile and editFile, 20 MB", 90, big_requests.measure),
    benchmark({6}, "6. plugin load time", 40, startup.measure),
    benchmark({7}, "7. 5,000 OpenCtx annotations", 60, annotations.measure),
    benchmark({8}, "8. slow client", 60, slow_client.measure),
    benchmark({9}, "9. leak check of native calls", 60, leaks.measure),
    benchmark({11}, "11. keystrokes while a 15 MiB proposal arrives and opens", 120, review_latency.measure),
    benchmark({12}, "12. keystrokes while big edits arrive", 150, edits_latency.measure),
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-results", action="store_true")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    only = {int(x) for x in args.only.split(",") if x.strip()} or {n for b in BENCHMARKS for n in b.numbers}
    chosen = [b for b in BENCHMARKS if b.numbers & only]
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

    run = Run(quick=args.quick, tmp=tmp, poller=Poller())
    try:
        shared = {s for b in chosen for s in b.shares}
        if "bare" in shared:
            step("start Neovim without the plugin", 15, run.start_bare)
        if "plugin" in shared:
            step("start Neovim with the plugin", 15, run.start_plugin)
        last_sharing = max((i for i, b in enumerate(chosen) if b.shares), default=-1)
        for i, b in enumerate(chosen):
            have = {"bare": run.bare, "plugin": run.ed}
            if all(have[s] for s in b.shares):
                step(b.title, b.limit, lambda: b.measure(run, res))
            if i == last_sharing:
                run.close_shared()
    finally:
        run.poller.stop()
        kill_all()
        shutil.rmtree(tmp, ignore_errors=True)

    if run.ed is not None and run.ed.context_note:
        res.note(run.ed.context_note)
    load_end = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    mach += f"; at the end {load_end}"
    log(f"\nfinished in {time.monotonic() - started:.0f} s\n")
    log(f"Machine: {mach}\n")
    log(render_table(res.rows))
    if res.notes:
        log("\nNotes:")
        for n in res.notes:
            log(f"- {n}")
    if not args.no_results and not args.only and not args.quick:
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
