"""The Claude Code front-end (agents.claude): its lockfile, its MCP server
over WebSocket, the selection it pushes from the editor's one published
state, and the real `claude` binary attached to a real Neovim."""

import json
import os
import stat
import time

import pytest
from websockets.exceptions import InvalidStatus, InvalidHandshake
from websockets.sync.client import connect

from conftest import dead_pid, wait_for
import agents_helpers as ah
import front_end_helpers as fh
from mcp_clients import Mcp, handshake
from review_helpers import open_review, wait_proposals, where_the_user_is, winbar

SETUP = {"agents": {"amp": True, "claude": True}}


def claude_status(ed):
    return fh.agent_status(ed, "claude")


def claude_lock(ed):
    return fh.wait_discovery_file(
        ed, "claude", "port", lambda status: ed.env.home / ".claude" / "ide" / f"{status['port']}.lock",
        "the Claude server", "the Claude lockfile")


def test_claude_is_off_by_default(nvim_factory):
    ed = nvim_factory()
    assert claude_status(ed) == {"enabled": False}
    assert not (ed.env.home / ".claude" / "ide").exists()


def test_claude_alone_without_amp(nvim_factory, amp_env):
    ed = nvim_factory(agents={"amp": False, "claude": True}, _wait=False)
    path, lock, status = claude_lock(ed)
    c = Mcp(status["port"], lock["authToken"])
    handshake(c)
    assert c.tool("getWorkspaceFolders")["folders"][0]["path"] == str(amp_env.workspace)
    c.close()
    assert ed.lua("return require('amp').status().agents.amp.enabled") is False
    assert ed.own_lockfiles() == {}


def test_claude_clients_are_told_when_the_server_stops(nvim_factory):
    from websockets.exceptions import ConnectionClosed
    ed = nvim_factory(**SETUP)
    path, lock, status = claude_lock(ed)
    c = Mcp(status["port"], lock["authToken"])
    handshake(c)
    wait_for(lambda: claude_status(ed)["clients"] == 1, 5, "one Claude client")
    ed.nvim.command("Amp stop")
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            c.ws.recv(timeout=5)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
    assert not path.exists()


