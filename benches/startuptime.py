"""What the plugin costs Neovim's main thread at start-up, until the library
is loaded and the server is up.

    .venv/bin/python benches/startuptime.py [--runs 21] [--plugin DIR] [--against DIR]

Starts `nvim --headless -u init.lua` RUNS times for each configuration,
interleaved, all in one HOME (as in daily use: the directories an earlier
session made are there; `--fresh-home` gives each run a new one, as on
the first start ever, which also creates them): without the plugin, with it on the
runtimepath only, with `require("amp").setup({})` (the defaults: the
server starts), and the same with `vim.loader` (lazy.nvim turns it on;
its byte-code cache warm, as in daily use). Each run quits 600 ms after
VimEnter, once the server is up (checked).

Every configuration, the one without the plugin too, requires a one-line
module of another plugin once the runtimepath is set: the first `require`
after the runtimepath changes pays Neovim's rebuild of its search path
(0.2-0.7 ms; with vim.loader its index), and in a real config some other
plugin (lazy.nvim itself) has paid it before this one loads. Without it,
that cost would be counted as this plugin's (`--no-other-plugin` counts
it).

The main thread's own CPU time is read with clock_gettime(
CLOCK_THREAD_CPUTIME_ID) through LuaJIT's FFI, so the plugin's threads
(tokio, the log, the library's mapping) and other processes on the
machine do not count. Printed, medians:

  - "NVIM STARTED" (--startuptime) and its difference from no plugin;
  - plugin/amp.lua: its sourcing's self time (--startuptime);
  - setup(): the main thread's CPU time inside the call in init.lua;
  - after VimEnter: the main thread's CPU time from VimEnter until 600 ms
    later, less that of the same configuration without setup() (Neovim's
    own idle work): the library's load, the options, the server's start,
    the autocommands and the first events, in whatever slices they run;
  - total: the three added up, the plugin's main-thread work until the
    library and the server are up.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NVIM = os.environ.get("AMP_NVIM") or str(REPO / ".venv" / "bin" / "nvim")

# The main thread's CPU clock, and a probe that records it at VimEnter and
# 600 ms later (then quits).
PROBE = """
local ffi = require("ffi")
pcall(ffi.cdef, "typedef struct { long tv_sec; long tv_nsec; } amp_bench_ts; int clock_gettime(int, amp_bench_ts *);")
local function cpu_ms()
  local t = ffi.new("amp_bench_ts")
  ffi.C.clock_gettime(3, t) -- CLOCK_THREAD_CPUTIME_ID
  return tonumber(t.tv_sec) * 1e3 + tonumber(t.tv_nsec) / 1e6
