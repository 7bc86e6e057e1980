"""Benchmarks 3 and 4: readFile of a 20 MiB unsaved buffer, editFile with 20 MiB
of fullContent (4b: a CRLF file with a BOM, a file with a second hard link)."""

from __future__ import annotations

import json
import os
import statistics
import time

from .clients import RawClient
from .editor import LUA_THREAD_CPU, Editor
from .report import Results
from .run import Run
from .stats import CLK_TCK, MIB, ms
from .texts import LUA_BIG_BUFFER, big_text, five_lines_edited


def rpc_cpu_overhead(ed: Editor) -> float:
    """Main-thread CPU of one thread_cpu_ns() RPC (subtracted from request figures)."""
    vals = []
    for _ in range(5):
        a = ed.thread_cpu_ns()
        b = ed.thread_cpu_ns()
        vals.append(b - a)
    return statistics.median(vals)


# Where readFile's main-thread time goes: the pieces of the snapshot
# helper (src/nvim/helpers/buffers.lua) timed alone on the same buffer, and what copying the
# text straight out of Neovim's memline costs (the C functions ml_get_buf /
# ml_get_buf_len that the nvim 0.11 binary exports, called through LuaJIT's
# FFI as Rust would call them). CPU of the main thread, median of `reps`; the
# full Lua GC that collects each piece's garbage is timed separately.
LUA_SNAPSHOT_PARTS = LUA_THREAD_CPU + r"""
local reps = ...
local api = vim.api
local cpu = amp_bench_thread_cpu_ns
local buf = api.nvim_get_current_buf()
local out = {}
local function t(key, f)
  local v, g = {}, {}
  for _ = 1, reps do
    collectgarbage('collect')
    local c0 = cpu()
    local keep = f()
    local c1 = cpu()
    keep = nil
    collectgarbage('collect')
    v[#v + 1], g[#g + 1] = (c1 - c0) / 1e6, (cpu() - c1) / 1e6
  end
  table.sort(v); table.sort(g)
  out[key] = { v[math.ceil(#v / 2)], g[math.ceil(#g / 2)] }
end
t('get_lines', function() return api.nvim_buf_get_lines(buf, 0, -1, true) end)
t('get_lines_concat', function() return table.concat(api.nvim_buf_get_lines(buf, 0, -1, true), '\n') end)
local ok, ffi = pcall(require, 'ffi')
if ok and pcall(ffi.cdef, [[
  typedef struct file_buffer amp_bench_buf_T;
  amp_bench_buf_T *buflist_findnr(int nr);
  char *ml_get_buf(amp_bench_buf_T *buf, int32_t lnum);
  int ml_get_buf_len(amp_bench_buf_T *buf, int32_t lnum);
  void *memcpy(void *dst, const void *src, size_t n);
]]) and pcall(function() return ffi.C.ml_get_buf end) then
  local size = api.nvim_buf_get_offset(buf, api.nvim_buf_line_count(buf))
  t('memline_copy', function()
    local b = ffi.C.buflist_findnr(buf)
    local n = api.nvim_buf_line_count(buf)
    local dst = ffi.new('uint8_t[?]', size)
    local off = 0
    for l = 1, n do
      local len = ffi.C.ml_get_buf_len(b, l)
      ffi.C.memcpy(dst + off, ffi.C.ml_get_buf(b, l), len)
      off = off + len
      if l < n then
        dst[off] = 10
        off = off + 1
      end
    end
    return dst
  end)
end
return out
"""


