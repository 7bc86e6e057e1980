"""Benchmark 7: 5,000 OpenCtx annotations from the JS provider
benches/providers/many.mjs, run by the plugin's Node host, drawn with a UI
attached: one refresh (LUA_ANNOTATE), scrolling through the file
(LUA_SCROLL), the decoration provider's cost (LUA_ON_WIN)."""

from __future__ import annotations

import shutil
import statistics
import time
from pathlib import Path

from harness import REPO

from .editor import LUA_THREAD_CPU, Editor
from .report import Results, log
from .run import Run
from .ui import UiDrain


PROVIDER_MANY = REPO / "benches" / "providers" / "many.mjs"

# One annotation refresh of the current buffer, timed on Neovim's main thread.
#   mode "cached":  require('amp.openctx').refresh(buf) - the provider's answer
#                   for this content is in the native client's cache;
#   mode "refresh": :Amp annotations refresh - forgets metas and cached results,
#                   so the provider (Node) is called again.
# Benchmark 7 runs with a UI attached (UiDrain), so the figures include drawing
# the screen and sending it to a UI, as a user's Neovim does.


# One refresh of the annotations of the current buffer, shown in the current
# window from its first line. The namespace is cleared and the screen redrawn
# first (untimed).
# Returns CPU of the main thread (ms):
#   request: the synchronous part (the command / refresh() call: reads the
#            buffer's text, hands it to the native client);
#   render:  from the render job's first editor call until the annotations are
#            on screen: the render job, then the redraw that draws the window
#            (forced with nvim__redraw({flush = true}), as Neovim redraws when it
#            has processed the job; it is the redraw that sets the extmarks of the
#            lines in view). The start is taken by wrapping
#            vim.api.nvim_buf_get_changedtick (annotations::render's first editor
#            call; render reaches vim.api through the table at call time); the end
#            right after that redraw, done in vim.wait's condition, which Neovim
#            checks right after each event it processes, so the idle wait before
#            the answer arrives is not counted. If the wrapper was not reached,
#            render is nil and only `total` counts.
#   total:   everything between the call and the end, idle waiting included.
# and wall ms from the call to the annotations on screen.
LUA_ANNOTATE = LUA_THREAD_CPU + r"""
local mode, timeout_ms = ...
local api = vim.api
local cpu, hrtime = amp_bench_thread_cpu_ns, vim.uv.hrtime
local ns = api.nvim_create_namespace('amp_openctx')
local buf, win = api.nvim_get_current_buf(), api.nvim_get_current_win()
api.nvim_win_set_cursor(win, { 1, 0 })
api.nvim_buf_clear_namespace(buf, ns, 0, -1)
api.nvim__redraw({ flush = true })
collectgarbage('collect') -- each run pays for its own garbage only
local function marks_in_view()
  local top, bottom = vim.fn.line('w0', win) - 1, vim.fn.line('w$', win) - 1
  return #api.nvim_buf_get_extmarks(buf, ns, { top, 0 }, { bottom, -1 }, {})
end
local real = api.nvim_buf_get_changedtick
local c_mark, c_done, w_done = nil, nil, nil
local function done()
  if not c_mark then
    return false -- no answer yet
  end
  api.nvim__redraw({ flush = true })
  local c, w = cpu(), hrtime()
  if marks_in_view() > 0 then
    c_done, w_done = c, w
    return true
  end
  return false
end
local c0, w0 = cpu(), hrtime()
if mode == 'cached' then
  require('amp.openctx').refresh(buf)
else
  vim.cmd('Amp annotations refresh')
end
local c1 = cpu()
api.nvim_buf_get_changedtick = function(b)
  c_mark = c_mark or cpu()
  return real(b)
end
local ok, waited = pcall(vim.wait, timeout_ms, done, 50)
api.nvim_buf_get_changedtick = real
if not (ok and waited) then
  return { ok = false }
end
-- What the screen shows on the window's first line (the buffer's first line
-- has three annotations).
local row = vim.fn.screenpos(win, vim.fn.line('w0', win), 1).row
local cells = {}
for col = 1, vim.o.columns do
  cells[col] = vim.fn.screenstring(row, col)
end
local listed = vim.b[buf].amp_openctx_annotations
return {
  ok = true,
  request = (c1 - c0) / 1e6,
  render = c_mark and (c_done - c_mark) / 1e6 or nil,
  total = (c_done - c0) / 1e6,
  wall = (w_done - w0) / 1e6,
  extmarks = #api.nvim_buf_get_extmarks(buf, ns, 0, -1, {}),
  in_view = marks_in_view(),
  on_screen = table.concat(cells):find('benchmark annotation', 1, true) ~= nil,
  listed = type(listed) == 'string' and #listed or nil,
}
"""


