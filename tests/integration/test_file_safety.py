"""Files an agent makes the editor read or open (issue #22, item 2): a procfs
or sysfs file (a regular file whose size says 0 while reading it yields
gigabytes), a FIFO or a device is refused with one line before anything
reaches Neovim's main thread, through every front-end: Amp's openURI /
readFile / editFile, Claude's openFile / openDiff, Gemini's openDiff. Files
over the cap are refused at the limit plus one byte and opened at the limit.

Each flood of memory is watched from /proc: Neovim is killed (and the test
fails) if it grows past a bound far above what a refusal costs.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from review_helpers import wait_proposals
from conftest import file_uri, wait_for
from test_hardening import RssWatchdog, responsive
from test_claude import SETUP as CLAUDE_SETUP, Mcp, claude_lock, handshake
from test_gemini import Events, open_session, start as gemini_start

MIB = 1024 * 1024
PAGEMAP = "/proc/self/pagemap"
# A refusal costs nothing; reading pagemap costs gigabytes.
WATCHDOG = 200 * MIB


@pytest.fixture(autouse=True)
def _need_procfs():
    if not os.path.exists(PAGEMAP):
        pytest.skip("no /proc/self/pagemap here")


class Guarded:
    """Watches Neovim's RSS while an agent's request runs (killing Neovim past
    WATCHDOG of growth). When the request fails or gets no answer (Neovim
    hangs reading the file), Neovim is killed at once, so that neither the
    test nor its teardown waits on it."""

    def __init__(self, ed):
        self.ed = ed
        self.growth = 0

    def __enter__(self):
        self.watchdog = RssWatchdog(self.ed.pid, limit=WATCHDOG)
        return self

    def __exit__(self, kind, value, tb):
        self.growth = self.watchdog.stop()
        if kind is not None or self.watchdog.killed:
            try:
                os.killpg(self.ed.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.ed.proc.wait(timeout=5)
            if self.watchdog.killed:
                raise AssertionError(f"Neovim grew past {WATCHDOG // MIB} MiB and was killed") from value
            if kind is TimeoutError:
                raise AssertionError("no answer within the time limit: Neovim hangs reading the file") from value
            return False
        responsive(self.ed, 2.0)
        return False


def test_amp_open_uri_read_and_edit_of_procfs_files_are_refused_at_once(nvim_factory):
    ed = nvim_factory()
    c = ed.connect()
    before = ed.lua("return vim.api.nvim_buf_get_name(0)")
    comm = f"/proc/{ed.pid}/comm"
    name = open(comm).read()
    with Guarded(ed) as guard:
        t = time.monotonic()
        opened = c.call("openURI", {"uri": file_uri(PAGEMAP)}, timeout=5)
        read = c.call("readFile", {"path": PAGEMAP}, timeout=5)
        # /proc/<nvim>/comm is writable by its owner: an edit would rename Neovim.
        edited = c.call("editFile", {"path": comm, "fullContent": "renamed\n"}, timeout=5)
        took = time.monotonic() - t
    print(f"\nopenURI/readFile/editFile of procfs files refused in {took * 1000:.0f} ms, "
          f"RSS +{guard.growth / MIB:.1f} MiB")
    assert opened["success"] is False and "procfs" in opened["message"], opened
    assert opened["message"].startswith(f"cannot open {PAGEMAP}: "), opened
    assert read["success"] is False and "procfs" in read["message"], read
    assert edited["success"] is False and "procfs" in edited["message"], edited
    for answer in (opened, read, edited):
        assert "\n" not in answer["message"], answer
    assert open(comm).read() == name, "the edit reached /proc"
    assert ed.lua("return vim.api.nvim_buf_get_name(0)") == before
    assert ed.bufnr(PAGEMAP) == -1 and ed.bufnr(comm) == -1, "a buffer was made for a procfs file"
    assert took < 3.0
    # A sysfs file says 4096 bytes and is made up as it is read: refused too.
    sysfs = "/sys/kernel/mm/transparent_hugepage/enabled"
    if os.path.exists(sysfs):
        r = c.call("openURI", {"uri": file_uri(sysfs)}, timeout=5)
        assert r["success"] is False and "sysfs" in r["message"], r
    c.ping("still served")


def test_amp_open_uri_refuses_a_symlink_to_pagemap_and_a_fifo_then_opens_a_file(nvim_factory):
    ed = nvim_factory()
    c = ed.connect()
    ws = ed.env.workspace
    link = ws / "innocent.txt"
    link.symlink_to(PAGEMAP)
    fifo = ws / "pipe.txt"
    os.mkfifo(fifo)
    with Guarded(ed):
        for path, what in ((link, "procfs"), (fifo, "FIFO")):
            r = c.call("openURI", {"uri": file_uri(path)}, timeout=5)
            assert r["success"] is False and what in r["message"], r
            r = c.call("readFile", {"path": str(path)}, timeout=5)
            assert r["success"] is False and what in r["message"], r
    plain = ws / "plain.txt"
    plain.write_text("plain\n")
    assert c.call("openURI", {"uri": file_uri(plain)})["success"] is True
    assert ed.lua("return vim.api.nvim_buf_get_name(0)") == str(plain)


def test_open_uri_opens_a_file_at_the_cap_and_refuses_one_byte_more(nvim_factory):
    ed = nvim_factory(edits={"max_file_bytes": 1000})
    c = ed.connect()
    at = ed.env.workspace / "at.txt"
    at.write_bytes(b"x" * 999 + b"\n")
    over = ed.env.workspace / "over.txt"
    over.write_bytes(b"x" * 1000 + b"\n")
    r = c.call("openURI", {"uri": file_uri(over)})
    assert r["success"] is False, r
    assert "1001 bytes" in r["message"] and "1000" in r["message"] and "edits.max_file_bytes" in r["message"], r
    assert ed.bufnr(over) == -1
    assert c.call("openURI", {"uri": file_uri(at)})["success"] is True
    assert ed.lua("return vim.api.nvim_buf_get_name(0)") == str(at)
    # A directory is still opened (a file explorer shows it).
    assert c.call("openURI", {"uri": file_uri(ed.env.workspace)})["success"] is True


def test_claude_open_file_and_open_diff_of_pagemap_are_refused(nvim_factory):
    ed = nvim_factory(**CLAUDE_SETUP)
    _, lock, status = claude_lock(ed)
    c = Mcp(status["port"], lock["authToken"])
    handshake(c)
    before = ed.lua("return vim.api.nvim_buf_get_name(0)")
    with Guarded(ed) as guard:
        t = time.monotonic()
        opened = c.request("tools/call", {"name": "openFile", "arguments": {"filePath": PAGEMAP}}, timeout=5)
        diff = c.request("tools/call", {"name": "openDiff", "arguments": {
            "old_file_path": PAGEMAP, "new_file_path": PAGEMAP, "new_file_contents": "x\n",
            "tab_name": "pagemap"}}, timeout=5)
        took = time.monotonic() - t
    print(f"\nClaude openFile/openDiff of {PAGEMAP} refused in {took * 1000:.0f} ms, "
          f"RSS +{guard.growth / MIB:.1f} MiB")
    for reply in (opened, diff):
        assert "error" in reply, reply
        assert "procfs" in reply["error"]["message"] and "\n" not in reply["error"]["message"], reply
    assert diff["error"]["message"].startswith(f"cannot review {PAGEMAP}: "), diff
    assert ed.lua("return #vim.api.nvim_list_tabpages()") == 1, "a review was opened"
    assert ed.lua("return vim.api.nvim_buf_get_name(0)") == before
    assert took < 3.0
    # The connection still answers.
    assert c.tool("getWorkspaceFolders")["folders"][0]["path"] == str(ed.env.workspace)


def test_gemini_open_diff_of_pagemap_is_rejected_without_reading_it(nvim_factory, amp_env):
    ed = gemini_start(nvim_factory, amp_env)
    c, _, _ = open_session(ed)
    events = Events(c)
    with Guarded(ed) as guard:
        t = time.monotonic()
        answer = c.tool("openDiff", {"filePath": PAGEMAP, "newContent": "x\n"})
        assert answer["result"] == {"content": []}, answer
        rejected = events.wait("ide/diffRejected", timeout=5)
        took = time.monotonic() - t
    print(f"\nGemini openDiff of {PAGEMAP} rejected in {took * 1000:.0f} ms, RSS +{guard.growth / MIB:.1f} MiB")
    assert rejected == {"filePath": PAGEMAP}
    assert ed.lua("return #vim.api.nvim_list_tabpages()") == 1
    assert took < 3.0


def test_a_review_reads_its_original_up_to_the_cap_and_refuses_one_byte_more(nvim_factory):
    """The left side of Claude's openDiff is read from disk with the review's
    cap (16 MiB, :help amp-review): a file of exactly that size is shown, one
    byte more is refused with the cap named."""
    ed = nvim_factory(**CLAUDE_SETUP)
    _, lock, status = claude_lock(ed)
    c = Mcp(status["port"], lock["authToken"])
    handshake(c)
    cap = 16 * MIB
    over = ed.env.workspace / "over.txt"
    over.write_bytes(b"x" * cap + b"\n")
    r = c.request("tools/call", {"name": "openDiff", "arguments": {
        "old_file_path": str(over), "new_file_path": str(over), "new_file_contents": "x\n",
        "tab_name": "over"}}, timeout=10)
    assert "error" in r and f"{cap + 1} bytes is more than a review shows ({cap})" in r["error"]["message"], r
    at = ed.env.workspace / "at.txt"
    at.write_bytes(b"x" * (cap - 1) + b"\n")
    c.next_id += 1
    c.ws.send(json.dumps({"jsonrpc": "2.0", "id": c.next_id, "method": "tools/call", "params": {
        "name": "openDiff", "arguments": {"old_file_path": str(at), "new_file_path": str(at),
                                          "new_file_contents": "x\n", "tab_name": "at"}}}))
    # A proposal is announced, not opened (it never takes the keyboard):
    # waited for generously, the file read and its text kept on a busy machine.
    waiting = wait_proposals(ed, 1, timeout=60)
    assert waiting[0]["rel"] == "at.txt" and waiting[0]["agent"] == "Claude", waiting


def test_claude_open_file_opens_a_file_at_its_cap_and_refuses_one_byte_more(nvim_factory):
    """Claude's openFile opens at most 32 MiB (the default of
    edits.max_file_bytes, :help amp-agent-files)."""
    ed = nvim_factory(**CLAUDE_SETUP)
    _, lock, status = claude_lock(ed)
    c = Mcp(status["port"], lock["authToken"])
    handshake(c)
    cap = 32 * MIB
    row = b"x" * 1023 + b"\n"
    over = ed.env.workspace / "over.txt"
    over.write_bytes(row * (cap // len(row)) + b"\n")
    r = c.request("tools/call", {"name": "openFile", "arguments": {"filePath": str(over)}}, timeout=10)
    assert "error" in r and f"{cap + 1} bytes, more than the {cap} bytes" in r["error"]["message"], r
    assert ed.bufnr(over) == -1
    at = ed.env.workspace / "at.txt"
    at.write_bytes(row * (cap // len(row)))
    assert c.tool("openFile", {"filePath": str(at)}) == f"Opened file: {at}"
    assert ed.lua("return vim.api.nvim_buf_get_name(0)") == str(at)
