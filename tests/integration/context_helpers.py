"""Helpers for the editor-context and :Amp command tests.

``Recorder`` reads every frame a real WebSocket client receives on a
background thread and time-stamps it on arrival, so a test can type real
keys into Neovim and then wait (always with a timeout) for the notification
it expects, count notifications, or measure the gaps between them.

Only this file, test_context.py and test_commands.py use it; conftest.py
stays as it is.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from conftest import Client, Editor, file_uri

WAIT = 5.0  # seconds: the bound on every "this must arrive" wait
QUIET = 0.3  # seconds: how long "nothing more arrives" is watched


# --------------------------------------------------------------------------
# notifications as received
# --------------------------------------------------------------------------


@dataclass
class Note:
    """One serverNotification: its name, payload, dialect and arrival time."""

    t: float
    name: str
    payload: Any
    dialect: str  # "flat" ({"serverNotification": {name: …}}) or "wrapped" ({"method": {name: …}})
    index: int  # position among all frames the client received

    def __repr__(self) -> str:
        return f"<{self.index} {self.dialect} {self.name} {json.dumps(self.payload, ensure_ascii=False)[:400]}>"


def parse_note(msg: dict, t: float, index: int) -> Note | None:
    inner = msg.get("serverNotification")
    if not isinstance(inner, dict) or len(inner) != 1:
        return None
    (name, payload), = inner.items()
    if name == "method" and isinstance(payload, dict) and len(payload) == 1:
        (name, payload), = payload.items()
        return Note(t, name, payload, "wrapped", index)
    return Note(t, name, payload, "flat", index)


class Recorder:
    """Owns the reading side of ``client.ws``: do not call the Client's own
    receive methods (recv_response, request, call) while a Recorder runs."""

    def __init__(self, client: Client):
        self.client = client
        self.frames: list[tuple[float, Any]] = []  # (arrival time, parsed JSON or raw)
        self.closed: BaseException | None = None
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="amp-test-recorder", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                raw = self.client.ws.recv()
            except BaseException as e:  # closed by the server or by the test's teardown
                with self._cond:
                    self.closed = e
                    self._cond.notify_all()
                return
            t = time.monotonic()
            try:
                msg = json.loads(raw)
            except (TypeError, ValueError):
                msg = {"__unparsable__": raw if isinstance(raw, str) else repr(raw)}
            with self._cond:
                self.frames.append((t, msg))
                self._cond.notify_all()

    # -- reading ---------------------------------------------------------
    def mark(self) -> int:
        """Index of the next frame to arrive."""
        with self._cond:
            return len(self.frames)

    def notes(self, since: int = 0, name: str | None = None) -> list[Note]:
        with self._cond:
            frames = list(enumerate(self.frames))[since:]
        out = []
        for i, (t, msg) in frames:
            note = parse_note(msg, t, i) if isinstance(msg, dict) else None
            if note is not None and (name is None or note.name == name):
                out.append(note)
        return out

    def wait_note(self, pred: Callable[[Note], bool], what: str, since: int = 0,
                  timeout: float = WAIT, name: str | None = None) -> Note:
        """The first notification at or after frame ``since`` for which ``pred`` holds."""
        deadline = time.monotonic() + timeout
        seen = since
        while True:
            with self._cond:
                frames = list(enumerate(self.frames))[seen:]
                closed = self.closed
            for i, (t, msg) in frames:
                note = parse_note(msg, t, i) if isinstance(msg, dict) else None
                if note is not None and (name is None or note.name == name) and pred(note):
                    return note
            seen += len(frames)
            remaining = deadline - time.monotonic()
            if remaining <= 0 or closed is not None:
                got = self.notes(since)
                raise AssertionError(
                    f"{'connection closed' if closed is not None else f'timed out after {timeout} s'} "
                    f"waiting for {what}; received since frame {since} "
                    f"({len(got)} notifications, last 12 shown): {got[-12:]!r}"
                    + (f"; closed: {closed!r}" if closed is not None else ""))
            with self._cond:
                if len(self.frames) == seen and self.closed is None:
                    self._cond.wait(min(remaining, 0.1))

    def wait_payload(self, name: str, payload: Any, since: int = 0, timeout: float = WAIT,
                     dialect: str | None = None) -> Note:
        """The first ``name`` notification whose payload equals ``payload`` exactly."""
        return self.wait_note(
            lambda n: n.payload == payload and (dialect is None or n.dialect == dialect),
            f"{name} {json.dumps(payload, ensure_ascii=False)}"
            + (f" ({dialect} dialect)" if dialect else ""),
            since=since, timeout=timeout, name=name)

    def wait_frames(self, count: int, timeout: float = WAIT) -> list[Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.frames) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.closed is not None:
                    raise AssertionError(
                        f"expected {count} frames within {timeout} s, got {len(self.frames)}: "
                        f"{[m for _, m in self.frames]!r}; closed: {self.closed!r}")
                self._cond.wait(min(remaining, 0.1))
            return [m for _, m in self.frames]

    def response(self, id: str, timeout: float = WAIT) -> dict:
        """The inner serverResponse with this id."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            with self._cond:
                frames = self.frames[seen:]
                closed = self.closed
            for _, msg in frames:
                inner = msg.get("serverResponse") if isinstance(msg, dict) else None
                if isinstance(inner, dict) and inner.get("id") == id:
                    return inner
            seen += len(frames)
            remaining = deadline - time.monotonic()
            if remaining <= 0 or closed is not None:
                raise AssertionError(f"no serverResponse id {id!r} within {timeout} s; frames: "
                                     f"{[m for _, m in self.frames][-12:]!r}; closed: {closed!r}")
            with self._cond:
                if len(self.frames) == seen and self.closed is None:
                    self._cond.wait(min(remaining, 0.1))

    def send_json(self, obj: Any) -> None:
        self.client.send_json(obj)


