"""The results of a run: rows and notes as they come (printed at once), the
final table, and RESULTS.md."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
from pathlib import Path

from harness import NVIM, REPO

RESULTS_MD = REPO / "benches" / "RESULTS.md"


def log(msg: str) -> None:
    print(msg, flush=True)


class Results:
    def __init__(self):
        self.rows: list[tuple[str, str, str, str]] = []
        self.notes: list[str] = []

    def add(self, name: str, figure: str, target: str, met: bool | None) -> None:
        mark = "n/a" if met is None else ("yes" if met else "NO")
        self.rows.append((name, figure, target, mark))
        log(f"  -> {name}: {figure}  (target {target}: {mark})")

    def note(self, text: str) -> None:
        self.notes.append(text)
        log(f"  note: {text}")


def machine() -> str:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    nvim_v = subprocess.run([NVIM, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), {cpu}, Linux {platform.release()}, "
            f"{nvim_v}; load average at start {load}")


def revision() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown revision"
    return f"commit {head or '?'}{' with uncommitted changes' if dirty else ''}"


def render_table(rows: list[tuple[str, str, str, str]]) -> str:
    head = ("benchmark", "figure", "target", "met?")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(4)]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
    return "\n".join([line(head), line(tuple("-" * w for w in widths))] + [line(r) for r in rows])


def render_markdown(rows, notes, mach: str, when: str) -> str:
    out = ["# Benchmark results", "",
           f"Run {when} on {mach}.", "", f"Plugin: {revision()}.", "",
           "Reproduce: `scripts/bench` (installs the venv, builds with `cargo build --release`, then runs "
           "`.venv/bin/python benches/bench`).", "",
           "| benchmark | figure | target | met? |", "|---|---|---|---|"]
    for r in rows:
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
    if notes:
        out += ["", "Notes:", ""] + [f"- {n}" for n in notes]
    out += ["", "How each figure is measured is described at the top of `benches/bench/__init__.py`.", ""]
    return "\n".join(out)
