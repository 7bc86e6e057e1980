"""Reviews belong to the agent session that asked (core::review::Owner):
with Amp, Claude and Gemini attached at once, through their real
protocols, one agent can neither close nor replace another's review, and a
review whose agent went away closes with one line and can no longer be
accepted (`:w` in it writes and answers nothing)."""

import json
import time

import pytest

from conftest import wait_for
from review_helpers import messages, open_review, proposals, wait_proposals
from mcp_clients import Mcp, handshake
from test_claude import claude_lock
from mcp_clients import Events
import front_end_helpers as fh
from test_gemini import open_session

ALL = {"agents": {"amp": True, "claude": True, "gemini": True}, "review": {"edit_file": True, "timeout_ms": 60000}}


def start_all(nvim_factory, amp_env):
    return nvim_factory(**ALL, _extra_env=fh.private_tmpdir(amp_env))


def claude_client(ed) -> Mcp:
    _, lock, status = claude_lock(ed)
    c = Mcp(status["port"], lock["authToken"])
    handshake(c)
    return c


def claude_open_diff(c: Mcp, path, contents: str, tab: str) -> int:
    c.next_id += 1
    c.ws.send(json.dumps({"jsonrpc": "2.0", "id": c.next_id, "method": "tools/call", "params": {
        "name": "openDiff", "arguments": {"old_file_path": str(path), "new_file_path": str(path),
                                          "new_file_contents": contents, "tab_name": tab}}}))
    return c.next_id


def claude_reply(c: Mcp, rid: int, timeout: float = 10) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        for msg in c.notifications:
            if msg.get("id") == rid:
                return msg
        c.notifications.append(json.loads(c.ws.recv(timeout=max(deadline - time.monotonic(), 0.01))))


def agents_and_files(ed) -> list[tuple[str, str]]:
    return sorted((p["agent"], p["rel"]) for p in proposals(ed))


def test_claudes_close_all_and_tab_names_reach_only_claudes_own_reviews(nvim_factory, amp_env):
    ws = amp_env.workspace
    for name, text in (("a.txt", "A1\n"), ("g.txt", "G1\n"), ("c.txt", "C1\n")):
        (ws / name).write_text(text)
    ed = start_all(nvim_factory, amp_env)
    amp = ed.connect()
    amp_rid = amp.send_request("editFile", {"path": str(ws / "a.txt"), "fullContent": "A2\n"})
    gemini, _, _ = open_session(ed)
    events = Events(gemini)
    assert gemini.tool("openDiff", {"filePath": str(ws / "g.txt"), "newContent": "G2\n"})["result"] == {"content": []}
    wait_proposals(ed, 2)
    claude = claude_client(ed)
    # A Claude tab named as Gemini's review is Claude's own: it replaces nothing.
    named_like_gemini = claude_open_diff(claude, ws / "g.txt", "CLAUDE\n", f"[Gemini] {ws / 'g.txt'}")
    own = claude_open_diff(claude, ws / "c.txt", "C2\n", "c.txt")
    wait_proposals(ed, 4)
    assert agents_and_files(ed) == [("Amp", "a.txt"), ("Claude", "c.txt"), ("Claude", "g.txt"), ("Gemini", "g.txt")]

    # closeAllDiffTabs closes this Claude connection's reviews only.
    assert claude.tool("closeAllDiffTabs") == "CLOSED_2_DIFF_TABS"
    assert claude_reply(claude, named_like_gemini)["result"]["content"][0]["text"] == "DIFF_REJECTED"
    assert claude_reply(claude, own)["result"]["content"][0]["text"] == "DIFF_REJECTED"
    wait_for(lambda: agents_and_files(ed) == [("Amp", "a.txt"), ("Gemini", "g.txt")], 5, "the others' reviews")
    # Claude's close_tab of Gemini's name closes nothing of Gemini's.
    assert claude.tool("close_tab", {"tab_name": f"[Gemini] {ws / 'g.txt'}"}) == "TAB_CLOSED"
    assert agents_and_files(ed) == [("Amp", "a.txt"), ("Gemini", "g.txt")]
    # Gemini's proposal still holds Gemini's text, and Gemini is told the decision.
    win = open_review(ed, "g.txt (proposed by Gemini)", pick="g.txt (Gemini's proposal)")
    assert ed.lua("return vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(...), 0, -1, false)", win) == ["G2"]
    ed.lua("vim.api.nvim_set_current_win(...)", win)
    ed.nvim.command("write")
    assert events.wait("ide/diffAccepted") == {"filePath": str(ws / "g.txt"), "content": "G2\n"}
    # Amp's is still waiting too, and is Amp's to have.
    win = open_review(ed, "a.txt (proposed by Amp)")
    ed.lua("vim.api.nvim_set_current_win(...)", win)
    ed.nvim.command("write")
    assert amp.recv_response(amp_rid, timeout=10)["editFile"]["success"] is True
    assert (ws / "a.txt").read_text() == "A2\n"
    claude.close()


@pytest.mark.parametrize("agent", ["Amp", "Claude", "Gemini"])
def test_a_gone_agents_proposal_closes_with_one_line_and_w_in_it_writes_and_answers_nothing(
        nvim_factory, amp_env, agent):
    ws = amp_env.workspace
    (ws / "sub").mkdir()
    target = ws / "sub" / "x.env"
    target.write_text("A=1\n")
    ed = start_all(nvim_factory, amp_env)
    ed.lua("""_G.decided = {}
        vim.api.nvim_create_autocmd('User', { pattern = 'AmpReviewDecided', callback = function(ev)
          table.insert(_G.decided, ev.data)
        end })""")
    if agent == "Amp":
        client = ed.connect()
        client.send_request("editFile", {"path": str(target), "fullContent": "A=2\n"})
        go_away = client.close
    elif agent == "Claude":
        client = claude_client(ed)
        claude_open_diff(client, target, "A=2\n", "README.md")
        go_away = client.close
    else:
        client, _, _ = open_session(ed)
        client.tool("openDiff", {"filePath": str(target), "newContent": "A=2\n"})

        def go_away():
            assert client.status("DELETE") == 200
    win = open_review(ed, f"sub/x.env (proposed by {agent})")
    buf = ed.lua("return vim.api.nvim_win_get_buf(...)", win)
    ed.lua("vim.api.nvim_set_current_win(...)", win)
    ed.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, { 'A=3' })")
    # The user has typed `w` in the command-line window (q:) of the
    # proposal's window when the agent goes away.
    ed.nvim.input("q:")
    wait_for(lambda: ed.lua("return vim.fn.getcmdwintype()") == ":", 5, "the command-line window")
    ed.nvim.input("iw")
    go_away()
    line = f"amp: {agent} disconnected: its proposal for sub/x.env was closed (nothing written)"
    wait_for(lambda: line in messages(ed), 10, "the one line")
    assert proposals(ed) == []
    ed.nvim.input("<CR>")  # :w, in the proposal's window
    wait_for(lambda: ed.lua("return vim.fn.getcmdwintype()") == "", 5, "the command-line window to close")
    wait_for(lambda: not ed.lua("return vim.api.nvim_buf_is_valid(...)", buf), 5, "the proposal's buffer to go")
    assert "amp: this proposal was closed (disconnected): nothing was written" in messages(ed)
    assert [d.get("accepted") for d in ed.lua("return _G.decided")] == [False]
    time.sleep(0.3)
    assert target.read_text() == "A=1\n"
    assert ed.lua("return #vim.api.nvim_list_tabpages()") == 1
