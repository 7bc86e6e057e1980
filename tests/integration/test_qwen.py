"""The Qwen Code front-end (agents.qwen): Gemini's wire format (the
IDE-companion front-end, src/ide_companion/) with Qwen's own discovery file
(`~/.qwen/ide/<port>.lock`, `$QWEN_HOME/ide/`, with `ppid` and `ideInfo`)
and variables (`QWEN_CODE_IDE_SERVER_PORT`), its reviews named as Qwen's,
and the real Qwen Code attached to a real Neovim, offline against a local
OpenAI-compatible stand-in (tests/integration/openai_mock.py)."""

import json
import os
import stat
from pathlib import Path

import pytest

from conftest import dead_pid, wait_for
import agents_helpers as ah
import front_end_helpers as fh
from mcp_clients import Events, Http
from openai_mock import OpenAIMock, request_text
from review_helpers import open_review, proposals, wait_proposals, where_the_user_is

SETUP = {"agents": {"amp": True, "qwen": True}}


def qwen_status(ed):
    return fh.agent_status(ed, "qwen")


def lockfile(ed, ide_dir=None):
    return fh.wait_discovery_file(
        ed, "qwen", "port", lambda status: (ide_dir or ed.env.home / ".qwen" / "ide") / f"{status['port']}.lock",
        "the Qwen server", "the lockfile")


def open_session(ed):
    return fh.open_http_session(*lockfile(ed))


def test_qwen_is_off_by_default(nvim_factory, amp_env):
    ed = nvim_factory()
    assert qwen_status(ed) == {"enabled": False}
    assert not (amp_env.home / ".qwen").exists()
    assert ed.lua("return vim.env.QWEN_CODE_IDE_SERVER_PORT") is None


def test_the_lockfile_is_private_names_the_editor_follows_cd_and_goes_on_exit(nvim_factory, amp_env):
    ide = amp_env.home / ".qwen" / "ide"
    ide.mkdir(parents=True)
    # Another editor's lockfile whose ppid is gone (Qwen would delete it
    # too), a live one, and files that are not lockfiles.
    stale = ide / "1.lock"
    stale.write_text(json.dumps({"port": 1, "ppid": dead_pid()}))
    alive = ide / "2.lock"
    alive.write_text(json.dumps({"port": 2, "ppid": os.getpid()}))
    other = ide / "3.json"
    other.write_text(json.dumps({"ppid": dead_pid()}))
    ed = nvim_factory(**SETUP)
    path, lock, status = lockfile(ed)
    assert set(lock) == {"port", "workspacePath", "authToken", "ppid", "ideInfo"}
    assert lock["port"] == status["port"] and lock["workspacePath"] == str(amp_env.workspace)
    # Qwen connects outside VS Code's terminal only with ideInfo; it deletes
    # a lockfile whose ppid is not a running process: this Neovim's pid.
    assert lock["ideInfo"] == {"name": "neovim", "displayName": "Neovim"}
    assert lock["ppid"] == ed.pid
    assert len(lock["authToken"]) == 43 and lock["authToken"] != ed.lock["authToken"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path.parent.parent).st_mode) == 0o700
    assert not stale.exists() and alive.exists() and other.exists()
    assert status["discovery_file"] == str(path) and status["workspace_path"] == str(amp_env.workspace)
    # Terminals Neovim starts find this server's lockfile.
    assert ed.lua("return vim.env.QWEN_CODE_IDE_SERVER_PORT") == str(status["port"])
    assert ed.lua("return vim.env.QWEN_CODE_IDE_WORKSPACE_PATH") == str(amp_env.workspace)
    other_dir = amp_env.root / "elsewhere"
    other_dir.mkdir()
    ed.nvim.command("cd " + str(other_dir))
    wait_for(lambda: json.loads(path.read_text())["workspacePath"] == str(other_dir), 10, "the file to follow :cd")
    assert ed.lua("return vim.env.QWEN_CODE_IDE_WORKSPACE_PATH") == str(other_dir)
    ed.nvim.command("checkhealth amp")
    health = "\n".join(ed.nvim.current.buffer[:])
    assert f"qwen: port {status['port']}, 0 clients, discovery file {path}" in health, health
    assert ed.quit() == 0
    assert not path.exists() and alive.exists()


