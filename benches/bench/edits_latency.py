"""Benchmark 12: keystroke -> CursorMoved on the main thread while an agent's
20 MiB editFiles arrive one after another, for a file shown in a window of
its own (every line changed, then a few lines changed).

The keys (j, one way, every 30 ms) go to another window; the time is
CursorMoved's vim.uv.hrtime() minus the time the key was sent
(time.monotonic_ns, the same clock), so the tokio side's load does not
count. Neovim's RSS is sampled from /proc meanwhile.
"""

from __future__ import annotations

import threading
import time

from harness import open_client

from .editor import Editor
from .report import Results
from .run import Run
from .stats import MIB, ms, percentile
from .texts import big_text, make_file

LUA_LOG_MOVES = r"""
_G.amp_moves = {}
vim.api.nvim_create_autocmd("CursorMoved", { callback = function()
  local t = _G.amp_moves
  t[#t + 1] = { vim.uv.hrtime(), vim.api.nvim_win_get_cursor(0)[1] }
end })
"""


def keys_during_big_edits(ed: Editor, res: Results, keys: int) -> None:
    width = 79
    lines = 20 * MIB // (width + 1)
    big = ed.workspace / "big.txt"
    big.write_text(big_text(lines, width), encoding="utf-8")
    keys_file = ed.workspace / "keys.txt"
    make_file(keys_file, 3000)
    ed.edit(big)
    ed.nvim.command("split " + ed.nvim.funcs.fnameescape(str(keys_file)))
    ed.lua("vim.api.nvim_win_set_cursor(0, { 1000, 0 })")
    ed.lua(LUA_LOG_MOVES)
    base_lines = big_text(lines, width).split("\n")
    rss0 = ed.rss_kib()
    for label, whole in (("every line changed", True), ("a few lines changed", False)):
        ed.lua("vim.api.nvim_win_set_cursor(0, { 1000, 0 }); _G.amp_moves = {}")
        stop = threading.Event()
        done = {"edits": 0, "failed": "", "peak": ed.rss_kib()}

        def agent(whole: bool = whole, done: dict = done, stop: threading.Event = stop) -> None:
            client = open_client(ed.lock["port"], ed.lock["authToken"], compression=None, timeout=10)
            try:
                r = 0
                while not stop.is_set():
                    r += 1
                    if whole:
                        new = big_text(lines, width, variant=r % 2)
                    else:
                        mod = list(base_lines)
                        for k in range(5):
                            j = (k * lines // 5 + 7 * r + 1) % lines
                            mod[j] = mod[j][:20] + f" edited {r}-{k} " + mod[j][35:]
                        new = "\n".join(mod)
                    got = client.call("editFile", {"path": str(big), "fullContent": new}, timeout=60)
                    if not got.get("success"):
                        done["failed"] = str(got)[:200]
                        return
                    done["edits"] += 1
            finally:
                client.close()

        def sample_rss(done: dict = done, stop: threading.Event = stop) -> None:
            while not stop.is_set():
                done["peak"] = max(done["peak"], ed.rss_kib())
                time.sleep(0.01)

        threads = [threading.Thread(target=agent, daemon=True), threading.Thread(target=sample_rss, daemon=True)]
        for th in threads:
            th.start()
        sent = []
        try:
            time.sleep(0.3)  # the first edit is on its way
            for _ in range(keys):
                sent.append(time.monotonic_ns())
                ed.nvim.request("nvim_input", "j", async_=True)
                time.sleep(0.03)
            time.sleep(0.3)
        finally:
            stop.set()
            for th in threads:
                th.join(timeout=90)
        moves = ed.lua("return _G.amp_moves")
        handled, missed = [], 0
        for i, t0 in enumerate(sent):
            at = next((t for t, line in moves if line >= 1000 + i + 1), None)
            if at is None:
                missed += 1
            else:
                handled.append((at - t0) / 1e9)
        name = f"12. keystroke -> CursorMoved while 20 MiB editFiles arrive ({label}, file shown)"
        if not handled or done["failed"]:
            res.add(name, f"not measured: {done['failed'] or 'no CursorMoved recorded'}", "p99 <= 16 ms", False)
            continue
        p50, p99 = percentile(handled, 50), percentile(handled, 99)
        extra = f", {missed} missed" if missed else ""
        res.add(name, f"p50 {ms(p50)}, p99 {ms(p99)}, max {ms(max(handled))} (n={len(handled)}{extra}); "
                f"{done['edits']} edits applied meanwhile; RSS peak +{(done['peak'] - rss0) / 1024:.0f} MiB",
                "p99 <= 16 ms (one frame)", p99 <= 16e-3 and not missed)
    res.note("12: Neovim's RSS while the edits arrive includes its undo history: each edit that changes "
             "every line keeps the 20 MiB it replaced (as for the user's own edits, up to 'undolevels')")


def measure(run: Run, res: Results) -> None:
    with run.own_editor("edits") as ed:
        keys_during_big_edits(ed, res, run.pick(100, 300))
