"""Statistics and units the benchmarks share."""

from __future__ import annotations

import math
import os
import statistics
import time
from typing import Callable

CLK_TCK = os.sysconf("SC_CLK_TCK")
MIB = 1024 * 1024


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    s = sorted(values)
    if not s:
        return float("nan")
    k = max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))
    return s[k]


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def pace(t0: float, period: float) -> None:
    """Sleeps until `period` seconds after `t0` (time.perf_counter()): samples
    start evenly spaced, whatever each one took."""
    pause = t0 + period - time.perf_counter()
    if pause > 0:
        time.sleep(pause)


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
