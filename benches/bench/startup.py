"""Benchmark 6: the plugin's load time at start-up (--startuptime), setup()'s
wall time, and the main thread's CPU until the library and the server are up
(benches/startuptime.py)."""

from __future__ import annotations

import re
import statistics
import subprocess
from pathlib import Path

from harness import NVIM, REPO, AmpEnv

from .editor import STARTED
from .report import Results
from .run import Run


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
    cache, home = tmp / "startup-loader-cache", tmp / "startup-home"
    cache.mkdir(exist_ok=True)
    home.mkdir(exist_ok=True)

    def one(config: str) -> dict:
        # Another plugin's module first and one HOME, as startuptime.py's default.
        return startuptime.one(startuptime.CONFIGS[config], str(REPO), str(cache), True, str(home))

    one("defaults")  # the lockfile directory made, as in daily use
    base, full = [], []
    for _ in range(runs):  # interleaved
        base.append(one("on rtp, no setup()"))
        full.append(one("defaults"))
    after = (statistics.median(r["idle"] - r["vimenter"] for r in full)
             - statistics.median(r["idle"] - r["vimenter"] for r in base))
    before = statistics.median(r["plugin_file"] + r["setup"] for r in full)
    total = before + after
    res.add("6. main-thread CPU until the library and the server are up (plugin/amp.lua + setup() + after VimEnter)",
            f"{total:.2f} ms ({before:.2f} + {after:.2f}; median of {runs})", "<= 1 ms", total <= 1.0)


def measure(run: Run, res: Results) -> None:
    bench_startup(res, run.pick(3, 7), run.tmp)
