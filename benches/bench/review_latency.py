"""Benchmark 11: keystroke latency while an agent's big
proposal arrives, and while the user opens it.

A Claude-protocol client (a real WebSocket, Claude's header token and
subprotocol) sends `openDiff` of a 15 MiB text for a 15 MiB file. A key
(<F2>, mapped to a Lua function that records vim.uv.hrtime()) is typed every
20 ms as a one-way nvim_input; its latency is from the send to the mapping
running on Neovim's main thread (the i-th key typed is the i-th recorded:
the same key every time, none lost). Two runs:
  arrival  from the request's first byte until the proposal is counted,
           then 0.5 s more (the proposal is only announced: no buffer);
  opening  `:Amp review` typed, then the keys: the view's buffers are
           filled from Rust in slices, then shown in diff mode; a UI is
           attached, so Neovim computes the diff and draws it as a user's
           Neovim does.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Callable

from .editor import Editor
from .report import Results
from .run import Run
from .stats import MIB, ms, pace, percentile
from .ui import UiDrain

LUA_KEY_LOG = r"""
_G.amp_keys = {}
vim.keymap.set('n', '<F2>', function()
  local t = _G.amp_keys
  t[#t + 1] = vim.uv.hrtime()
end)
"""


def big_texts(lines: int) -> tuple[str, str]:
    """A file of `lines` lines (about 62 bytes each) and a proposal that
    changes every 100th line."""
    old = [f"line {i:07d} the quick brown fox jumps over the lazy dog, again\n" for i in range(lines)]
    new = [f"LINE {i:07d} the quick brown fox jumps over the lazy dog, again\n" if i % 100 == 0 else line
           for i, line in enumerate(old)]
    return "".join(old), "".join(new)


def claude_socket(ed):
    from websockets.sync.client import connect
    status = ed.lua("return require('amp').status().agents.claude")
    lock = json.loads((ed.env.home / ".claude" / "ide" / f"{status['port']}.lock").read_text())
    ws = connect(f"ws://127.0.0.1:{status['port']}/", additional_headers={
        "x-claude-code-ide-authorization": lock["authToken"]}, subprotocols=["mcp"], proxy=None,
        open_timeout=5, max_size=None, compression=None)
    ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}))
    while json.loads(ws.recv(timeout=10)).get("id") != 1:
        pass
    return ws


def type_keys_until(ed, done: Callable[[], bool], grace: float, cap: float) -> list[int]:
    """Types <F2> every 20 ms until `done()` has held for `grace` seconds (or
    `cap` seconds passed); the send times (CLOCK_MONOTONIC ns, as hrtime)."""
    sent: list[int] = []
    start = time.monotonic()
    done_at = None
    while time.monotonic() - start < cap:
        t0 = time.perf_counter()
        sent.append(time.monotonic_ns())
        ed.nvim.request("nvim_input", "<F2>", async_=True)
        if done_at is None and len(sent) % 5 == 0 and done():
            done_at = time.monotonic()
        if done_at is not None and time.monotonic() - done_at > grace:
            break
        pace(t0, 0.020)
    return sent


def latencies(ed, sent: list[int], first: int) -> tuple[list[float], int]:
    handled = ed.lua("return _G.amp_keys")[first:]
    return [(h - s) / 1e9 for s, h in zip(sent, handled)], len(handled)


def report_keys(res: Results, label: str, lat: list[float], handled: int, sent: list[int]) -> None:
    """One row: the latencies of the keys typed (`handled` of the `sent` were)."""
    if not lat:
        res.add(label, "not measured: no key handled", "p99 <= 16 ms", False)
        return
    p99 = percentile(lat, 99)
    res.add(label, f"p50 {ms(percentile(lat, 50))}, p99 {ms(p99)}, max {ms(max(lat))} (n={len(lat)}"
            f"{'' if handled == len(sent) else f', {len(sent) - handled} not handled'})", "p99 <= 16 ms", p99 <= 16e-3)


def keystrokes_during_review(ed: Editor, res: Results) -> None:
    ws_dir = ed.workspace
    target = ws_dir / "big.txt"
    old, new = big_texts(15 * MIB // 62)
    target.write_text(old)
    ed.lua(LUA_KEY_LOG)
    ui = UiDrain(ed.sock)
    ws = claude_socket(ed)
    try:
        frame = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "openDiff", "arguments": {"old_file_path": str(target), "new_file_path": str(target),
                                              "new_file_contents": new, "tab_name": "big"}}})
        size = len(new.encode())
        # Arrival.
        sender = threading.Thread(target=ws.send, args=(frame,), daemon=True)
        t_send = time.monotonic()
        sender.start()
        def counted() -> bool:
            return ed.lua("return #require('amp.review').proposals()") == 1

        sent = type_keys_until(ed, counted, 0.5, 20)
        arrival_s = None
        sender.join(timeout=10)
        lat, n = latencies(ed, sent, 0)
        if counted():
            arrival_s = time.monotonic() - t_send
        report_keys(res, f"11. keystroke -> handled while Claude's {size / MIB:.0f} MiB openDiff arrives (one-way <F2>)",
                    lat, n, sent)
        if arrival_s is not None:
            res.note(f"11: the {size / MIB:.0f} MiB proposal was counted {arrival_s * 1e3:.0f} ms after its "
                     "request began (transfer, JSON, the file read on tokio)")
        # Opening.
        first = len(ed.lua("return _G.amp_keys"))
        t_open = time.monotonic()
        ed.nvim.request("nvim_input", ":Amp review<CR>", async_=True)

        def shown() -> bool:
            return ed.lua("""
                for _, r in pairs(require('amp.review').reviews) do if r.started then return true end end
                return false""")

        sent = type_keys_until(ed, shown, 1.0, 30)
        shown_s = time.monotonic() - t_open if shown() else None
        lat, n = latencies(ed, sent, first)
        report_keys(res, "11. same, while :Amp review fills and shows it in diff mode (UI attached, 200x50)",
                    lat, n, sent)
        if shown_s is not None:
            res.note(f"11: :Amp review showed the {size / MIB:.0f} MiB proposal in {shown_s * 1e3:.0f} ms "
                     "(buffers filled in slices, then diff mode)")
    finally:
        ws.close()
        ui.close()
        Path(target).unlink(missing_ok=True)


def measure(run: Run, res: Results) -> None:
    with run.own_editor("review", "{ auto_start = true, agents = { amp = true, claude = true } }") as review:
        keystrokes_during_review(review, res)