def connect_recorder(ed: Editor, **kw) -> Recorder:
    """A real client (closed by the editor's teardown) whose frames are recorded."""
    return Recorder(ed.connect(**kw))


# --------------------------------------------------------------------------
# expected payloads
# --------------------------------------------------------------------------


def u16(s: str) -> int:
    """Length of ``s`` in UTF-16 code units."""
    return len(s.encode("utf-16-le")) // 2


def rng(sl: int, sc: int, el: int, ec: int) -> dict:
    return {"startLine": sl, "startCharacter": sc, "endLine": el, "endCharacter": ec}


def cursor_payload(path: str | Path, line: int, character: int, line_text: str) -> dict:
    """selectionDidChange for a cursor: empty range, content = the whole line."""
    return {"uri": file_uri(path),
            "selections": [{"range": rng(line, character, line, character), "content": line_text}]}


def selection_payload(path: str | Path, *regions: tuple[dict, str]) -> dict:
    return {"uri": file_uri(path),
            "selections": [{"range": r, "content": c} for r, c in regions]}


def visible_payload(*paths: str | Path) -> dict:
    return {"uris": [file_uri(p) for p in paths]}


# --------------------------------------------------------------------------
# the editor side
# --------------------------------------------------------------------------


def write(ed: Editor, rel: str, text: str) -> Path:
    p = ed.env.workspace / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


def feed(ed: Editor, keys: str) -> None:
    """Real keystrokes (nvim_input); all of them must be accepted."""
    written = ed.nvim.input(keys)
    assert written == len(keys.encode("utf-8")), f"nvim_input accepted {written} of {keys!r}"


def wait_nvim(ed: Editor, expr: str, expected: Any, timeout: float = WAIT) -> None:
    """Waits until the Vim expression ``expr`` evaluates to ``expected``."""
    deadline = time.monotonic() + timeout
    while True:
        value = ed.nvim.eval(expr)
        if value == expected:
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"{expr} is {value!r}, expected {expected!r} (after {timeout} s)")
        time.sleep(0.01)


def wait_mode(ed: Editor, mode: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while True:
        got = ed.nvim.api.get_mode()
        if got.get("mode") == mode and not got.get("blocking"):
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"mode is {got!r}, expected {mode!r} (after {timeout} s)")
        time.sleep(0.01)


def install_event_log(ed: Editor, patterns: list[str]) -> None:
    """User autocmds that append {match, data} to the global _G.amp_test_events."""
    ed.lua(
        """
        _G.amp_test_events = {}
        vim.api.nvim_create_autocmd("User", {
          pattern = ...,
          callback = function(ev)
            table.insert(_G.amp_test_events, { match = ev.match, data = ev.data or vim.NIL })
          end,
        })
        """, patterns)


def events(ed: Editor) -> list[dict]:
    return ed.lua("return _G.amp_test_events")


def wait_event(ed: Editor, match: str, pred: Callable[[dict], bool] = lambda e: True,
               since: int = 0, timeout: float = WAIT) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        evs = events(ed)
        for e in evs[since:]:
            if e["match"] == match and pred(e):
                return e
        if time.monotonic() >= deadline:
            raise AssertionError(f"no User {match} event within {timeout} s; events: {evs!r}")
        time.sleep(0.02)