def test_qwen_home_moves_the_lockfile(nvim_factory, amp_env):
    qwen_home = amp_env.root / "qwen home"
    ed = nvim_factory(**SETUP, _extra_env={"QWEN_HOME": str(qwen_home)})
    path, lock, status = lockfile(ed, qwen_home / "ide")
    assert status["discovery_file"] == str(path)
    assert stat.S_IMODE(os.stat(qwen_home).st_mode) == 0o700
    assert not (amp_env.home / ".qwen").exists()


def test_a_wrong_or_missing_token_is_refused(nvim_factory, amp_env):
    ed = nvim_factory(**SETUP)
    _, lock, status = lockfile(ed)
    port, token = status["port"], lock["authToken"]
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}
    client = Http(port, token)
    for wrong in (None, "wrong", token + "x", token[:-1], ""):
        assert client.status("POST", init, token=wrong) == 401, wrong
    # Nor does a browser get in.
    assert client.status("POST", init, headers={"Origin": "https://evil.test"}) == 403
    assert client.status("POST", init) == 200
    assert qwen_status(ed)["clients"] == 0


def test_context_updates_carry_the_selection(nvim_factory, amp_env):
    f = amp_env.workspace / "a.txt"
    f.write_text("first\nsecond line\nthird\n")
    ed = nvim_factory(**SETUP)
    ed.edit(f)
    c, lock, status = open_session(ed)
    assert {t["name"] for t in c.request("tools/list")["result"]["tools"]} == {"openDiff", "closeDiff"}
    events = Events(c)
    first = events.wait("ide/contextUpdate")
    active = first["workspaceState"]["openFiles"][0]
    assert active["path"] == str(f) and active["isActive"] is True and active["cursor"] == {"line": 1, "character": 1}
    ed.lua("vim.api.nvim_win_set_cursor(0, { 2, 0 })")
    ed.nvim.input("Vj")
    sel = events.wait("ide/contextUpdate",
                      lambda p: p["workspaceState"]["openFiles"][0].get("selectedText", "").endswith("third"))
    assert sel["workspaceState"]["openFiles"][0]["selectedText"] == "second line\nthird"
    assert sel["workspaceState"]["openFiles"][0]["cursor"]["line"] == 3
    ed.nvim.input("<Esc>")
    wait_for(lambda: qwen_status(ed)["clients"] == 1, 5, "one Qwen client")
    wait_for(lambda: ed.lua("return require('amp').statusline()") == "amp: 1 agent (Qwen)", 5, "the statusline")
    ed.nvim.command("Amp status")
    assert f"qwen on :{status['port']}, 1 client" in ed.messages()
    assert c.status("DELETE") == 200
    assert events.ended()


def proposal_buffer(ed, path):
    """Opens Qwen's proposal for `path` as the user does (:Amp review)."""
    rel = os.path.relpath(path, ed.cwd)
    win = open_review(ed, f"{rel} (proposed by Qwen)", pick=f"{rel} (Qwen's proposal)", arg=rel)
    return ed.lua("return vim.api.nvim_win_get_buf(...)", win)


def test_open_diff_accepted_with_a_tweak_or_rejected_through_the_review(nvim_factory, amp_env):
    f = amp_env.workspace / "code.py"
    f.write_text("one\ntwo\nthree\n")
    ed = nvim_factory(**SETUP)
    ed.edit(f)
    c, lock, status = open_session(ed)
    events = Events(c)
    user = where_the_user_is(ed)
    assert c.tool("openDiff", {"filePath": str(f), "newContent": "one\nTWO\nthree\n"})["result"] == {"content": []}
    assert wait_proposals(ed, 1)[0]["agent"] == "Qwen"
    assert where_the_user_is(ed) == user, "a proposal that arrives takes nothing from the user"
    buf = proposal_buffer(ed, f)
    assert ed.lua("return vim.api.nvim_buf_get_name(...)", buf).endswith("code.py (proposed by Qwen)")
    # The user's tweak is part of what Qwen is told, and what it writes.
    ed.lua("vim.api.nvim_buf_set_lines(..., 2, 3, false, { 'THREE (mine)' })", buf)
    ed.nvim.command("write")
    assert events.wait("ide/diffAccepted") == {"filePath": str(f), "content": "one\nTWO\nTHREE (mine)\n"}
    # The editor never writes the file: Qwen does.
    assert f.read_text() == "one\ntwo\nthree\n"
    wait_for(lambda: ed.lua("return #vim.api.nvim_list_tabpages()") == 1, 5, "the review to close")
    # :q rejects.
    c.tool("openDiff", {"filePath": str(f), "newContent": "one\nzwei\nthree\n"})
    proposal_buffer(ed, f)
    ed.nvim.command("quit")
    assert events.wait("ide/diffRejected") == {"filePath": str(f)}
    # closeDiff (decided in Qwen's terminal): the proposal's text, no event.
    c.tool("openDiff", {"filePath": str(f), "newContent": "uno\n"})
    wait_proposals(ed, 1)
    closed = c.tool("closeDiff", {"filePath": str(f), "suppressNotification": True})
    assert json.loads(closed["result"]["content"][0]["text"]) == {"content": "uno\n"}
    wait_for(lambda: not proposals(ed), 5, "the proposal to close")
    assert [m["method"] for m in events.seen if m["method"].startswith("ide/diff")] \
        == ["ide/diffAccepted", "ide/diffRejected"]
    assert f.read_text() == "one\ntwo\nthree\n"


