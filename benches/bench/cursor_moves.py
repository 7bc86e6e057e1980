"""Benchmark 2: the main thread's CPU per cursor move over a Neovim without
the plugin, with 1 and 10 clients, and (2x) RSS growth per move."""

from __future__ import annotations

import time
from typing import Callable

from .clients import Poller
from .editor import LUA_THREAD_CPU, Editor
from .report import Results, log
from .run import Run
from .stats import CLK_TCK, interleaved


LUA_MOVES = LUA_THREAD_CPU + r"""
local n = ...
local set, exec = vim.api.nvim_win_set_cursor, vim.api.nvim_exec_autocmds
local c0, w0 = amp_bench_thread_cpu_ns(), vim.uv.hrtime()
for i = 1, n do
  set(0, { (i % 2) + 1, 0 })
  exec('CursorMoved', {})
end
return { amp_bench_thread_cpu_ns() - c0, vim.uv.hrtime() - w0 }
"""


# The plugin's hot path alone: the same cursor moves, with what its
# buffer-local CursorMoved callback does outside Visual mode
# (lib.cursor_moved(name), which reads the cursor and its line through the C
# API) called inline instead of through an autocmd (or not at all).
LUA_MOVES_DIRECT = LUA_THREAD_CPU + r"""
local n, call = ...
local api = vim.api
local set = api.nvim_win_set_cursor
local cursor_moved = assert(require('amp.native').load()).cursor_moved
local name = api.nvim_buf_get_name(0)
local c0 = amp_bench_thread_cpu_ns()
if call then
  for i = 1, n do
    set(0, { (i % 2) + 1, 0 })
    cursor_moved(name)
  end
else
  for i = 1, n do
    set(0, { (i % 2) + 1, 0 })
  end
end
return amp_bench_thread_cpu_ns() - c0
"""


def one_move_run(ed: Editor, n: int) -> dict:
    """n cursor moves (each followed by CursorMoved); main-thread CPU and wall per move (µs)."""
    k0 = ed.main_task_ticks()
    cpu_ns, wall_ns = ed.lua(LUA_MOVES, n)
    k1 = ed.main_task_ticks()
    return {"proc": (k1 - k0) / CLK_TCK * 1e6 / n, "ffi": cpu_ns / 1e3 / n, "wall": wall_ns / 1e3 / n}


def with_autocmd(ed: Editor, spec: str, run: Callable[[], dict]) -> Callable[[], dict]:
    """`run` with one extra CursorMoved autocmd (`spec`: the options after the group) in place."""
    def go() -> dict:
        ed.lua("vim.api.nvim_create_autocmd('CursorMoved', { group = vim.api.nvim_create_augroup('AmpBenchEmpty', {}), "
               + spec + " })")
        try:
            return run()
        finally:
            ed.lua("vim.api.nvim_del_augroup_by_name('AmpBenchEmpty')")
    return go


def bench_cpu_per_move(bare: Editor, ed: Editor, poller: Poller, res: Results, n: int, reps: int) -> None:
    # Both editors show the same two-line file.
    for e in (bare, ed):
        f = e.workspace / "moves.txt"
        f.write_text("first line é→😀\nsecond line\n", encoding="utf-8")
        e.edit(f)
    ed.ensure_context_attached()
    for e in (bare, ed):  # warm-up (JIT, allocator)
        one_move_run(e, n // 5)
    bare_run = lambda: one_move_run(bare, n)
    # Reference: what any Lua CursorMoved autocmd costs, with an empty callback.
    empty = interleaved(bare_run, with_autocmd(bare, "callback = function() end", bare_run), reps)
    empty_local = interleaved(bare_run, with_autocmd(bare, "buffer = 0, callback = function() end", bare_run), reps)
    # The keystroke benchmark left one client connected; make it 1 exactly.
    clients = ed.status().get("clients", 0)
    rss_rows = []
    base = None
    for want in (1, 10):
        while clients < want:
            poller.add(ed.lock["port"], ed.lock["authToken"])
            clients += 1
        deadline = time.monotonic() + 5
        while ed.status().get("clients") != want and time.monotonic() < deadline:
            time.sleep(0.05)
        rss0 = ed.rss_kib()
        got = interleaved(bare_run, lambda: one_move_run(ed, n), reps)
        ed.lua("collectgarbage('collect')")
        rss_rows.append((want, (ed.rss_kib() - rss0) * 1024 / (n * reps)))
        base = got
        d_ffi, d_proc = got["ffi"]["diff"], got["proc"]["diff"]
        res.add(f"2. main-thread CPU per cursor move over baseline, {want} client{'s' if want > 1 else ''}",
                f"{d_ffi:.2f} µs (thread clock); {d_proc:.2f} µs (/proc ticks)",
                "<= 3 µs", d_ffi <= 3.0)
        log(f"  plugin, {want} client(s): {got['ffi']['b']:.2f} µs/move (FFI), {got['proc']['b']:.2f} µs (/proc), "
            f"{got['wall']['b']:.2f} µs wall; baseline {got['ffi']['a']:.2f} µs (FFI), {got['wall']['a']:.2f} µs wall")
    # The same baseline-free loop for RSS: no plugin at all.
    rss0 = bare.rss_kib()
    for _ in range(reps):
        bare_run()
    bare.lua("collectgarbage('collect')")
    base_rss = (bare.rss_kib() - rss0) * 1024 / (n * reps)
    moves = n * reps
    res.add(f"2x. RSS growth per cursor move ({moves} moves each, after a Lua GC)",
            ", ".join(f"{b:.0f} B/move with {c} client{'s' if c > 1 else ''}" for c, b in rss_rows)
            + f"; baseline {base_rss:.0f} B/move", "bounded (0 B/move)",
            all(b < 16 for _, b in rss_rows))
    direct = interleaved(lambda: {"ffi": ed.lua(LUA_MOVES_DIRECT, n, False) / 1e3 / n},
                         lambda: {"ffi": ed.lua(LUA_MOVES_DIRECT, n, True) / 1e3 / n}, reps)
    res.note(f"for reference, one empty Lua CursorMoved autocmd adds {empty['ffi']['diff']:.2f} µs/move "
             f"(thread clock) to the same loop ({empty_local['ffi']['diff']:.2f} µs when buffer-local: no "
             f"pattern match); Neovim spends that on any Lua autocmd callback, so the plugin's are buffer-local. "
             f"The plugin's own part: its callback's call, lib.cursor_moved(name) (which reads the cursor and its "
             f"line), made inline, no autocmd, 10 clients: {direct['ffi']['diff']:.2f} µs/move")
    res.note(f"cursor moves: {n} per run; plugin and baseline runs alternate, {reps} pairs, median of the "
             f"per-pair differences; baseline main-thread CPU {base['ffi']['a']:.2f} µs/move (thread clock), "
             f"{base['proc']['a']:.2f} µs/move (/proc, {1e6 / CLK_TCK / n:.2f} µs/move resolution)")


def measure(run: Run, res: Results) -> None:
    bench_cpu_per_move(run.bare, run.ed, run.poller, res, run.pick(10_000, 50_000), run.pick(3, 9))
