"""Hardening (issue #11): hostile file names, special files, connection and
log floods, memory budgets, main-thread fairness, symlinked lock directories,
prompts. Against a real headless Neovim and real clients, loopback only.

Every flood here is bounded in time; memory tests have an RSS watchdog.
Figures are printed: run with ``-s`` to see them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import threading
import time

import pytest

from conftest import TestTimeout as HarnessTimeout, file_uri, wait_for
from resilience_helpers import OP_TEXT, RawWs, amp_log, frame, wait_clients

PER_TEST_LIMIT = 60.0


@pytest.fixture(autouse=True)
def _hardening_time_bound(_bounded_test_time):
    def on_alarm(signum, frm):
        raise HarnessTimeout(f"hardening test exceeded {PER_TEST_LIMIT:.0f} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    remaining = signal.getitimer(signal.ITIMER_REAL)[0]
    signal.setitimer(signal.ITIMER_REAL, min(PER_TEST_LIMIT, remaining or PER_TEST_LIMIT))
    try:
        yield
    finally:
        signal.signal(signal.SIGALRM, previous)


def responsive(ed, within: float = 1.0) -> float:
    """Neovim answers an RPC request within ``within`` seconds; returns the time."""
    t = time.monotonic()
    assert ed.nvim.eval("1 + 1") == 2
    took = time.monotonic() - t
    assert took < within, f"nvim took {took:.3f} s to answer"
    return took


# --------------------------------------------------------------------------
# 1. openURI: file names are never command text; special files are refused
# --------------------------------------------------------------------------

HOSTILE_NAMES = [
    # The brief's name, and one that does run on `vim.cmd("edit " .. fnameescape(name))`:
    # fnameescape leaves "(", ")", "." and "," alone, and vim.cmd runs each line.
    "evil\nlua=vim.g.pwned=1",
    "evil\nlua=vim.api.nvim_set_var(vim.v.progname,1)",
    # shell-ish and Ex-special characters
    "sh $(touch PWNED) `touch PWNED2`; |let g:pwned=1| %#<cfile>*.txt",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=["newline-lua=", "newline-runs", "shellish"])
def test_openuri_hostile_file_name_opens_that_file_runs_nothing(editor, name):
    ws = editor.env.workspace
    target = ws / name
    target.write_text("the hostile file\n", encoding="utf-8")
    c = editor.connect()
    result = c.call("openURI", {"uri": file_uri(target)})
    assert result.get("success") is True, result
    got = editor.lua("return vim.api.nvim_buf_get_name(0)")
    assert got == str(target), f"opened {got!r}, not {str(target)!r}"
    assert editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)") == ["the hostile file"]
    assert editor.lua("return vim.g.pwned") is None
    assert editor.lua("return vim.g.nvim") is None
    assert not (ws / "PWNED").exists() and not (ws / "PWNED2").exists()
    # Only the file itself (and its buffer) exist; nothing else was created.
    assert sorted(p.name for p in ws.iterdir()) == [name]


@pytest.mark.parametrize("kind", ["fifo", "socket", "chardev"])
def test_openuri_refuses_special_files_quickly(editor, kind, tmp_path):
    if kind == "fifo":
        path = editor.env.workspace / "a pipe"
        os.mkfifo(path)
    elif kind == "socket":
        path = tmp_path / "s.sock"
        srv = socket.socket(socket.AF_UNIX)
        srv.bind(str(path))
    else:
        path = "/dev/null"
    c = editor.connect()
    before = editor.lua("return vim.api.nvim_buf_get_name(0)")
    t = time.monotonic()
    result = c.call("openURI", {"uri": file_uri(path)}, timeout=5)
    took = time.monotonic() - t
    print(f"\nopenURI of a {kind} refused in {took * 1000:.1f} ms: {result}")
    assert result.get("success") is False, result
    assert "only regular files and directories" in result.get("message", ""), result
    assert took < 1.0
    responsive(editor, 1.0)
    assert editor.lua("return vim.api.nvim_buf_get_name(0)") == before
    # A symlink to a FIFO is refused too (the target decides).
    if kind == "fifo":
        link = editor.env.workspace / "link to pipe"
        link.symlink_to(path)
        result = c.call("openURI", {"uri": file_uri(link)}, timeout=5)
        assert result.get("success") is False, result
        responsive(editor, 1.0)
    c.ping("still served")


# --------------------------------------------------------------------------
# 6. :Amp annotations refresh / toggle never wait for a provider
# --------------------------------------------------------------------------


def test_annotations_refresh_and_toggle_do_not_wait_for_a_hanging_meta(nvim_factory):
    from openctx_helpers import HttpProvider, HttpReply, open_doc, result, start

    http = HttpProvider()
    try:
        def route(method, params, settings, req):
            if method == "meta":
                # Held until released (or 20 s): the provider's meta is in flight.
                return HttpReply(body={"result": {"name": "slow", "annotations": {}}}, delay=20.0)
            return result([])

        uri = http.route("/slow", route)
        ed = start(nvim_factory, {uri: True}, timeout_ms=15000)
        open_doc(ed, "/w/hang.txt", ["a line"])
        wait_for(lambda: http.seen("/slow", "meta"), 5, "the provider's meta call")
        timings = {}
        for command in ("Amp annotations refresh", "Amp annotations toggle", "Amp annotations toggle"):
            t = time.monotonic()
            ed.nvim.command(command)
            timings[command] = took = time.monotonic() - t
            assert took < 0.5, f":{command} took {took:.3f} s while a provider's meta hangs"
        responsive(ed, 0.5)
        print(f"\n:Amp annotations refresh/toggle with a hanging meta: "
              + ", ".join(f"{k.split()[-1]} {v * 1000:.1f} ms" for k, v in timings.items()))
        # Once the provider answers, annotations are asked for again (meta is re-asked:
        # the refresh made the one in flight stale).
        http.release.set()
        wait_for(lambda: len(http.seen("/slow", "meta")) >= 2, 10, "meta asked again after the refresh")
    finally:
        http.close()