def test_checkhealth_names_the_qwen_cli_and_its_version(nvim_factory, amp_env):
    """`:checkhealth amp` runs terminal.cmd.qwen's program with --version
    (the pinned Qwen Code when it is installed), or says it is missing."""
    qwen = ah.QWEN_BIN if ah.qwen_available() else None
    ed = nvim_factory(terminal={"cmd": {"qwen": [str(qwen) if qwen else "no-such-qwen"]}})
    ed.nvim.command("checkhealth amp")
    health = "\n".join(ed.nvim.current.buffer[:])
    if qwen:
        assert f"qwen (Qwen Code) 0.24.4: {qwen}" in health, health
    ed.lua("require('amp').setup({ terminal = { cmd = { qwen = { 'no-such-qwen' } } } })")
    ed.nvim.command("checkhealth amp")
    health = "\n".join(ed.nvim.current.buffer[:])
    assert ("qwen (Qwen Code): `no-such-qwen` is not on PATH; :Amp open qwen needs it "
            "(npm install -g @qwen-code/qwen-code, or set terminal.cmd.qwen)") in health, health


# The real Qwen Code ----------------------------------------------------------

needs_qwen = pytest.mark.skipif(not ah.qwen_available(),
                                reason="needs tests/fixtures/agent-qwen (npm ci), node and tmux")


def run_qwen(ed, amp_env, mock):
    """The real Qwen Code in a terminal as `:Amp open qwen` starts it: its
    command (terminal.cmd.qwen, so edits come to the editor) and the
    variables of this Neovim's Qwen front-end."""
    env = ah.qwen_home(amp_env.home, mock.url)
    agent_env = ed.lua("return require('amp.terminal').env('qwen')")
    status = qwen_status(ed)
    assert agent_env["QWEN_CODE_IDE_SERVER_PORT"] == str(status["port"])
    assert agent_env["QWEN_CODE_IDE_WORKSPACE_PATH"] == status["workspace_path"]
    env.update(agent_env)
    cmd = ed.lua("return require('amp').get_config().terminal.cmd.qwen")
    assert cmd[0] == "qwen"
    return ah.Tmux(amp_env.root, ah.qwen_argv(*cmd[1:]), env, amp_env.workspace)


def recorded_calls(home: Path) -> dict[str, dict]:
    """Qwen's own record of its tool calls (its chat recording under
    ~/.qwen/projects/): call id -> the call's outcome."""
    calls = {}
    for chat in (home / ".qwen" / "projects").glob("*/chats/*.jsonl"):
        for line in chat.read_text().splitlines():
            entry = json.loads(line)
            event = (entry.get("systemPayload") or {}).get("uiEvent") or {}
            if event.get("event.name") == "qwen-code.tool_call":
                calls[event["call_id"]] = event
    return calls