# Scrolls the current window through the whole buffer, page by page (CTRL-F),
# with the redraw after each page forced and timed: main-thread CPU (ms) in
# total and per page, and the extmarks there are at the end.
LUA_SCROLL = LUA_THREAD_CPU + r"""
local api = vim.api
local cpu = amp_bench_thread_cpu_ns
local ns = api.nvim_create_namespace('amp_openctx')
local win, count = api.nvim_get_current_win(), api.nvim_buf_line_count(0)
api.nvim_win_set_cursor(win, { 1, 0 })
api.nvim__redraw({ flush = true })
collectgarbage('collect')
local per_page = {}
local c0 = cpu()
while vim.fn.line('w$', win) < count do
  local c = cpu()
  vim.cmd('normal! \6')
  api.nvim__redraw({ flush = true })
  per_page[#per_page + 1] = (cpu() - c) / 1e6
end
local total = (cpu() - c0) / 1e6
table.sort(per_page)
return {
  pages = #per_page,
  total = total,
  median = per_page[math.ceil(#per_page / 2)],
  max = per_page[#per_page],
  extmarks = #api.nvim_buf_get_extmarks(0, ns, 0, -1, {}),
}
"""


# The decoration provider's cost in a window whose buffer has no annotations
# (a 50-line scratch buffer made current): the native on_win called directly
# n times (µs per call), and full redraws of the window (nvim__redraw, valid =
# false) with the provider set, with a Lua on_win that returns false at once
# instead (what Neovim's call of a provider costs) and with none, interleaved
# `reps` times (µs per redraw). nil when the library has no openctx_on_win.
LUA_ON_WIN = LUA_THREAD_CPU + r"""
local n, reps = ...
local api = vim.api
local cpu = amp_bench_thread_cpu_ns
local on_win = require('amp.native').load().openctx_on_win
if type(on_win) ~= 'function' then
  return nil
end
local ns = api.nvim_create_namespace('amp_openctx')
local annotated = api.nvim_get_current_buf()
vim.cmd('enew')
local plain, win = api.nvim_get_current_buf(), api.nvim_get_current_win()
local lines = {}
for i = 1, 50 do
  lines[i] = ('plain line %d without annotations'):format(i)
end
api.nvim_buf_set_lines(plain, 0, -1, false, lines)
local function calls(buf)
  local c = cpu()
  for _ = 1, n do
    on_win('win', win, buf, 0, 49)
  end
  return (cpu() - c) / n / 1e3
end
local function redraws(count)
  local c = cpu()
  for _ = 1, count do
    api.nvim__redraw({ win = win, valid = false, flush = true })
  end
  return (cpu() - c) / count / 1e3
end
calls(plain)
local function lua_noop()
  return false
end
local out = { call_plain = calls(plain), call_drawn = calls(annotated), with = {}, noop = {}, without = {} }
for _ = 1, reps do
  api.nvim_set_decoration_provider(ns, { on_win = on_win })
  out.with[#out.with + 1] = redraws(math.floor(n / 10))
  api.nvim_set_decoration_provider(ns, { on_win = lua_noop })
  out.noop[#out.noop + 1] = redraws(math.floor(n / 10))
  api.nvim_set_decoration_provider(ns, {})
  out.without[#out.without + 1] = redraws(math.floor(n / 10))
end
api.nvim_set_decoration_provider(ns, { on_win = on_win })
vim.cmd('buffer ' .. annotated .. ' | bwipeout! ' .. plain)
return out
"""


