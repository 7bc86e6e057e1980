"""What the plugin adds to Neovim's start-up, as `--startuptime` reports it.

    .venv/bin/python benches/startuptime.py [--runs 30] [--plugin DIR]

Starts `nvim --headless -u init.lua` RUNS times without the plugin and RUNS
times with it (on the runtimepath, `require("amp").setup({})` with the
defaults, and once more with `auto_start = false`), interleaved, each in a
fresh HOME/XDG tree, and prints the median "NVIM STARTED" time of each and
the difference. Each run quits 300 ms after start-up, so work deferred past
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

CONFIGS = {
    "no plugin": "",
    "defaults": "vim.opt.rtp:prepend({repo!r}); require('amp').setup({{}})",
    "auto_start = false": "vim.opt.rtp:prepend({repo!r}); require('amp').setup({{ auto_start = false }})",
}


def one(body: str, repo: str) -> tuple[float, float]:
    """("NVIM STARTED" time, time spent sourcing init.lua), in ms."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        init = root / "init.lua"
        init.write_text(body.format(repo=repo) + "\nvim.defer_fn(function() vim.cmd('qa!') end, 300)\n")
        log = root / "startup.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "NVIM", "AMP_", "VIM"))}
        env["HOME"] = str(root / "home")
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
        return started, sourced


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--plugin", default=str(REPO), help="the plugin directory to measure")
    args = ap.parse_args()
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in CONFIGS}
    for _ in range(args.runs):
        for name, body in CONFIGS.items():
            times[name].append(one(body, args.plugin))
    base = statistics.median(t for t, _ in times["no plugin"])
    base_init = statistics.median(s for _, s in times["no plugin"])
    for name, values in times.items():
        med = statistics.median(t for t, _ in values)
        init = statistics.median(s for _, s in values)
        print(f"{name:20} NVIM STARTED median {med:6.2f} ms (+{med - base:5.2f});"
              f" init.lua sourced in {init:5.2f} ms (+{init - base_init:5.2f}); {len(values)} runs")


if __name__ == "__main__":
    main()