@needs_qwen
@pytest.mark.real_agent
def test_real_qwen_connects_and_the_selection_reaches_the_model(nvim_factory, amp_env):
    f = amp_env.workspace / "notes.txt"
    f.write_text("alpha\nbeta line\ngamma line\ndelta\n")
    ed = nvim_factory(**SETUP)
    lockfile(ed)
    ed.edit(f)
    fh.enter_visual_lines(ed)
    mock = OpenAIMock([[{"type": "text", "text": "Fine."}]])
    tmux = run_qwen(ed, amp_env, mock)
    try:
        with tmux.screen_on_failure("Qwen did not connect"):
            wait_for(lambda: qwen_status(ed)["clients"] == 1, 60, "the real Qwen Code to open its event stream")
        wait_for(lambda: ed.lua("return require('amp').statusline()") == "amp: 1 agent (Qwen)", 5, "the statusline")
        tmux.wait_screen("Type your message", 60)
        tmux.submit("/ide status")
        tmux.wait_screen("Connected to Neovim", 30)
        wait_for(lambda: "notes.txt (active)" in tmux.screen(), 10, "the active file in /ide status")
        tmux.submit("what did I select?")
        tmux.wait_screen("Fine.", 60)
        body = mock.wait_for_request("what did I select?", request_text, 30)
        text = request_text(body)
        # What the model is told: the active file, the 1-based cursor (the
        # end of the Visual line selection: after "gamma line") and the text.
        assert f"Path: {f}" in text, text[-2000:]
        assert "Cursor: line 3, character 11" in text, text[-2000:]
        assert "Selected text:\n```\nbeta line\ngamma line\n```" in text, text[-2000:]
    finally:
        tmux.close()
        mock.close()
    wait_for(lambda: qwen_status(ed)["clients"] == 0, 10, "the stream to end with Qwen")


@needs_qwen
@pytest.mark.real_agent
def test_real_qwen_edit_accepted_with_a_tweak_then_rejected_with_q(nvim_factory, amp_env):
    f = amp_env.workspace / "story.txt"
    f.write_text("once\nupon\na time\n")
    ed = nvim_factory(**SETUP)
    lockfile(ed)
    ed.edit(f)
    # Qwen's edit tool refuses a file not read in the session: read first.
    mock = OpenAIMock([
        [{"type": "tool_use", "name": "read_file", "input": {"file_path": str(f)}}],
        [{"type": "tool_use", "name": "edit", "id": "call_upon",
          "input": {"file_path": str(f), "old_string": "upon", "new_string": "UPON"}}],
        [{"type": "text", "text": "Edited."}],
        [{"type": "tool_use", "name": "edit", "id": "call_once",
          "input": {"file_path": str(f), "old_string": "once", "new_string": "twice"}}],
        [{"type": "text", "text": "Understood."}],
    ])
    tmux = run_qwen(ed, amp_env, mock)
    try:
        wait_for(lambda: qwen_status(ed)["clients"] == 1, 60, "the real Qwen Code to connect")
        tmux.wait_screen("Type your message", 60)
        tmux.submit("capitalize upon")
        with tmux.screen_on_failure("no proposal arrived"):
            wait_proposals(ed, 1, 60)
        buf = proposal_buffer(ed, f)
        assert ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", buf) == ["once", "UPON", "a time"]
        ed.lua("vim.api.nvim_buf_set_lines(..., 2, 3, false, { 'a good time' })", buf)
        ed.nvim.command("write")
        # Qwen writes the file itself, with the user's tweak.
        tmux.wait_written(f, "once\nUPON\na good time\n", 30, "Qwen to write the accepted text")
        wait_for(lambda: ed.buf_lines(f) == ["once", "UPON", "a good time"], 10, "the buffer to reload")
        tmux.wait_screen("Edited.", 60)
        # Qwen records the edit as accepted and changed by the user, and
        # tells the model the file as written.
        upon = wait_for(lambda: recorded_calls(amp_env.home).get("call_upon"), 10, "Qwen's record of the edit")
        assert (upon["decision"], upon["status"], upon["function_args"].get("modified_by_user")) \
            == ("accept", "success", True), upon
        told = mock.main_requests()[2]["messages"][-1]
        assert told["role"] == "tool" and "once\nUPON\na good time" in json.dumps(told["content"]) \
            .replace("\\n", "\n"), told

        tmux.submit("now change once")
        wait_proposals(ed, 1, 60)
        proposal_buffer(ed, f)
        ed.nvim.command("quit")
        wait_for(lambda: not proposals(ed), 10, "the review to close")
        # A rejection: the file stays as it was, and Qwen records it so.
        once = wait_for(lambda: recorded_calls(amp_env.home).get("call_once"), 30, "Qwen's record of the rejection")
        assert (once["decision"], once["status"]) == ("reject", "cancelled"), once
        assert f.read_text() == "once\nUPON\na good time\n"
    finally:
        tmux.close()
        mock.close()
