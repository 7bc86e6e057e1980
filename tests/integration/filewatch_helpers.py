"""Helpers for test_filewatch.py: outside writers, probes and bounded waits.

An "outside process" here is the test itself writing the file the way agents
do (a temporary file renamed over the old one) or in place. Every wait has a
deadline; nothing sleeps without a bound.
"""

from __future__ import annotations

import itertools
import os
import signal
import statistics
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pynvim

from conftest import Editor
from context_helpers import WAIT

EVENT = "AmpFileChanged"
RELOAD_TARGET = 0.200  # seconds: "at once"
QUIET = 0.5  # seconds: how long "nothing happens" is watched

_tmp_names = itertools.count()

# Reload latencies measured by the tests of this run (seconds).
LATENCIES: list[float] = []


# --------------------------------------------------------------------------
# outside writers
# --------------------------------------------------------------------------


def agent_write(path: Path, text: str) -> None:
    """Writes a temporary file beside ``path`` and renames it over ``path``."""
    tmp = path.with_name(f".{path.name}.amp-test-{os.getpid()}-{next(_tmp_names)}.tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


def inplace_write(path: Path, text: str) -> None:
    """Truncates and rewrites ``path`` in place (same inode)."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def lines_of(text: str) -> list[str]:
    """The buffer lines Neovim shows for a file holding ``text``."""
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


# --------------------------------------------------------------------------
# probes installed in Neovim
# --------------------------------------------------------------------------


def install_probes(ed: Editor) -> None:
    """Records every User AmpFileChanged (``_G.fw_events``) and every
    vim.notify message (``_G.fw_notes``)."""
    ed.lua(
        """
        _G.fw_events = {}
        _G.fw_notes = {}
        vim.api.nvim_create_autocmd("User", {
          pattern = "AmpFileChanged",
          callback = function(ev)
            table.insert(_G.fw_events, vim.deepcopy(ev.data or {}))
          end,
        })
        vim.notify = function(msg, level, opts)
          table.insert(_G.fw_notes, { msg = tostring(msg), level = level or vim.NIL })
        end
        """)


def fw_events(ed: Editor, path: Path | None = None) -> list[dict]:
    evs = ed.lua("return _G.fw_events") or []
    if path is None:
        return evs
    return [e for e in evs if e.get("path") == str(path)]


def notes(ed: Editor) -> list[dict]:
    return ed.lua("return _G.fw_notes") or []


def notes_about(ed: Editor, path: Path) -> list[str]:
    """Messages naming `path` as the plugin does (relative to the cwd or ~),
    each short enough for one screen line: a longer one would stop Neovim at
    a hit-enter prompt, where no agent request is answered."""
    short = ed.lua("return vim.fn.fnamemodify(..., ':~:.')", str(path))
    about = [n["msg"] for n in notes(ed) if f"amp: {short} " in n["msg"] or f": {short} " in n["msg"]]
    for msg in about:
        # The action comes first, the rest may be cut to fit the screen.
        assert msg.startswith("amp: settle with :Amp diff/take/keep: ") or len(msg) < 80, \
            f"a message too long for one 80-column line: {msg!r}"
    return about


def wait_until(pred: Callable[[], Any], what: str, timeout: float = WAIT,
               interval: float = 0.005) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.1f} s waiting for {what}")
        time.sleep(interval)


def wait_event(ed: Editor, path: Path, key: str, since: int = 0, timeout: float = WAIT) -> dict:
    """The first AmpFileChanged for ``path`` (after the first ``since`` ones
    for it) whose data has ``key = true``."""
    def find():
        for e in fw_events(ed, path)[since:]:
            if e.get(key) is True:
                return e
        return None
    try:
        return wait_until(find, f"AmpFileChanged {key} for {path}", timeout, 0.01)
    except AssertionError as e:
        raise AssertionError(f"{e}; events: {fw_events(ed)!r}; notes: {notes(ed)!r}") from None


def wait_lines(ed: Editor, path: Path, want: list[str], timeout: float = WAIT) -> float:
    """Polls the buffer until it shows ``want``; returns the time it took."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    while True:
        got = ed.buf_lines(path)
        if got == want:
            return time.monotonic() - t0
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"buffer of {path} is {got!r}, expected {want!r} (after {timeout} s); "
                f"events: {fw_events(ed)!r}; notes: {notes(ed)!r}")
        time.sleep(0.002)