def test_claude_lockfile_follows_cd_and_goes_on_exit(nvim_factory, amp_env):
    ed = nvim_factory(**SETUP)
    path, lock, status = claude_lock(ed)
    assert set(lock) == {"pid", "workspaceFolders", "ideName", "transport", "authToken"}
    assert lock["pid"] == ed.pid and lock["transport"] == "ws"
    assert lock["workspaceFolders"] == [str(amp_env.workspace)]
    assert "Neovim" in lock["ideName"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    # The Amp token and the Claude token are different secrets.
    assert lock["authToken"] != ed.lock["authToken"]
    # Terminals Neovim starts find this server.
    assert ed.lua("return vim.env.CLAUDE_CODE_SSE_PORT") == str(status["port"])
    assert "127.0.0.1" in ed.lua("return vim.env.no_proxy")
    other = amp_env.root / "elsewhere"
    other.mkdir()
    ed.nvim.command("cd " + str(other))
    wait_for(lambda: json.loads(path.read_text())["workspaceFolders"] == [str(other)], 10, "the lockfile to follow :cd")
    assert ed.quit() == 0
    assert not path.exists()


def test_claude_config_dir_and_stale_lockfiles(nvim_factory, amp_env):
    config = amp_env.root / "claude config"
    ide = config / "ide"
    ide.mkdir(parents=True)
    stale = ide / "1.lock"
    stale.write_text(json.dumps({"pid": dead_pid(), "transport": "ws"}))
    alive = ide / "2.lock"
    alive.write_text(json.dumps({"pid": os.getpid(), "transport": "ws"}))
    other = ide / "notes.json"
    other.write_text(json.dumps({"pid": dead_pid()}))
    ed = nvim_factory(**SETUP, _extra_env={"CLAUDE_CONFIG_DIR": str(config)})
    status = wait_for(lambda: (claude_status(ed) or {}).get("port") and claude_status(ed), 10, "the Claude server")
    path = ide / f"{status['port']}.lock"
    assert status["lockfile"] == str(path)
    wait_for(path.exists, 10, "the lockfile under CLAUDE_CONFIG_DIR")
    assert not stale.exists() and alive.exists() and other.exists()
    assert not (amp_env.home / ".claude").exists()


def test_claude_handshake_needs_the_header_token(nvim_factory):
    ed = nvim_factory(**SETUP)
    _, lock, status = claude_lock(ed)
    port = status["port"]
    # No token, a wrong one, or the token in Amp's query parameter: no session.
    for token in (None, "wrong"):
        try:
            c = Mcp(port, token)
        except (InvalidStatus, InvalidHandshake):
            continue
        with pytest.raises(Exception):
            c.request("initialize", {"protocolVersion": "2025-11-25"}, timeout=3)
    # A foreign Origin is refused before anything else.
    with pytest.raises(InvalidStatus):
        connect(f"ws://127.0.0.1:{port}/", additional_headers={"x-claude-code-ide-authorization": lock["authToken"]},
                origin="https://evil.test", subprotocols=["mcp"], proxy=None, open_timeout=5)
    c = Mcp(port, lock["authToken"])
    assert c.ws.subprotocol == "mcp"
    init = handshake(c)
    assert init["result"]["protocolVersion"] == "2025-11-25"
    wait_for(lambda: claude_status(ed)["clients"] == 1, 5, "one Claude client")
    c.close()


def test_claude_tools_answer_from_live_buffers(nvim_factory, amp_env):
    f = amp_env.workspace / "a.txt"
    f.write_text("héllo 😀 wörld\nsecond line\nthird\n")
    ed = nvim_factory(**SETUP)
    _, lock, status = claude_lock(ed)
    c = Mcp(status["port"], lock["authToken"])
    handshake(c)
    names = {t["name"] for t in c.request("tools/list")["result"]["tools"]}
    assert {"getDiagnostics", "getCurrentSelection", "getOpenEditors", "openFile", "close_tab",
            "closeAllDiffTabs", "checkDocumentDirty", "saveDocument", "getWorkspaceFolders"} <= names

    assert c.tool("openFile", {"filePath": str(f)}) == f"Opened file: {f}"
    wait_for(lambda: ed.nvim.current.buffer.name == str(f), 5, "openFile to show the file")
    # A diagnostic after the emoji: byte column 11 is UTF-16 character 8.
    ed.lua("""
      local ns = vim.api.nvim_create_namespace("claude-test")
      vim.diagnostic.set(ns, 0, { { lnum = 0, col = 11, end_lnum = 0, end_col = 12, severity = 1,
                                     message = "bad thing", source = "test" } })
    """)
    diags = c.tool("getDiagnostics", {"uri": "file://" + str(f)})
    assert diags == [{"uri": "file://" + str(f), "diagnostics": [{
        "message": "bad thing", "severity": "Error", "source": "test",
        "range": {"start": {"line": 0, "character": 8}, "end": {"line": 0, "character": 9}}}]}]
    assert c.tool("getDiagnostics")[0]["uri"] == "file://" + str(f)

    tabs = c.tool("getOpenEditors")["tabs"]
    assert tabs == [{"uri": "file://" + str(f), "isActive": True, "label": "a.txt", "languageId": "text",
                     "isDirty": False}] or tabs[0]["label"] == "a.txt"
    assert c.tool("checkDocumentDirty", {"filePath": str(f)})["isDirty"] is False
    ed.lua("vim.api.nvim_buf_set_lines(0, 2, 3, false, { 'THIRD' })")
    assert c.tool("checkDocumentDirty", {"filePath": str(f)})["isDirty"] is True
    assert c.tool("saveDocument", {"filePath": str(f)})["saved"] is True
    assert f.read_text().splitlines()[2] == "THIRD"
    assert c.tool("checkDocumentDirty", {"filePath": str(amp_env.workspace / "nope")})["success"] is False
    folders = c.tool("getWorkspaceFolders")
    assert folders["folders"][0]["path"] == str(amp_env.workspace)

    # Visual selection of line 2 (0-based 1) -> selection_changed, 0-based lines.
    ed.nvim.input("jVj")
    # (Under load the pusher may also see the state between "V" and "j".)
    sel = c.wait_notification("selection_changed",
                              lambda p: not p["selection"]["isEmpty"] and p["selection"]["end"]["line"] == 2)
    assert sel["filePath"] == str(f)
    assert sel["selection"]["start"]["line"] == 1 and sel["selection"]["end"]["line"] == 2
    assert sel["text"].startswith("second line\nTHIRD")
    current = c.tool("getCurrentSelection")
    assert current["success"] and current["selection"]["start"]["line"] == 1
    ed.nvim.input("<Esc>")
    latest = wait_for(lambda: c.tool("getLatestSelection"), 5, "latest selection")
    assert latest["text"].startswith("second line")

    # :Amp ref sends at_mentioned (0-based, end inclusive).
    ed.nvim.command("2,3Amp ref")
    mention = c.wait_notification("at_mentioned")
    assert mention == {"filePath": str(f), "lineStart": 1, "lineEnd": 2}
    # openFile with startText/endText selects that text.
    c.tool("openFile", {"filePath": str(f), "startText": "second", "endText": "line"})
    assert c.wait_notification("selection_changed", lambda p: p["text"] == "second line")["selection"]["start"] \
        == {"line": 1, "character": 0}
    ed.nvim.input("<Esc>")
    ed.nvim.command("Amp status")
    assert f"claude on :{status['port']}, 1 client" in ed.messages()
    ed.nvim.command("checkhealth amp")
    health = "\n".join(ed.nvim.current.buffer[:])
    assert f"claude: port {status['port']}, 1 client" in health, health
    c.close()


@pytest.mark.skipif(not ah.claude_available(), reason="needs tests/fixtures/agents (npm ci) and tmux")
def test_real_claude_sees_the_selection_and_calls_get_diagnostics(nvim_factory, amp_env):
    f = amp_env.workspace / "notes.txt"
    f.write_text("alpha\nbeta line\ngamma line\ndelta\n")
    ed = nvim_factory(**SETUP)
    _, lock, status = claude_lock(ed)
    ed.edit(f)
    ed.lua("""
      local ns = vim.api.nvim_create_namespace("claude-real")
      vim.diagnostic.set(ns, 0, { { lnum = 3, col = 0, end_lnum = 3, end_col = 5, severity = 2,
                                     message = "delta looks odd", source = "lint" } })
    """)
    # Lines 2-3 (1-based) selected in Visual line mode.
    fh.enter_visual_lines(ed)

    mock = ah.AnthropicMock([[{"type": "tool_use", "name": "mcp__ide__getDiagnostics", "input": {}}]])
    env = ah.claude_home(amp_env.home, amp_env.workspace)
    env.update({"ANTHROPIC_BASE_URL": mock.url, "CLAUDE_CODE_SSE_PORT": str(status["port"]),
                "ENABLE_IDE_INTEGRATION": "true"})
    tmux = ah.Tmux(amp_env.root, [str(ah.CLAUDE), "--permission-mode", "default"], env, amp_env.workspace)
    try:
        wait_for(lambda: claude_status(ed)["clients"] == 1, 60, "the real claude to connect")
        # The selection made before Claude connected reaches it (it is sent
        # again once Claude listens: see RESEND_AFTER_CONNECT); the prompt
        # is typed once Claude's UI is up.
        tmux.wait_screen("? for shortcuts", 60)
        time.sleep(2.5)
        tmux.submit("what did I select?")
        first = mock.wait_for(lambda rs: [r for r in rs if r.get("tools")], 60)[0]
        text = ah.request_text(first)
        # Claude's words for a selection_changed with text: 1-based lines.
        assert "The user selected the lines 2 to 3 from " + str(f) in text, text[-3000:]
        assert "beta line" in text
        # The model asked for mcp__ide__getDiagnostics: approve it in the terminal.
        tmux.answer_dialog("Do you want to proceed?")
        with tmux.screen_on_failure("no getDiagnostics result reached the model"):
            answered = mock.wait_for(lambda rs: [r for r in rs if r.get("tools") and "delta looks odd" in ah.request_text(r)], 60)
        assert "lint" in ah.request_text(answered[0])
    finally:
        tmux.close()
        mock.close()


def test_open_diff_review_accepts_with_w_and_rejects_with_q(nvim_factory, amp_env):
    f = amp_env.workspace / "code.py"
    f.write_text("one\ntwo\nthree\n")
    ed = nvim_factory(**SETUP)
    _, lock, status = claude_lock(ed)
    ed.edit(f)
    c = Mcp(status["port"], lock["authToken"])
    handshake(c)

    def open_diff(tab, contents):
        c.next_id += 1
        c.ws.send(json.dumps({"jsonrpc": "2.0", "id": c.next_id, "method": "tools/call", "params": {
            "name": "openDiff", "arguments": {"old_file_path": str(f), "new_file_path": str(f),
                                              "new_file_contents": contents, "tab_name": tab},
            "_meta": {"progressToken": 7}}}))
        return c.next_id

    def reply(id, timeout=10):
        # Two answers may come in either order (close_tab's and the
        # rejected openDiff's): one read before its turn waits here.
        for msg in c.notifications:
            if msg.get("id") == id:
                c.notifications.remove(msg)
                return msg
        deadline = time.monotonic() + timeout
        while True:
            msg = json.loads(c.ws.recv(timeout=max(deadline - time.monotonic(), 0.01)))
            if msg.get("id") == id:
                return msg
            c.notifications.append(msg)

    def proposal_buffer(tab):
        """Opens the proposal as the user does (:Amp review): its window
        shows the file's path and, as extra, Claude's tab name."""
        wait_for(lambda: any(p["name"] == tab for p in wait_proposals(ed, 1)), 10, f"the proposal {tab!r}")
        win = open_review(ed, "code.py (proposed by Claude)")
        assert tab in winbar(ed, win)
        return ed.lua("return vim.api.nvim_win_get_buf(...)", win)

    # Accept: the user tweaks the proposal, then :w.
    user = where_the_user_is(ed)
    id = open_diff("✻ [Claude Code] code.py", "one\nTWO\nthree\n")
    wait_proposals(ed, 1)
    assert where_the_user_is(ed) == user, "a proposal that arrives takes nothing from the user"
    buf = proposal_buffer("✻ [Claude Code] code.py")
    assert ed.lua("return #vim.api.nvim_list_tabpages()") == 2
    assert ed.lua("return vim.wo.diff") is True
    assert ed.lua("return vim.api.nvim_get_current_buf()") == buf
    ed.lua("vim.api.nvim_buf_set_lines(0, 2, 3, false, { 'THREE (mine)' })")
    ed.nvim.command("write")
    answer = reply(id)
    assert answer["result"]["content"] == [{"type": "text", "text": "FILE_SAVED"},
                                           {"type": "text", "text": "one\nTWO\nTHREE (mine)\n"}]
    # The editor never writes the file: Claude does.
    assert f.read_text() == "one\ntwo\nthree\n"
    wait_for(lambda: ed.lua("return #vim.api.nvim_list_tabpages()") == 1, 5, "the review to close")
    assert ed.lua("return vim.wo.diff") is False
    assert "amp: accepted Claude's change to code.py" in ed.messages()

    # Reject: :q in the proposal answers DIFF_REJECTED, never TAB_CLOSED.
    id = open_diff("review 2", "one\nzwei\nthree\n")
    proposal_buffer("review 2")
    ed.nvim.command("quit")
    answer = reply(id)
    assert answer["result"]["content"][0]["text"] == "DIFF_REJECTED"
    wait_for(lambda: ed.lua("return #vim.api.nvim_list_tabpages()") == 1, 5, "the review to close")
    assert "amp: rejected Claude's change to code.py" in ed.messages()

    # The agent's close_tab of a pending review rejects and closes it.
    id = open_diff("review 3", "uno\n")
    proposal_buffer("review 3")
    c.ws.send(json.dumps({"jsonrpc": "2.0", "id": 999, "method": "tools/call",
                          "params": {"name": "close_tab", "arguments": {"tab_name": "review 3"}}}))
    assert reply(id)["result"]["content"][0]["text"] == "DIFF_REJECTED"
    assert reply(999)["result"]["content"][0]["text"] == "TAB_CLOSED"
    wait_for(lambda: ed.lua("return #vim.api.nvim_list_tabpages()") == 1, 5, "the review to close")
    assert c.tool("closeAllDiffTabs") == "CLOSED_0_DIFF_TABS"
    assert f.read_text() == "one\ntwo\nthree\n"

    # Hunk by hunk with the review's keys: the last decision ends it.
    id = open_diff("review 4", "ONE\ntwo\nTHREE\n")
    buf = proposal_buffer("review 4")
    win = ed.lua("return vim.fn.bufwinid(...)", buf)
    ed.lua("vim.api.nvim_set_current_win(...)", win)
    ed.lua("vim.api.nvim_win_set_cursor(0, { 3, 0 })")
    ed.nvim.command("normal gr")
    assert ed.lua("return #vim.api.nvim_list_tabpages()") == 2, "ONE is still undecided"
    ed.lua("vim.api.nvim_win_set_cursor(0, { 1, 0 })")
    ed.nvim.command("normal ga")
    answer = reply(id)
    assert answer["result"]["content"] == [{"type": "text", "text": "FILE_SAVED"},
                                           {"type": "text", "text": "ONE\ntwo\nthree\n"}]
    wait_for(lambda: ed.lua("return #vim.api.nvim_list_tabpages()") == 1, 5, "the review to close")
    c.close()


@pytest.mark.skipif(not ah.claude_available(), reason="needs tests/fixtures/agents (npm ci) and tmux")
def test_real_claude_open_diff_accept_with_w_and_reject_with_q(nvim_factory, amp_env):
    f = amp_env.workspace / "story.txt"
    f.write_text("once\nupon\na time\n")
    read = {"type": "tool_use", "name": "Read", "input": {"file_path": str(f)}}
    mock = ah.AnthropicMock([
        [read],
        [{"type": "tool_use", "name": "Edit", "input": {"file_path": str(f), "old_string": "upon", "new_string": "UPON"}}],
        [{"type": "text", "text": "Edited."}],
        [{"type": "tool_use", "name": "Edit", "input": {"file_path": str(f), "old_string": "once", "new_string": "twice"}}],
        [{"type": "text", "text": "Understood."}],
    ])
    ed = nvim_factory(**SETUP)
    _, lock, status = claude_lock(ed)
    ed.edit(f)
    env = ah.claude_home(amp_env.home, amp_env.workspace)
    env.update({"ANTHROPIC_BASE_URL": mock.url, "CLAUDE_CODE_SSE_PORT": str(status["port"]),
                "ENABLE_IDE_INTEGRATION": "true"})
    tmux = ah.Tmux(amp_env.root, [str(ah.CLAUDE), "--permission-mode", "default"], env, amp_env.workspace)

    def review_open():
        """The user opens Claude's proposal once it arrives (:Amp review)."""
        wait_for(lambda: ed.lua("return #require('amp.review').proposals() == 1"), 60, "Claude's proposal")
        return ed.lua("return vim.api.nvim_win_get_buf(...)", open_review(ed, "story.txt (proposed by Claude)"))

    def tool_results(rs):
        return [r for r in rs if r.get("tools") and "tool_result" in json.dumps(r["messages"][-1:])]

    try:
        wait_for(lambda: claude_status(ed)["clients"] == 1, 60, "the real claude to connect")
        tmux.wait_screen("? for shortcuts", 60)
        time.sleep(1.0)
        tmux.submit("capitalize upon")
        with tmux.screen_on_failure("no review opened"):
            buf = review_open()
        # The proposal, tweaked by the user, then :w in it.
        assert ed.lua("return vim.api.nvim_get_current_buf()") == buf
        assert ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)") == ["once", "UPON", "a time"]
        ed.lua("vim.api.nvim_buf_set_lines(0, 2, 3, false, { 'a good time' })")
        ed.nvim.command("write")
        # Claude writes the file itself, with the user's edit.
        wait_for(lambda: f.read_text() == "once\nUPON\na good time\n", 30, "Claude to write the accepted text")
        after_edit = mock.wait_for(lambda rs: len(tool_results(rs)) >= 2 and tool_results(rs)[1:], 60)[0]
        assert "The user modified your proposed changes before accepting them" in ah.request_text(after_edit)
        # Neovim's buffer follows the disk.
        wait_for(lambda: ed.buf_lines(f) == ["once", "UPON", "a good time"], 10, "the buffer to reload")

        # Second edit: rejected with :q in the review.
        tmux.wait_screen("Edited.", 60)
        time.sleep(1.0)
        tmux.submit("now change once")
        buf = review_open()
        assert ed.lua("return vim.api.nvim_get_current_buf()") == buf
        ed.nvim.command("quit")
        # A rejection ends Claude's turn (no further request to the model).
        tmux.wait_screen("Rejected update to story.txt", 30)
        wait_for(lambda: ed.lua("return #vim.api.nvim_list_tabpages()") == 1, 10, "the review to close")
        time.sleep(1.0)
        assert f.read_text() == "once\nUPON\na good time\n"
    finally:
        tmux.close()
        mock.close()


