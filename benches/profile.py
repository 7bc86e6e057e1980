#!/usr/bin/env python3
"""Profiles Neovim's main thread (perf, DWARF call graphs) during one of the
slow benchmarks, and prints where its time goes (inclusive %, selected frames).

    .venv/bin/python benches/profile.py read        # readFile, 20 MiB unsaved buffer
    .venv/bin/python benches/profile.py editfew     # editFile, 20 MiB, 5 lines changed
    .venv/bin/python benches/profile.py editall     # editFile, 20 MiB, every line changed
    .venv/bin/python benches/profile.py annotations # 5,000 OpenCtx annotations, cached refresh
    .venv/bin/python benches/profile.py moves       # cursor moves with one client

Options: --all-threads (the tokio threads too), --keep (keep perf.data; its path
is printed). Needs `perf` (kernel.perf_event_paranoid <= 2 for one's own
processes). Uses the Editor and workloads of benches/bench/; bounded to
about a minute; kills the Neovim it starts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench.annotations import LUA_ANNOTATE, PROVIDER_MANY  # noqa: E402
from bench.clients import RawClient, raw_upgrade  # noqa: E402
from bench.cursor_moves import LUA_MOVES  # noqa: E402
from bench.editor import Editor, kill_all  # noqa: E402
from bench.run import StepTimeout  # noqa: E402
from bench.stats import MIB  # noqa: E402
from bench.texts import LUA_BIG_BUFFER, big_text, five_lines_edited  # noqa: E402
from bench.ui import UiDrain  # noqa: E402
from harness import time_limit  # noqa: E402

# Frames worth reporting, per workload (inclusive share of the samples).
FRAMES = {
    "read": ["amp_core::nvim::bridge::drain", "amp_core::nvim::buffers::snapshot", "amp_core::nvim::bulk::lines_joined",
             "nvim_buf_get_lines", "lj_cf_table_concat", "lj_gc_step", "lj_str_new",
             "amp_core::core::buffer::BufferText::file_text", "amp_core::amp::protocol::encode_response",
             "serde_json::value::to_value", "tungstenite::protocol::WebSocketContext::buffer_frame"],
    "edit": ["amp_core::nvim::bridge::drain", "amp_core::nvim::buffers::snapshot", "amp_core::nvim::bulk::lines_joined",
             "amp_core::nvim::buffers::apply", "mlua::state::raw::RawLua::create_sequence_from",
             "nlua_api_nvim_buf_set_lines", "nvim_buf_set_lines", "amp_core::nvim::buffers::write",
             "buf_check_timestamp", "buf_contents_changed", "readfile", "lj_gc_step", "lj_str_new"],
    "annotations": ["amp_core::nvim::bridge::drain", "amp_core::nvim::annotations::render", "nlua_api_nvim_buf_set_var",
                    "nvim_buf_set_var", "mlua::state::raw::RawLua::create_string", "nlua_api_nvim_buf_clear_namespace",
                    "nlua_api_nvim__redraw", "update_screen", "win_update", "decor_providers_invoke_win",
                    "amp_core::nvim::annotations::on_win", "amp_core::nvim::annotations::draw_lines",
                    "nlua_api_nvim_buf_set_extmark", "ui_flush", "lj_gc_step"],
    "moves": ["nvim_exec_autocmds", "match_file_pat", "nlua_call_ref", "nlua_push_Dict",
              "amp_core::nvim::session::selection_changed", "amp_core::nvim::context::read_selection",
              "mlua::table::Table::get", "nlua_api_nvim_get_option_value", "nlua_api_nvim_get_mode",
              "tokio::sync::watch::Sender<T>::send_if_modified"],
}


def start_perf(pid: int, out: Path, all_threads: bool) -> subprocess.Popen:
    target = ["-p", str(pid)] if all_threads else ["-t", str(pid)]
    p = subprocess.Popen(["perf", "record", "-q", "--call-graph", "dwarf,32768", "-F", "499", *target,
                          "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    time.sleep(0.5)
    return p


def stop_perf(p: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=5)


def workload(ed: Editor, which: str, perf_start) -> str:
    """Prepares, starts perf (perf_start()), runs the workload; returns a summary line."""
    if which == "moves":
        f = ed.workspace / "moves.txt"
        f.write_text("first line é→😀\nsecond line\n", encoding="utf-8")
        ed.edit(f)
        ed.ensure_context_attached()
        sock, _ = raw_upgrade(ed.lock["port"], ed.lock["authToken"])
        time.sleep(0.3)
        ed.lua(LUA_MOVES, 20000)
        perf = perf_start()
        cpu_ns, _ = ed.lua(LUA_MOVES, 300000)
        stop_perf(perf)
        sock.close()
        return f"{cpu_ns / 1e3 / 300000:.2f} µs main-thread CPU per move"
    if which == "annotations":
        f = ed.workspace / "annotated.txt"
        f.write_text("".join(f"{i:05d} let value_{i} = compute(value_{i - 1}) + {i % 97}; // é→\n" for i in range(5000)),
                     encoding="utf-8")
        ed.edit(f)
        deadline = time.monotonic() + 20
        while not ed.lua("return #vim.api.nvim_buf_get_extmarks(0, vim.api.nvim_create_namespace('amp_openctx'), 0, -1, {})"):
            if time.monotonic() > deadline:
                raise RuntimeError("no annotations drawn within 20 s")
            time.sleep(0.05)
        ui = UiDrain(ed.sock)  # as benchmark 7: the screen is drawn and sent to a UI
        ed.lua(LUA_ANNOTATE, "cached", 10000)
        perf = perf_start()
        renders = [ed.lua(LUA_ANNOTATE, "cached", 10000).get("render") for _ in range(30)]
        stop_perf(perf)
        ui.close()
        return "render ms: " + ", ".join(f"{r:.1f}" for r in renders if r is not None)
    width, lines = 79, 20 * MIB // 80
    client = RawClient(ed.lock["port"], ed.lock["authToken"])
    if which == "read":
        f = ed.workspace / "unsaved.txt"
        f.write_text("small file on disk\n")
        ed.edit(f)
        ed.lua(LUA_BIG_BUFFER, lines, width)
        frames = [RawClient.frame(json.dumps({"clientRequest": {"id": f"r{r}", "readFile": {"path": str(f)}}}).encode())
                  for r in range(6)]
    else:
        g = ed.workspace / "edited.txt"
        text0 = big_text(lines, width)
        g.write_text(text0, encoding="utf-8")
        ed.edit(g)
        base = text0.split("\n")
        frames = []
        for r in range(6):
            if which == "editall":
                new = big_text(lines, width, variant=1 if r % 2 == 0 else 0)
            else:
                new = "\n".join(five_lines_edited(base, lines, r, 1))
            frames.append(RawClient.frame(json.dumps(
                {"clientRequest": {"id": f"e{r}", "editFile": {"path": str(g), "fullContent": new}}},
                ensure_ascii=False).encode("utf-8")))
    client.request(frames[0])  # warm-up
    perf = perf_start()
    cpus = []
    for frame in frames[1:]:
        c0 = ed.thread_cpu_ns()
        _, _, raw = client.request(frame)
        cpus.append((ed.thread_cpu_ns() - c0) / 1e6)
        if b'"success":true' not in raw:
            raise RuntimeError(raw[:300])
        time.sleep(0.1)
    stop_perf(perf)
    client.close()
    return "main-thread CPU ms per request: " + ", ".join(f"{c:.1f}" for c in cpus)


def report(data: Path, which: str, all_threads: bool) -> None:
    out = subprocess.run(["perf", "report", "-i", str(data), "--children", "--sort", "symbol", "-q", "--stdio",
                          "-g", "none", "--percent-limit", "0.2"], capture_output=True, text=True, timeout=300).stdout
    rows: dict[str, tuple[str, str]] = {}
    for line in out.splitlines():
        m = re.match(r"^\s*([\d.]+%)\s+([\d.]+%)\s+\[[.k]\]\s+(.*?)(?:\s{2,}|$)", line)
        if m:
            rows.setdefault(m.group(3), (m.group(1), m.group(2)))
    key = "edit" if which.startswith("edit") else which
    print(f"\ninclusive share of {'all threads' if all_threads else 'main-thread'} samples (self in brackets):")
    for frame in FRAMES[key]:
        hit = next(((n, v) for n, v in rows.items() if n == frame or n.startswith(frame + ".")), None)
        if hit:
            print(f"  {hit[1][0]:>7} ({hit[1][1]:>6})  {hit[0]}")
        else:
            print(f"      -            {frame}")
    if all_threads:
        comm = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--sort", "comm", "-n", "-g", "none",
                               "-q"], capture_output=True, text=True, timeout=120).stdout
        print("\nsamples per thread name:\n" + "\n".join("  " + l.strip() for l in comm.splitlines() if "%" in l))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("which", choices=["read", "editfew", "editall", "annotations", "moves"])
    ap.add_argument("--all-threads", action="store_true")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if shutil.which("perf") is None:
        print("perf is not installed", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="amp-profile-"))
    data = tmp / f"perf.{args.which}.data"
    opts = "{ auto_start = true }"
    if args.which == "annotations":
        opts = f"{{ auto_start = true, openctx = {{ providers = {{ ['{PROVIDER_MANY.as_uri()}'] = true }} }} }}"
    ed = None
    try:
        with time_limit(120, StepTimeout(f"{args.which}: exceeded 120 s")):
            ed = Editor(tmp / "nvim", plugin=True, setup_opts=opts)
            summary = workload(ed, args.which, lambda: start_perf(ed.pid, data, args.all_threads))
            print(summary)
            ed.close()
            ed = None
            report(data, args.which, args.all_threads)
    finally:
        kill_all()
        if args.keep:
            print(f"\nperf data: {data}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
