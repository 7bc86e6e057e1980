"""Benchmark 8: a client that never reads while notifications flood it: RSS,
its disconnection, Neovim's responsiveness."""

from __future__ import annotations

import contextlib
import time

from harness import open_client

from .clients import raw_upgrade
from .editor import Editor
from .report import Results
from .run import Run
from .stats import MIB, ms


LUA_FLOOD = r"""
local n, message = ...
local broadcast = require('amp.native').call
local reached = 0
for i = 1, n do
  local r = broadcast('broadcast', 'userSentMessage', { message = message })
  reached = reached + (r or 0)
end
return reached
"""


def bench_slow_client(ed: Editor, res: Results, total: int) -> None:
    port, token = ed.lock["port"], ed.lock["authToken"]
    message = "x" * 200
    chunks = 20
    ed.lua(LUA_FLOOD, 500, message)  # warm up
    slow, _ = raw_upgrade(port, token, rcvbuf=4096)  # never read from again
    deadline = time.monotonic() + 5
    while ed.status().get("clients") != 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)
    rss0 = ed.rss_kib()
    peak = rss0
    reached = 0
    t0 = time.perf_counter()
    for _ in range(chunks):
        reached += ed.lua(LUA_FLOOD, total // chunks, message)
        peak = max(peak, ed.rss_kib())
    produce = time.perf_counter() - t0
    disconnected_after = None
    t1 = time.perf_counter()
    while time.perf_counter() - t1 < 20:
        peak = max(peak, ed.rss_kib())
        if ed.status().get("clients") == 0:
            disconnected_after = time.perf_counter() - t0
            break
        time.sleep(0.1)
    rss1 = ed.rss_kib()
    growth_peak = (peak - rss0) / 1024
    growth_end = (rss1 - rss0) / 1024
    res.add(f"8. RSS growth, {total} notifications to a client that never reads",
            f"peak +{growth_peak:.1f} MiB, end +{growth_end:.1f} MiB", "<= 16 MB", growth_peak * MIB <= 16e6)
    # still responsive?
    t = time.perf_counter()
    ed.nvim.eval("1 + 1")
    rpc = time.perf_counter() - t
    t = time.perf_counter()
    with contextlib.closing(open_client(port, token, compression=None)) as alive:
        alive.ping("alive", timeout=5)
    ping = time.perf_counter() - t
    verdict = (f"disconnected {disconnected_after:.1f} s after the flood began" if disconnected_after is not None
               else "still connected 20 s after the flood")
    res.add("8. slow client: disconnected? Neovim responsive?",
            f"{verdict}; RPC {ms(rpc)}, new client connect+ping {ms(ping)}; "
            f"{reached} deliveries queued, flood took {produce:.2f} s", "disconnected, responsive",
            disconnected_after is not None and rpc < 0.5)
    slow.close()
    time.sleep(0.3)
    # Control: the same notifications with no client connected at all.
    ed.lua("collectgarbage('collect')")
    c0 = ed.rss_kib()
    for _ in range(chunks):
        ed.lua(LUA_FLOOD, total // chunks, message)
    ed.lua("collectgarbage('collect')")
    control = (ed.rss_kib() - c0) / 1024
    res.add(f"8. control: RSS growth, the same {total} notifications, no client connected",
            f"+{control:.1f} MiB ({control * MIB / total:.0f} B per notification)", "(reference)", None)
    res.note(f"slow client: RSS grew {growth_peak:.1f} MiB with the slow client and {control:.1f} MiB "
             f"for the same loop with no client at all, so the slow client's own share is "
             f"{growth_peak - control:+.1f} MiB" +
             ("; the rest grows with every native call (see 9)" if control * MIB / total >= 16 else ""))


def measure(run: Run, res: Results) -> None:
    with run.own_editor("flood") as flood:
        bench_slow_client(flood, res, run.pick(20_000, 100_000))
