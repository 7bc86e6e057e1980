"""What the plugin adds to Neovim's start-up, as `--startuptime` reports it.

    .venv/bin/python benches/startuptime.py [--runs 30] [--plugin DIR]

Starts `nvim --headless -u init.lua` RUNS times each without the plugin,
with it on the runtimepath only, with `require("amp").setup({})` (the
defaults) and with `auto_start = false`, interleaved, each in a fresh
HOME, and prints the median "NVIM STARTED" time of each (and the
difference), the time init.lua took and the time setup() itself took. Each run quits 300 ms after start-up, so work deferred past
start-up (the server) runs, but after the clock stopped, as a user sees it.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NVIM = os.environ.get("AMP_NVIM") or str(REPO / ".venv" / "bin" / "nvim")

# The runtimepath is set as plugin managers do (not through vim.opt, whose
# own cost is not the plugin's); `setup()` is timed inside Neovim too.
RTP = "vim.o.runtimepath = {repo!r} .. ',' .. vim.o.runtimepath; "
TIMED = ("local t0 = vim.uv.hrtime(); require('amp').setup({opts}); "
         "local f = io.open(os.getenv('AMP_SETUP_MS'), 'w'); f:write((vim.uv.hrtime() - t0) / 1e6); f:close()")
LOADER = "vim.loader.enable(); "
CONFIGS = {
    "no plugin": "",
    "on rtp, no setup()": RTP,
    "defaults": RTP + TIMED.replace("{opts}", "{{}}"),
    "auto_start = false": RTP + TIMED.replace("{opts}", "{{ auto_start = false }}"),
    # vim.loader (byte-code cache; lazy.nvim turns it on), its cache warm as
    # in daily use: compared with "loader, no plugin".
    "loader, no plugin": LOADER,
    "loader, defaults": LOADER + RTP + TIMED.replace("{opts}", "{{}}"),
}


def one(body: str, repo: str, cache: str) -> tuple[float, float, float | None]:
    """("NVIM STARTED" time, time spent sourcing init.lua, setup()'s own time), in ms."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        init = root / "init.lua"
        init.write_text(body.format(repo=repo) + "\nvim.defer_fn(function() vim.cmd('qa!') end, 300)\n")
        log = root / "startup.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "NVIM", "AMP_", "VIM"))}
        env["HOME"] = str(root / "home")
        if body.startswith(LOADER):
            env["XDG_CACHE_HOME"] = cache  # kept across runs: a warm byte-code cache
        setup_ms = root / "setup_ms"
        env["AMP_SETUP_MS"] = str(setup_ms)
        subprocess.run([NVIM, "--headless", "-u", str(init), "--startuptime", str(log)],
                       env=env, cwd=tmp, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30, check=False)
        started = sourced = None
        for line in log.read_text().splitlines():
            if "NVIM STARTED" in line:
                started = float(line.split()[0])
            elif line.endswith("sourcing " + str(init)):
                sourced = float(line.split()[1])
        if started is None or sourced is None:
            raise RuntimeError(f"unexpected --startuptime output: {log.read_text()[-500:]}")
        return started, sourced, float(setup_ms.read_text()) if setup_ms.exists() else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--plugin", default=str(REPO), help="the plugin directory to measure")
    args = ap.parse_args()
    times: dict[str, list[tuple[float, float, float | None]]] = {name: [] for name in CONFIGS}
    with tempfile.TemporaryDirectory() as cache:
        for name, body in CONFIGS.items():  # warm the loader's cache
            one(body, args.plugin, cache)
        for _ in range(args.runs):
            for name, body in CONFIGS.items():
                times[name].append(one(body, args.plugin, cache))
    for name, values in times.items():
        base = statistics.median(r[0] for r in times["loader, no plugin" if "loader" in name else "no plugin"])
        med = statistics.median(r[0] for r in values)
        init = statistics.median(r[1] for r in values)
        setup = [r[2] for r in values if r[2] is not None]
        own = f"; setup() {statistics.median(setup):5.2f} ms" if setup else ""
        print(f"{name:20} NVIM STARTED median {med:6.2f} ms (+{med - base:5.2f});"
              f" init.lua {init:5.2f} ms{own}; {len(values)} runs")


if __name__ == "__main__":
    main()
