#!/usr/bin/env python3
"""Benchmarks of amp.nvim-rs in a real headless Neovim with real WebSocket clients.

Prints figures, not pass/fail: each next to its target, in one final table,
which is also written as Markdown to benches/RESULTS.md.

    scripts/bench                    # installs, builds, runs this
    .venv/bin/python benches/bench   # run only (needs target/release/libamp_core.so)

Options: --quick (fewer samples), --no-results (do not write RESULTS.md),
--only N[,N...] (run only these benchmark numbers).

Environment: AMP_NVIM overrides the nvim binary (default .venv/bin/nvim).

Where things are: __main__.py lists the benchmarks (BENCHMARKS: the one place
a benchmark is registered, in the order they run and are reported) and runs
them; each benchmark has a file of its own (keystroke.py is 1, cursor_moves.py
2, big_requests.py 3 and 4, broadcast.py 5, startup.py 6, annotations.py 7,
slow_client.py 8, leaks.py 9, job_flood.py 10, review_latency.py 11, edits_latency.py 12), with
what they share beside them: run.py (the shared Neovims of one run),
editor.py (the Neovim under test), clients.py (raw WebSocket clients), ui.py
(a UI that drains redraws), texts.py (test files), stats.py (percentiles,
units), report.py (results, the table, RESULTS.md).

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
- 12 (keys during big edits) types j every 30 ms into one window while an
  agent's 20 MiB editFiles of a file shown in another window arrive back to
  back; latency is CursorMoved's time on the main thread minus the time the
  key was sent (as 10), RSS is sampled from /proc.
- Everything here competes with whatever else runs on the machine: CPU-time
  figures rise under load too (shared cores and caches), so the load average
  at the start and at the end is recorded with the results.
"""

import sys
from pathlib import Path

# The integration tests' harness: Neovim, its HOME/XDG tree, lockfiles, clients.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "integration"))