def bench_annotations(res: Results, tmp: Path, reps: int) -> None:
    label = "7. 5,000 annotations rendered on one buffer"
    if shutil.which("node") is None:
        res.add(label, "not measured: node (OpenCtx JS providers) is not installed", "<= 10 ms", None)
        return
    uri = PROVIDER_MANY.as_uri()
    ed = Editor(tmp / "annotations", plugin=True,
                setup_opts=f"{{ auto_start = true, openctx = {{ providers = {{ ['{uri}'] = true }} }} }}")
    ui = UiDrain(ed.sock)
    try:
        f = ed.workspace / "annotated.txt"
        f.write_text("".join(f"{i:05d} let value_{i} = compute(value_{i - 1}) + {i % 97}; // é→\n" for i in range(5000)),
                     encoding="utf-8")
        t0 = time.perf_counter()
        ed.edit(f)  # BufReadPost asks the provider (starts the Node host)
        count_marks = "return #vim.api.nvim_buf_get_extmarks(0, vim.api.nvim_create_namespace('amp_openctx'), 0, -1, {})"
        first = None
        while time.perf_counter() - t0 < 20:
            if ed.lua(count_marks):
                first = time.perf_counter() - t0
                break
            time.sleep(0.02)
        if first is None:
            res.add(label, "not measured: no annotation was drawn within 20 s of opening the file", "<= 10 ms", False)
            return
        lines = ed.lua("return vim.api.nvim_buf_line_count(0)")
        size = ed.lua("return vim.api.nvim_buf_get_offset(0, vim.api.nvim_buf_line_count(0))")
        screen = ed.lua("return { vim.o.columns, vim.o.lines, vim.api.nvim_win_get_height(0) }")
        ed.lua(LUA_ANNOTATE, "cached", 10000)  # warm-up
        ed.lua("collectgarbage('collect')")
        rss0 = ed.rss_kib()
        runs: dict[str, list[dict]] = {"cached": [], "refresh": []}
        scrolls: dict[str, list[dict]] = {"first": [], "again": []}
        for r in range(reps):
            for mode in ("cached", "refresh"):
                got = ed.lua(LUA_ANNOTATE, mode, 10000)
                if not got.get("ok"):
                    raise RuntimeError(f"{mode}: the annotations were not drawn again within 10 s")
                if not got.get("on_screen"):
                    raise RuntimeError(f"{mode}: the annotations are not on the screen: {got}")
                runs[mode].append(got)
                log(f"  {mode}: " + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in got.items()))
                time.sleep(0.05)
            # After a fresh answer: scrolling draws the lines as they come into
            # view; the second time through they are all drawn.
            for when in ("first", "again"):
                got = ed.lua(LUA_SCROLL)
                scrolls[when].append(got)
                log(f"  scroll, {when}: " + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                                      for k, v in got.items()))
        ed.lua("collectgarbage('collect')")
        rss_growth = (ed.rss_kib() - rss0) / 1024
        med = lambda mode, key: statistics.median(x[key] for x in runs[mode])
        marks = runs["cached"][-1]["extmarks"]
        in_view = runs["cached"][-1]["in_view"]
        listed = runs["cached"][-1].get("listed")
        have_render = all(x.get("render") is not None for x in runs["cached"] + runs["refresh"])
        if have_render:
            render = med("cached", "render")
            res.add(f"{label}: main-thread CPU from the answer to the annotations on screen (answer cached)",
                    f"{render:.2f} ms (median of {reps}; provider called again: {med('refresh', 'render'):.2f} ms)",
                    "<= 10 ms", render <= 10.0)
        req_c, req_r = med("cached", "request"), med("refresh", "request")
        res.add("7. same, main thread per refresh: request side + render",
                (f"{req_c + med('cached', 'render'):.2f} ms cached ({req_c:.2f} ms request side); "
                 f"{req_r + med('refresh', 'render'):.2f} ms with :Amp annotations refresh ({req_r:.2f} ms request side)")
                if have_render else f"total incl. idle waiting {med('cached', 'total'):.2f} ms cached, "
                                    f"{med('refresh', 'total'):.2f} ms refreshed",
                "(reference)" if have_render else "<= 10 ms", None if have_render else med("cached", "total") <= 10)
        res.add("7. same, wall: refresh -> annotations on screen",
                f"{med('cached', 'wall'):.1f} ms cached, {med('refresh', 'wall'):.1f} ms provider called again "
                f"(median of {reps}); first drawing after opening the file {first * 1e3:.0f} ms (Node host start)",
                "(reference)", None)
        smed = lambda when, key: statistics.median(x[key] for x in scrolls[when])
        pages = scrolls["first"][-1]["pages"]
        res.add("7. same, scrolling through the whole file page by page (CTRL-F + redraw), main-thread CPU",
                f"after a new answer {smed('first', 'total'):.1f} ms for {pages} pages "
                f"({smed('first', 'median'):.3f} ms per page, median; max {smed('first', 'max'):.3f}); "
                f"through again, all drawn: {smed('again', 'total'):.1f} ms "
                f"({smed('again', 'median'):.3f} ms per page) (medians of {reps})",
                "(reference)", None)
        on_win = ed.lua(LUA_ON_WIN, 20000, 5)
        if on_win is not None:
            redraw = {k: statistics.median(on_win[k]) for k in ("with", "noop", "without")}
            res.add("7. decoration provider per redraw of a window without annotations",
                    f"on_win {on_win['call_plain']:.2f} µs per call (a buffer with annotations, all drawn: "
                    f"{on_win['call_drawn']:.2f} µs); full redraw of a 50-line window {redraw['with']:.1f} µs with "
                    f"the provider, {redraw['noop']:.1f} µs with a Lua on_win returning false, {redraw['without']:.1f} "
                    f"µs with none (medians of 5 interleaved runs)",
                    "(reference)", None)
        res.note(f"annotations: provider benches/providers/many.mjs (a JS module run by the plugin's Node host) returns "
                 f"5,000 annotations for a {lines}-line, {size / 1024:.0f} KiB buffer (4,853 annotated lines, 2-3 "
                 f"titles on a few); a UI of {screen[0]}x{screen[1]} is attached (its output read and dropped), the "
                 f"window shows {screen[2]} lines; {in_view} extmarks in view after a refresh, {marks} in the buffer"
                 + (f"; b:amp_openctx_annotations is {listed / 1024:.0f} KiB of JSON" if listed is not None else "")
                 + f"; RSS after {2 * reps} refreshes and a Lua GC: {rss_growth:+.1f} MiB")
        res.note("annotations: 'render' = main-thread CPU from the render job's first editor call (a wrapper on "
                 "vim.api.nvim_buf_get_changedtick) until the annotations are on screen: the job, then the redraw "
                 "Neovim does after it (forced with nvim__redraw({flush = true}) in vim.wait's condition, checked "
                 "right after each processed event), which draws the lines in view and sends the screen to the UI; "
                 "'request side' = the synchronous refresh()/:Amp annotations refresh call. Idle waiting for the "
                 "provider is not counted")
    finally:
        ui.close()
        ed.close()


def measure(run: Run, res: Results) -> None:
    bench_annotations(res, run.tmp, run.pick(3, 5))