end
_G.amp_bench = { cpu_ms = cpu_ms }
vim.api.nvim_create_autocmd("VimEnter", { callback = function()
  _G.amp_bench.vimenter = cpu_ms()
  vim.defer_fn(function()
    _G.amp_bench.idle = cpu_ms()
    _G.amp_bench.running = package.loaded["amp"] ~= nil and require("amp").is_running()
    _G.amp_bench.cpu_ms = nil
    local f = io.open(os.getenv("AMP_BENCH_OUT"), "w")
    f:write(vim.json.encode(_G.amp_bench))
    f:close()
    vim.cmd("qa!")
  end, 600)
end })
"""
# The runtimepath is set as plugin managers do (not through vim.opt, whose
# own cost is not the plugin's).
RTP = "vim.o.runtimepath = {repo!r} .. ',' .. vim.o.runtimepath\n"
SETUP = ("local t0 = _G.amp_bench.cpu_ms(); require('amp').setup({{}}); "
         "_G.amp_bench.setup = _G.amp_bench.cpu_ms() - t0\n")
LOADER = "vim.loader.enable()\n"
# Another plugin's module, required before this plugin (see the docstring).
OTHER = "vim.o.runtimepath = vim.o.runtimepath .. ',' .. {other!r}; require('bench_other')\n"
CONFIGS = {
    "no plugin": "",
    "on rtp, no setup()": RTP,
    "defaults": RTP + SETUP,
    "loader, on rtp": LOADER + RTP,
    "loader, defaults": LOADER + RTP + SETUP,
}
# Each setup() configuration and its baseline (the same without setup()).
BASELINE = {"defaults": "on rtp, no setup()", "loader, defaults": "loader, on rtp"}


def one(body: str, repo: str, cache: str, other: bool, home: str | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        init = root / "init.lua"
        (root / "other" / "lua").mkdir(parents=True)
        (root / "other" / "lua" / "bench_other.lua").write_text("return {}\n")
        # vim.loader first (as lazy.nvim does), then the probe, another
        # plugin, then the config.
        loader = body.startswith(LOADER)
        body = body[len(LOADER):] if loader else body
        if other:  # after the runtimepath is set, before setup()
            at = len(RTP) if body.startswith(RTP) else 0
            body = body[:at] + OTHER + body[at:]
        body = body.format(repo=repo, other=str(root / "other"))
        init.write_text((LOADER if loader else "") + PROBE + body)
        log = root / "startup.log"
        out = root / "out.json"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "NVIM", "AMP_", "VIM"))}
        env["HOME"] = home or str(root / "home")
        env["AMP_BENCH_OUT"] = str(out)
        if body.startswith(LOADER):
            env["XDG_CACHE_HOME"] = cache  # kept across runs: a warm byte-code cache
        subprocess.run([NVIM, "--headless", "-u", str(init), "--startuptime", str(log)],
                       env=env, cwd=tmp, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30, check=False)
        result = json.loads(out.read_text())
        result["plugin_file"] = 0.0
        for line in log.read_text().splitlines():
            if "NVIM STARTED" in line:
                result["started"] = float(line.split()[0])
            elif line.endswith("plugin/amp.lua"):
                result["plugin_file"] += float(line.split()[2].rstrip(":"))  # self time
        return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--plugin", default=str(REPO), help="the plugin directory to measure")
    ap.add_argument("--against", metavar="DIR",
                    help="another plugin directory (an older build) measured in the same runs, interleaved")
    ap.add_argument("--no-other-plugin", dest="other", action="store_false",
                    help="no other plugin's module is required first (this plugin's require pays the runtimepath scan)")
    ap.add_argument("--fresh-home", action="store_true", help="a new HOME for every run (the first start ever)")
    args = ap.parse_args()
    plugins = [args.plugin] + ([args.against] if args.against else [])
    runs: dict[tuple[str, str], list[dict]] = {(p, name): [] for p in plugins for name in CONFIGS}
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as shared_home:
        home = None if args.fresh_home else shared_home
        for plugin in plugins:
            for name, body in CONFIGS.items():  # warm the loader's cache
                one(body, plugin, cache, args.other, home)
        for _ in range(args.runs):
            for plugin in plugins:
                for name, body in CONFIGS.items():
                    runs[(plugin, name)].append(one(body, plugin, cache, args.other, home))

    for plugin in plugins:
        if args.against:
            print(plugin)
        report({name: runs[(plugin, name)] for name in CONFIGS})


def report(runs: dict[str, list[dict]]) -> None:
    def med(name: str, key) -> float:
        return statistics.median(key(r) for r in runs[name])

    for name in CONFIGS:
        base = "loader, on rtp" if name.startswith("loader") else "no plugin"
        started = med(name, lambda r: r["started"])
        line = f"{name:20} NVIM STARTED {started:6.2f} ms (+{started - med(base, lambda r: r['started']):5.2f})"
        if name in BASELINE:
            not_up = sum(1 for r in runs[name] if not r["running"])
            assert not_up == 0, f"{name}: the server was not up 600 ms after VimEnter in {not_up} runs"
            plugin_file = med(name, lambda r: r["plugin_file"])
            setup = med(name, lambda r: r["setup"])
            after = med(name, lambda r: r["idle"] - r["vimenter"]) - med(BASELINE[name],
                                                                          lambda r: r["idle"] - r["vimenter"])
            line += (f"; main thread: plugin/amp.lua {plugin_file:4.2f} + setup() {setup:4.2f}"
                     f" + after VimEnter {after:4.2f} = {plugin_file + setup + after:4.2f} ms")
        print(line + f"; {len(runs[name])} runs")


if __name__ == "__main__":
    main()
