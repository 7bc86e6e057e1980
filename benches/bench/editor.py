"""The Neovim the benchmarks drive (the tests' Editor, matchparen off, CPU and
memory probes), and every process started here, killed at the end."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import harness
from harness import AmpEnv

STARTED: list[subprocess.Popen] = []


def kill_all() -> None:
    for p in STARTED:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # its own session: only this nvim
            except (ProcessLookupError, PermissionError):
                pass
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


class Editor(harness.Editor):
    """A headless Neovim 0.11 with (or without) the plugin, attached over RPC
    (the tests' Editor), in a HOME/XDG tree under `root`; matchparen off."""

    def __init__(self, root: Path, *, plugin: bool, setup_opts: str = "{ auto_start = true }"):
        env = AmpEnv(root, "work")
        super().__init__(env, env.workspace, setup_opts, None, plugin=plugin,
                         extra_cmds=("let g:loaded_matchparen = 1", LUA_ORPHAN_WATCH))
        STARTED.append(self.proc)
        self.root = root
        self.workspace = env.workspace
        self.context_note = ""
        self._lock = self.wait_lockfile()[1] if plugin else None

    @property
    def lock(self) -> dict | None:
        """The lockfile as it was when Neovim started (None without the plugin)."""
        return self._lock

    def ensure_context_attached(self) -> None:
        """The cursor autocmds must come from the plugin; if this build does not
        create them, attach lua/amp/context.lua the way the plugin would, and say so."""
        have = self.lua("""
            local ok, list = pcall(vim.api.nvim_get_autocmds, { group = 'AmpEditorContext', event = 'CursorMoved' })
            return ok and #list > 0
        """)
        if not have:
            self.lua("require('amp.context').attach(assert(require('amp.native').load()))")
            self.context_note = ("the plugin did not create its cursor autocmds; the benchmark attached "
                                 "lua/amp/context.lua itself")

    def main_task_ticks(self) -> int:
        fields = Path(f"/proc/{self.pid}/task/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        # fields[0] is field 3 (state): utime is field 14, stime field 15
        return int(fields[11]) + int(fields[12])

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return -1

    def heap_bytes(self) -> tuple[float, float] | None:
        """(bytes malloc has handed out and not got back, over every arena: mallinfo2
        uordblks + hblkhd; Lua heap bytes), after a full Lua GC. None without mallinfo2."""
        got = self.lua(LUA_HEAP)
        return None if got is None else (float(got[0]), float(got[1]))

    def thread_cpu_ns(self) -> float:
        """CPU time of Neovim's main thread (CLOCK_THREAD_CPUTIME_ID via LuaJIT FFI)."""
        return float(self.lua(LUA_THREAD_CPU + "return amp_bench_thread_cpu_ns()"))

    def status(self) -> dict:
        return self.lua("return require('amp').status()")

    def close(self) -> None:
        self.shutdown()


# Every Neovim started here quits by itself if this script dies without killing it.
LUA_ORPHAN_WATCH = ("lua local p = vim.uv.os_getppid(); local t = vim.uv.new_timer(); "
                    "t:start(1000, 1000, function() if vim.uv.os_getppid() ~= p then t:stop(); "
                    "vim.schedule(function() vim.cmd('qa!') end) end end)")


LUA_HEAP = r"""
collectgarbage('collect')
collectgarbage('collect')
local ok, ffi = pcall(require, 'ffi')
if not ok then return nil end
if not amp_bench_mallinfo2 then
  pcall(ffi.cdef, [[
    struct amp_bench_mallinfo2 { size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost; };
    struct amp_bench_mallinfo2 mallinfo2(void);
  ]])
  local found = pcall(function() return ffi.C.mallinfo2 end)
  if not found then return nil end
  amp_bench_mallinfo2 = ffi.C.mallinfo2
end
local m = amp_bench_mallinfo2()
return { tonumber(m.uordblks) + tonumber(m.hblkhd), collectgarbage('count') * 1024 }
"""


LUA_THREAD_CPU = r"""
if not amp_bench_thread_cpu_ns then
  local ffi = require('ffi')
  pcall(ffi.cdef, [[
    typedef struct { long tv_sec; long tv_nsec; } amp_bench_timespec;
    int clock_gettime(int clk_id, amp_bench_timespec *tp);
  ]])
  local ts = ffi.new('amp_bench_timespec')
  function amp_bench_thread_cpu_ns()
    ffi.C.clock_gettime(3, ts) -- CLOCK_THREAD_CPUTIME_ID
    return tonumber(ts.tv_sec) * 1e9 + tonumber(ts.tv_nsec)
  end
end
"""