def test_accepting_a_proposal_for_a_buffer_with_unsaved_changes_loses_nothing(nvim_factory, amp_env):
    """Claude proposes from the file on disk; the buffer has unsaved lines
    (one changed, one added). The review shows the proposal over the
    buffer's text, so those lines are no hunk to lose; Claude is told the
    accepted text with them; the buffer takes it at once, and when Claude
    writes the file the buffer is simply saved: no conflict, nothing lost."""
    f = amp_env.workspace / "dirty.py"
    f.write_text("a = 1\nb = 2\n")
    ed = nvim_factory(**SETUP)
    _, lock, status = claude_lock(ed)
    ed.edit(f)
    ed.lua("vim.api.nvim_buf_set_lines(0, 1, 2, false, { 'b = 20  # unsaved', 'c = 3  # added, unsaved' })")
    ed.lua("""_G.amp_file_events = {}
        vim.api.nvim_create_autocmd('User', { pattern = 'AmpFileChanged', callback = function(ev)
          table.insert(_G.amp_file_events, ev.data)
        end })""")
    c = Mcp(status["port"], lock["authToken"])
    handshake(c)
    c.next_id += 1
    rid = c.next_id
    c.ws.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {
        "name": "openDiff", "arguments": {"old_file_path": str(f), "new_file_path": str(f),
                                          "new_file_contents": "a = 100\nb = 2\n", "tab_name": "dirty"}}}))
    win = open_review(ed, "dirty.py (proposed by Claude)")
    assert "unsaved changes" in winbar(ed, win)
    sides = ed.lua("""
        local review = require('amp.review').reviews[next(require('amp.review').reviews)]
        return { vim.api.nvim_buf_get_lines(review.left, 0, -1, false),
                 vim.api.nvim_buf_get_lines(review.right, 0, -1, false) }""")
    assert sides == [["a = 1", "b = 20  # unsaved", "c = 3  # added, unsaved"],
                     ["a = 100", "b = 20  # unsaved", "c = 3  # added, unsaved"]], sides
    ed.lua("vim.api.nvim_set_current_win(...)", win)
    ed.nvim.command("write")
    deadline = time.monotonic() + 10
    while True:
        reply = json.loads(c.ws.recv(timeout=max(deadline - time.monotonic(), 0.01)))
        if reply.get("id") == rid:
            break
    accepted = reply["result"]["content"][1]["text"]
    assert accepted == "a = 100\nb = 20  # unsaved\nc = 3  # added, unsaved\n"
    want = ["a = 100", "b = 20  # unsaved", "c = 3  # added, unsaved"]
    assert ed.buf_lines(f) == want, "the buffer took the accepted text at once"
    # Claude writes the file, as it does after FILE_SAVED.
    f.write_text(accepted)
    wait_for(lambda: ed.lua("return vim.bo[vim.fn.bufnr(...)].modified", str(f)) is False, 10,
             "the buffer to count as saved")
    assert ed.buf_lines(f) == want
    assert not any(e.get("conflict") for e in ed.lua("return _G.amp_file_events")), ed.lua("return _G.amp_file_events")
    # Taking the change was one undo step: the user's own text is one `u` away.
    ed.lua("vim.api.nvim_buf_call(vim.fn.bufnr(...), function() vim.cmd('silent undo') end)", str(f))
    assert ed.buf_lines(f) == ["a = 1", "b = 20  # unsaved", "c = 3  # added, unsaved"]
    c.close()