def timed_reload(ed: Editor, path: Path, text: str, writer=agent_write,
                 timeout: float = WAIT) -> float:
    """Writes ``text`` from outside and returns how long until the buffer had
    it; returns once the reload's AmpFileChanged fired."""
    want = lines_of(text)
    seen = len([e for e in fw_events(ed, path) if e.get("reloaded")])
    t0 = time.monotonic()
    writer(path, text)
    wait_lines(ed, path, want, timeout)
    latency = time.monotonic() - t0
    LATENCIES.append(latency)
    # The text is in; the reload is finished (buffer marked saved) when its
    # event fires.
    wait_until(lambda: len([e for e in fw_events(ed, path) if e.get("reloaded")]) > seen,
               f"AmpFileChanged reloaded for {path}", timeout, 0.005)
    return latency


def latency_summary(values: list[float]) -> str:
    if not values:
        return "no samples"
    ms = sorted(v * 1000 for v in values)
    return (f"{len(ms)} samples: min {ms[0]:.1f} ms, median {statistics.median(ms):.1f} ms, "
            f"max {ms[-1]:.1f} ms")


# --------------------------------------------------------------------------
# opening files and knowing the watcher sees them
# --------------------------------------------------------------------------


class Workspace:
    """Opens files in the editor and makes sure the watcher follows them.

    The watcher is re-aimed asynchronously when a buffer is loaded. To know
    it has taken a newly loaded buffer into account, a probe file (outside
    the workspace, loaded last) is rewritten until its buffer reloads: the
    watcher handles its commands in order, so by then it also watches the
    files loaded before the probe write.
    """

    def __init__(self, ed: Editor):
        self.ed = ed
        self.probe_dir = ed.env.root / "probe"
        self.probe_dir.mkdir(exist_ok=True)
        self.probe = self.probe_dir / "probe.txt"
        self.probe.write_text("probe 0\n", encoding="utf-8")
        self._n = 0
        self._probe_loaded = False
        install_probes(ed)

    def file(self, rel: str, text: str) -> Path:
        p = self.ed.env.workspace / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
        return p

    def open(self, rel: str, text: str) -> Path:
        """Writes the file, edits it (current window) and waits until watched."""
        p = self.file(rel, text)
        self.ed.edit(p)
        assert self.ed.buf_lines(p) == lines_of(text)
        self.sync()
        return p

    def sync(self, timeout: float = WAIT) -> None:
        """Returns once the watcher has seen every buffer loaded so far."""
        if not self._probe_loaded:
            # loaded hidden, so the current window stays on the test's file
            self.ed.lua(
                "local b = vim.fn.bufadd(...) vim.fn.bufload(b) vim.bo[b].buflisted = true",
                str(self.probe))
            self._probe_loaded = True
        deadline = time.monotonic() + timeout
        while True:
            self._n += 1
            text = f"probe {self._n}\n"
            agent_write(self.probe, text)
            step = time.monotonic() + 0.5
            while time.monotonic() < min(step, deadline):
                if self.ed.buf_lines(self.probe) == lines_of(text):
                    return
                time.sleep(0.005)
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"the file watcher never reloaded the probe buffer {self.probe} "
                    f"within {timeout} s (is watching on?); events: {fw_events(self.ed)!r}")


# --------------------------------------------------------------------------
# Neovim stays usable
# --------------------------------------------------------------------------


