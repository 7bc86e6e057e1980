"""A proposal never takes the keyboard: a real Neovim TUI in tmux, keys
typed through tmux as a person types them, and a real Claude-protocol
WebSocket client sending `openDiff` at the worst moments (in insert mode;
with `:w` typed and Enter not yet pressed). The proposal waits, announced
in one line, until the user opens it; its winbar keeps its key facts first
at 80 columns."""

import json
import shutil
import time

import pytest

from conftest import wait_for
from review_helpers import TuiEditor, proposals, wait_proposals, where_the_user_is
from mcp_clients import Mcp, handshake
from test_claude import claude_lock

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")

SETUP = {"auto_start": True, "log_level": "debug", "agents": {"amp": True, "claude": True}}


@pytest.fixture
def tui(amp_env):
    (amp_env.workspace / "notes.txt").write_text("one\n")
    (amp_env.workspace / "sub").mkdir()
    (amp_env.workspace / "sub" / "x.env").write_text("A=1\n")
    editor = TuiEditor(amp_env, SETUP, amp_env.workspace / "notes.txt", width=80, height=24)
    try:
        wait_for(lambda: "one" in editor.screen(), 15, "the TUI to draw the file")
        yield editor
    finally:
        editor.close()


def open_diff(c, path, contents, tab) -> int:
    c.next_id += 1
    c.ws.send(json.dumps({"jsonrpc": "2.0", "id": c.next_id, "method": "tools/call", "params": {
        "name": "openDiff", "arguments": {"old_file_path": str(path), "new_file_path": str(path),
                                          "new_file_contents": contents, "tab_name": tab}}}))
    return c.next_id


def no_answer(c, seconds: float) -> None:
    """No answer to a request comes within `seconds` (notifications may)."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            msg = json.loads(c.ws.recv(timeout=left))
        except TimeoutError:
            return
        assert "id" not in msg, f"the agent was answered: {msg}"


def answer(c, timeout: float = 10) -> dict:
    """The next answer to a request (notifications are passed over)."""
    deadline = time.monotonic() + timeout
    while True:
        msg = json.loads(c.ws.recv(timeout=max(deadline - time.monotonic(), 0.01)))
        if "id" in msg:
            return msg


def connect_claude(tui) -> Mcp:
    _, lock, status = claude_lock(tui)
    c = Mcp(status["port"], lock["authToken"])
    handshake(c)
    # Its "connected" line first: said later, it would cover the line a test
    # looks for on the screen.
    wait_for(lambda: "amp: Claude connected" in tui.messages(), 5, "the connected notice")
    return c


def test_a_proposal_arriving_in_insert_mode_leaves_the_keys_to_the_user(tui, amp_env):
    c = connect_claude(tui)
    tui.keys("G", "o")
    tui.keys("typed ", literal=True)
    wait_for(lambda: tui.lua("return vim.api.nvim_get_mode().mode") == "i", 5, "insert mode")
    wait_for(lambda: "typed" in tui.screen(), 5, "the typed text on the screen")
    before = where_the_user_is(tui)
    # Claude's tab name says README.md; the change is to sub/x.env.
    rid = open_diff(c, amp_env.workspace / "sub" / "x.env", "A=2\n", "README.md")
    assert [(p["agent"], p["rel"], p["name"]) for p in wait_proposals(tui, 1)] == [("Claude", "sub/x.env", "README.md")]
    assert where_the_user_is(tui) == before, "the window, tab, buffer, mode and cursor are the user's"
    tui.keys("more", literal=True)
    tui.keys("Escape")
    wait_for(lambda: tui.lua("return vim.api.nvim_get_mode().mode") == "n", 5, "normal mode")
    # Told in one line where it is not typed over: once Insert mode is left.
    notice = "amp: Claude proposes a change to sub/x.env: :Amp review to open it"
    try:
        wait_for(lambda: notice in tui.screen(), 5, "the one-line notice")
    except AssertionError:
        raise AssertionError(tui.screen() + "\n---\n" + tui.messages()) from None
    assert tui.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)") == ["one", "typed more"]
    assert tui.lua("return vim.api.nvim_get_current_tabpage()") == before["tab"]
    assert "1 proposal" in tui.lua("return require('amp').statusline()")
    no_answer(c, 0.3)

    # Opened when the user asks. At 80 columns the winbar keeps its key
    # facts, and the file's real path is named (the tab name only as extra).
    tui.keys(":Amp review", literal=True)
    tui.keys("Enter")
    wait_for(lambda: ":w accepts · :q rejects · ga/gr hunk" in tui.screen(), 10, "the review's winbar")
    # The left window's winbar names the agent and the file's path.
    wait_for(lambda: "as it is · Claude proposes sub/x.env" in tui.screen(), 5, "the left winbar")
    bar = next(line for line in tui.screen().splitlines() if ":w accepts" in line)
    right = bar.split("│", 1)[1] if bar.count("│") > 1 else bar
    assert right.lstrip().startswith(":w accepts · :q rejects · ga/gr hunk"), bar
    tui.keys(":q", literal=True)
    tui.keys("Enter")
    reply = answer(c)
    assert reply["id"] == rid and reply["result"]["content"][0]["text"] == "DIFF_REJECTED", reply
    assert (amp_env.workspace / "sub" / "x.env").read_text() == "A=1\n"
    c.close()


def test_a_proposal_arriving_after_the_user_typed_w_does_not_take_the_write(tui, amp_env):
    notes = amp_env.workspace / "notes.txt"
    c = connect_claude(tui)
    tui.keys("A")
    tui.keys(" edited", literal=True)
    tui.keys("Escape")
    tui.keys(":w", literal=True)
    wait_for(lambda: tui.lua("return vim.api.nvim_get_mode().mode") == "c", 5, "the command line")
    before = where_the_user_is(tui)
    open_diff(c, amp_env.workspace / "sub" / "x.env", "A=2\n", "x.env")
    wait_proposals(tui, 1)
    assert where_the_user_is(tui) == before
    tui.keys("Enter")
    # The user's :w saved the user's file; the proposal is still waiting.
    wait_for(lambda: notes.read_text() == "one edited\n", 5, "the user's :w")
    assert tui.lua("return vim.bo.modified") is False
    no_answer(c, 0.5)
    assert len(proposals(tui)) == 1
    assert (amp_env.workspace / "sub" / "x.env").read_text() == "A=1\n"
    c.close()