def bench_big_requests(ed: Editor, res: Results, reps: int) -> None:
    width = 79  # bytes per line without the newline: 80 bytes a line
    lines = 20 * MIB // (width + 1)
    overhead = rpc_cpu_overhead(ed)

    # 3. readFile of a 20 MB unsaved buffer
    f = ed.workspace / "unsaved.txt"
    f.write_text("small file on disk\n")
    ed.edit(f)
    ed.lua(LUA_BIG_BUFFER, lines, width)
    assert ed.lua("return vim.bo.modified"), "buffer should be modified"
    size = ed.lua("return vim.fn.line2byte(vim.fn.line('$') + 1) - 1")
    client = RawClient(ed.lock["port"], ed.lock["authToken"])
    try:
        walls, cpus, ticks, firsts = [], [], [], []
        for r in range(reps):
            frame = RawClient.frame(json.dumps({"clientRequest": {"id": f"r{r}", "readFile": {"path": str(f)}}}).encode())
            c0, k0 = ed.thread_cpu_ns(), ed.main_task_ticks()
            t0, t1, raw = client.request(frame)
            firsts.append(client.first - t0 if client.first else float("nan"))
            c1, k1 = ed.thread_cpu_ns(), ed.main_task_ticks()
            body = json.loads(raw)["serverResponse"]
            got = body.get("readFile") or body.get("result") or {}
            if not got.get("success") or len(got.get("content", "").encode()) != size:
                raise RuntimeError(f"readFile failed or returned the wrong size: {str(body)[:300]}")
            walls.append(t1 - t0)
            cpus.append((c1 - c0 - overhead) / 1e9)
            ticks.append((k1 - k0) / CLK_TCK)
            time.sleep(0.05)
        wall, cpu, tick = statistics.median(walls), statistics.median(cpus), statistics.median(ticks)
        res.add(f"3. readFile, {size / MIB:.0f} MiB unsaved buffer: wall at the client",
                f"{ms(wall)} (median of {reps}; min {ms(min(walls))})", "<= 60 ms", wall <= 0.060)
        res.add("3. readFile, same: main-thread CPU",
                f"{ms(cpu)} (thread clock); {ms(tick)} (/proc ticks)", "<= 25 ms", cpu <= 0.025)
        res.note(f"readFile: the first byte of the response reached the client after {ms(statistics.median(firsts))} "
                 f"(median), the last after {ms(wall)}")
        parts = ed.lua(LUA_SNAPSHOT_PARTS, 3)
        gl, glc = parts["get_lines"], parts["get_lines_concat"]
        text = (f"readFile main thread, alternatives timed alone on the same buffer (CPU, median of 3; then the full "
                f"Lua GC of their garbage): through Lua (vim.api.nvim_buf_get_lines, a Lua string per line) "
                f"{gl[0]:.1f} ms (+{gl[1]:.1f} ms GC), with table.concat {glc[0]:.1f} ms (+{glc[1]:.1f} ms GC)")
        if "memline_copy" in parts:
            mc = parts["memline_copy"]
            text += (f"; copying the lines straight from the memline (ml_get_buf/ml_get_buf_len + memcpy via FFI, "
                     f"no Lua strings) {mc[0]:.1f} ms (+{mc[1]:.1f} ms GC)")
        res.note(text)

        # 4. editFile with 20 MB fullContent, file on disk and loaded in a buffer
        g = ed.workspace / "edited.txt"
        text0 = big_text(lines, width)
        g.write_text(text0, encoding="utf-8")
        ed.edit(g)
        base_lines = text0.split("\n")
        for label, whole in (("a few lines changed", False), ("every line changed", True)):
            walls, cpus, ticks = [], [], []
            for r in range(reps):
                if whole:
                    new = big_text(lines, width, variant=1 if r % 2 == 0 else 0)
                else:
                    new = "\n".join(five_lines_edited(base_lines, lines, r, 1))
                frame = RawClient.frame(json.dumps(
                    {"clientRequest": {"id": f"e{label[0]}{r}", "editFile": {"path": str(g), "fullContent": new}}},
                    ensure_ascii=False).encode("utf-8"))
                c0, k0 = ed.thread_cpu_ns(), ed.main_task_ticks()
                t0, t1, raw = client.request(frame)
                c1, k1 = ed.thread_cpu_ns(), ed.main_task_ticks()
                body = json.loads(raw)["serverResponse"]
                got = body.get("editFile") or body.get("result") or {}
                if not got.get("success"):
                    raise RuntimeError(f"editFile failed: {str(body)[:300]}")
                walls.append(t1 - t0)
                cpus.append((c1 - c0 - overhead) / 1e9)
                ticks.append((k1 - k0) / CLK_TCK)
                time.sleep(0.1)
            if g.read_text(encoding="utf-8") != new:
                raise RuntimeError("editFile: the file on disk does not hold the new content")
            wall, cpu, tick = statistics.median(walls), statistics.median(cpus), statistics.median(ticks)
            res.add(f"4. editFile, {len(new.encode()) / MIB:.0f} MiB fullContent ({label}): wall",
                    f"{ms(wall)} (median of {reps})", "(no target)", None)
            res.add(f"4. editFile, same ({label}): main-thread CPU",
                    f"{ms(cpu)} (thread clock); {ms(tick)} (/proc ticks)", "(no target)", None)

        # 4b. the same few-lines edit where the bytes on disk need care: a CRLF
        # file with a BOM (renamed into place), and a file with a second hard
        # link (written in place by :write, through a backup)
        for label, bom, eol, link in (("CRLF + BOM", b"\xef\xbb\xbf", "\r\n", False),
                                      ("hard link, in place", b"", "\n", True)):
            h = ed.workspace / ("crlf.txt" if not link else "linked.txt")
            h.write_bytes(bom + text0.replace("\n", eol).encode("utf-8"))
            if link:
                os.link(h, h.with_name("linked-2.txt"))
            ed.edit(h)
            walls, cpus = [], []
            for r in range(reps):
                new = eol.join(five_lines_edited(base_lines, lines, r, 3))
                frame = RawClient.frame(json.dumps(
                    {"clientRequest": {"id": f"x{label[0]}{r}", "editFile": {"path": str(h), "fullContent": new}}},
                    ensure_ascii=False).encode("utf-8"))
                c0 = ed.thread_cpu_ns()
                t0, t1, raw = client.request(frame)
                c1 = ed.thread_cpu_ns()
                got = json.loads(raw)["serverResponse"].get("editFile") or {}
                if not got.get("success"):
                    raise RuntimeError(f"editFile ({label}) failed: {str(got)[:300]}")
                walls.append(t1 - t0)
                cpus.append((c1 - c0 - overhead) / 1e9)
                time.sleep(0.1)
            if h.read_bytes() != bom + new.encode("utf-8"):
                raise RuntimeError(f"editFile ({label}): the file on disk does not hold the new bytes")
            res.add(f"4b. editFile, 20 MiB, a few lines changed ({label}): wall / main-thread CPU",
                    f"{ms(statistics.median(walls))} / {ms(statistics.median(cpus))} (median of {reps})",
                    "(no target)", None)
    finally:
        client.close()


def measure(run: Run, res: Results) -> None:
    with run.own_editor("big") as big:
        bench_big_requests(big, res, run.pick(3, 5))