def test_open_diff_of_a_new_file_shows_an_empty_left_side_and_leaves_no_buffer(nvim_factory, amp_env):
    f = amp_env.workspace / "new_module.py"
    ed = nvim_factory(**SETUP)
    _, lock, status = claude_lock(ed)
    c = Mcp(status["port"], lock["authToken"])
    handshake(c)
    c.next_id += 1
    rid = c.next_id
    c.ws.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {
        "name": "openDiff", "arguments": {"old_file_path": str(f), "new_file_path": str(f),
                                          "new_file_contents": "print('hi')\n", "tab_name": "new file"}}}))
    open_review(ed, "new_module.py (proposed by Claude)")
    sides = wait_for(lambda: ed.lua("""
        local out = {}
        for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
          local buf = vim.api.nvim_win_get_buf(win)
          out[vim.api.nvim_buf_get_name(buf):match('%(([^)]*)%)$') or '?'] = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
        end
        return vim.tbl_count(out) == 2 and out or false"""), 10, "the review of a new file")
    assert sides == {"as it is": [""], "proposed by Claude": ["print('hi')"]}, sides
    ed.nvim.command("quit")
    deadline = time.monotonic() + 10
    while True:
        reply = json.loads(c.ws.recv(timeout=max(deadline - time.monotonic(), 0.01)))
        if reply.get("id") == rid:
            break
    assert reply["result"]["content"][0]["text"] == "DIFF_REJECTED"
    wait_for(lambda: ed.lua("return #vim.api.nvim_list_tabpages()") == 1, 5, "the review to close")
    assert ed.lua("return vim.fn.bufnr(...)", str(f)) == -1, "no buffer was made for the file"
    assert not f.exists()
    c.close()