def second_channel(ed: Editor) -> pynvim.Nvim:
    """Another RPC channel to the same Neovim (fast requests like
    nvim_get_mode and nvim_input are answered even while it waits for a
    prompt)."""
    return pynvim.attach("socket", path=ed.sock)


def kill_editor(ed: Editor) -> None:
    """Kills a Neovim that no longer answers (the fixture's teardown then
    finds it gone instead of hanging on it)."""
    try:
        os.killpg(ed.proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        ed.proc.wait(timeout=5)
    except Exception:  # noqa: BLE001
        pass


def run_bounded(ed: Editor, call: Callable[[], Any], timeout: float, what: str) -> Any:
    """Runs ``call`` (which talks to ``ed.nvim``) in a thread. If it does not
    return within ``timeout`` the Neovim is blocked: its mode is reported, the
    process is killed (so the suite does not hang) and the test fails."""
    box: dict[str, Any] = {}

    def run():
        try:
            box["value"] = call()
        except BaseException as e:  # noqa: BLE001 - reported below
            box["error"] = e

    th = threading.Thread(target=run, name="amp-test-bounded", daemon=True)
    th.start()
    th.join(timeout)
    if th.is_alive():
        mode = "?"
        try:
            other = second_channel(ed)
            mode = other.api.get_mode()
            other.close()
        except Exception as e:  # noqa: BLE001
            mode = f"<unknown: {e}>"
        kill_editor(ed)
        th.join(5)
        raise AssertionError(f"Neovim did not answer {what} within {timeout} s "
                             f"(mode {mode!r}); it was killed")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def write_answering(ed: Editor, command: str = "write", answer: str = "n",
                    during_prompt: Callable[[], None] | None = None,
                    timeout: float = 5.0) -> dict:
    """Runs ``:write`` the way a user would, without letting a prompt hang the
    test: if Neovim stops to ask (mode "r?", e.g. "WARNING: The file has
    been changed since reading it!!! Do you really want to write to it"),
    ``during_prompt`` runs and ``answer`` is typed through a second channel.

    Returns ``{"prompted": bool, "result": [ok, err] of pcall(vim.cmd, command)}``.
    """
    other = second_channel(ed)
    box: dict[str, Any] = {}

    def run():
        try:
            box["result"] = ed.nvim.exec_lua(
                "local ok, err = pcall(vim.cmd, ...) return { ok, err }", command)
        except BaseException as e:  # noqa: BLE001 - reported below
            box["error"] = e

    th = threading.Thread(target=run, name="amp-test-write", daemon=True)
    th.start()
    prompted = False
    try:
        mode = None
        deadline = time.monotonic() + timeout
        while th.is_alive() and time.monotonic() < deadline:
            mode = other.api.get_mode()
            if mode.get("mode") == "r?":
                prompted = True
                break
            time.sleep(0.01)
        if th.is_alive() and not prompted:
            kill_editor(ed)
            raise AssertionError(f":{command} hung in mode {mode!r}; Neovim was killed")
        if prompted:
            if during_prompt is not None:
                try:
                    during_prompt()
                except BaseException:
                    other.api.input(answer)
                    th.join(5)
                    raise
            assert other.api.input(answer) == len(answer)
            th.join(timeout)
            if th.is_alive():
                kill_editor(ed)
                raise AssertionError(f":{command} did not take the answer {answer!r}; "
                                     "Neovim was killed")
    finally:
        other.close()
    if "error" in box:
        raise box["error"]
    return {"prompted": prompted, "result": box.get("result")}


def assert_responsive(ed: Editor, timeout: float = 2.0) -> None:
    """Neovim answers a plain request and waits for no prompt."""
    assert run_bounded(ed, lambda: ed.nvim.eval("1"), timeout, "eval('1')") == 1
    mode = ed.nvim.api.get_mode()
    assert mode == {"mode": "n", "blocking": False}, mode
