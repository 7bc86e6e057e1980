"""The Gemini CLI front-end (agents.gemini): its discovery file, MCP
Streamable HTTP on a loopback port (POST, the GET event stream, DELETE),
the editor context it pushes from the one published state, openDiff
through the review view, and the real Gemini CLI attached to a real
Neovim."""

import json
import os
import socket
import stat
import time

import pytest

from conftest import dead_pid, wait_for
import agents_helpers as ah
import front_end_helpers as fh
from resilience_helpers import amp_log
from mcp_clients import Events, Http
from review_helpers import buffer_count, open_review, proposals, wait_proposals, where_the_user_is

SETUP = {"agents": {"amp": True, "gemini": True}}


def start(nvim_factory, amp_env, **kw):
    """With a private $TMPDIR: the discovery directory is $TMPDIR/gemini/ide."""
    return fh.start_with_private_tmpdir(nvim_factory, amp_env, SETUP, **kw)


def gemini_status(ed):
    return fh.agent_status(ed, "gemini")


def discovery(ed):
    return fh.wait_discovery_file(
        ed, "gemini", "port",
        lambda status: ed.env.root / "tmp" / "gemini" / "ide" / f"gemini-ide-server-{ed.pid}-{status['port']}.json",
        "the Gemini server", "the discovery file")


def open_session(ed):
    return fh.open_http_session(*discovery(ed))


def test_gemini_is_off_by_default(nvim_factory, amp_env):
    ed = nvim_factory(_extra_env=fh.private_tmpdir(amp_env))
    assert gemini_status(ed) == {"enabled": False}
    assert not (amp_env.root / "tmp" / "gemini").exists()
    assert ed.lua("return vim.env.GEMINI_CLI_IDE_SERVER_PORT") is None


def test_discovery_file_is_private_follows_cd_and_goes_on_exit(nvim_factory, amp_env):
    ide = amp_env.root / "tmp" / "gemini" / "ide"
    ide.mkdir(parents=True)
    stale = ide / f"gemini-ide-server-{dead_pid()}-1.json"
    stale.write_text("{}")
    alive = ide / f"gemini-ide-server-{os.getpid()}-2.json"
    alive.write_text("{}")
    ed = start(nvim_factory, amp_env)
    path, disc, status = discovery(ed)
    assert set(disc) == {"port", "workspacePath", "authToken", "ideInfo"}
    assert disc["port"] == status["port"] and disc["workspacePath"] == str(amp_env.workspace)
    assert disc["ideInfo"] == {"name": "neovim", "displayName": "Neovim"}
    assert len(disc["authToken"]) == 43 and disc["authToken"] != ed.lock["authToken"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert not stale.exists() and alive.exists()
    assert status["discovery_file"] == str(path) and status["pid"] == ed.pid
    assert status["workspace_path"] == str(amp_env.workspace)
    # Terminals Neovim starts find this server, and this Neovim first.
    assert ed.lua("return vim.env.GEMINI_CLI_IDE_SERVER_PORT") == str(status["port"])
    assert ed.lua("return vim.env.GEMINI_CLI_IDE_PID") == str(ed.pid)
    assert ed.lua("return vim.env.GEMINI_CLI_IDE_WORKSPACE_PATH") == str(amp_env.workspace)
    other = amp_env.root / "elsewhere"
    other.mkdir()
    ed.nvim.command("cd " + str(other))
    wait_for(lambda: json.loads(path.read_text())["workspacePath"] == str(other), 10, "the file to follow :cd")
    assert ed.lua("return vim.env.GEMINI_CLI_IDE_WORKSPACE_PATH") == str(other)
    assert ed.quit() == 0
    assert not path.exists()


def test_in_a_container_terminals_are_told_gemini_shares_it(nvim_factory, amp_env):
    in_container = os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv")
    ed = start(nvim_factory, amp_env, _extra_env={"SSH_CONNECTION": "", "REMOTE_CONTAINERS": ""})
    discovery(ed)
    assert ed.lua("return vim.env.REMOTE_CONTAINERS") == ("true" if in_container else "")
    assert ed.lua("return require('amp.agent_env').env().REMOTE_CONTAINERS") == ("true" if in_container else None)
    # Over SSH Gemini dials 127.0.0.1 already: nothing is added, and a stop
    # gives the variable its value from before.
    ed.lua("vim.env.SSH_CONNECTION = '10.0.0.1 5 10.0.0.2 22'")
    assert "REMOTE_CONTAINERS" not in ed.lua("return require('amp.agent_env').env()")
    ed.lua("require('amp').stop()")
    # Empty before; Neovim's setenv() of "" unsets it.
    assert ed.lua("return vim.env.REMOTE_CONTAINERS") in ("", None)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a directory to another user")
def test_no_discovery_file_in_a_gemini_directory_of_another_user(nvim_factory, amp_env):
    # Another user made $TMPDIR/gemini first (it is shared): they could
    # swap or empty it, so the token is not written there, and status says why.
    shared = amp_env.root / "tmp" / "gemini"
    shared.mkdir(parents=True)
    shared.chmod(0o777)
    os.chown(shared, 65534, 65534)
    ed = start(nvim_factory, amp_env)
    status = wait_for(lambda: (gemini_status(ed) or {}).get("port") and gemini_status(ed), 10, "the Gemini server")
    error = wait_for(lambda: ed.lua("return require('amp').status().last_error"), 10, "the error in status()")
    assert "cannot write the Gemini discovery file" in error and "belongs to another user (uid 65534)" in error, error
    assert not list(shared.rglob("*.json"))
    assert stat.S_IMODE(shared.stat().st_mode) == 0o777


def test_amp_stop_removes_the_file_and_ends_the_streams(nvim_factory, amp_env):
    ed = start(nvim_factory, amp_env)
    c, disc, status = open_session(ed)
    events = Events(c)
    events.wait("ide/contextUpdate")
    wait_for(lambda: gemini_status(ed)["clients"] == 1, 5, "one Gemini client")
    path = discovery(ed)[0]
    ed.nvim.command("Amp stop")
    assert events.ended(), "the event stream ended with the server"
    assert not path.exists()
    with pytest.raises(OSError):
        c.status("POST", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})


def test_only_loopback_requests_with_the_token_and_no_origin(nvim_factory, amp_env):
    ed = start(nvim_factory, amp_env)
    _, disc, status = discovery(ed)
    port, token = status["port"], disc["authToken"]
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}
    ok = Http(port, token)
    assert ok.status("POST", init, token=None) == 401
    assert ok.status("POST", init, token="wrong") == 401
    assert ok.status("POST", init, token=token + "x") == 401
    assert Http(port, token, host=f"localhost:{port}").status("POST", init) == 200
    for host in ("evil.test", f"evil.test:{port}", f"127.0.0.1:{port + 1}", "127.0.0.1"):
        assert Http(port, token, host=host).status("POST", init) == 403, host
    # Browsers are kept out, whatever their Origin.
    for origin in ("https://evil.test", f"http://127.0.0.1:{port}", "null"):
        assert ok.status("POST", init, headers={"Origin": origin}) == 403, origin
    assert ok.status("POST", init, path="/") == 404
    assert ok.status("PUT", init) == 405
    # Requests other than initialize need a live session.
    assert ok.status("POST", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}) == 400
    ok.session = "no-such-session"
    assert ok.status("POST", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}) == 404
    assert ok.status("GET") == 404
    assert ok.status("DELETE") == 404
    ok.session = None
    assert ok.status("POST", b"{not json") == 400


def test_body_size_limit_and_header_timeout(nvim_factory, amp_env):
    ed = start(nvim_factory, amp_env, server={"handshake_timeout_ms": 500, "max_frame_bytes": 32 * 1024 * 1024})
    c, disc, status = open_session(ed)
    port = status["port"]
    # Over server.max_frame_bytes (32 MiB here): refused from its Content-Length, unread.
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall((f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {disc['authToken']}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {32 * 1024 * 1024 + 1}\r\n\r\n").encode())
    assert s.recv(100).startswith(b"HTTP/1.1 413"), "413 Payload Too Large"
    s.close()
    # A chunked body that grows past it is cut off too.
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall((f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {disc['authToken']}\r\n"
               f"Transfer-Encoding: chunked\r\n\r\n").encode())
    chunk = b"x" * (1024 * 1024)
    try:
        for _ in range(33):
            s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
    except OSError:
        pass
    assert s.recv(100).startswith(b"HTTP/1.1 413")
    s.close()
    # Headers that do not arrive within handshake_timeout_ms: the connection goes.
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1")
    t0 = time.monotonic()
    got = s.recv(100)
    assert got == b"" or got.startswith(b"HTTP/1.1 408"), got
    assert time.monotonic() - t0 < 3
    s.close()
    # The server still answers.
    assert c.request("tools/list")["result"]["tools"]


def test_session_and_stream_limits(nvim_factory, amp_env):
    ed = start(nvim_factory, amp_env)
    first, disc, status = open_session(ed)
    # MAX_SSE_STREAMS = 16 streams at once; one per session (409 for a second).
    clients = [first] + [Http(status["port"], disc["authToken"]) for _ in range(16)]
    for c in clients[1:]:
        c.initialize()
    streams = [Events(c) for c in clients[:16]]
    assert clients[0].status("GET") == 409
    assert clients[16].status("GET") == 503
    wait_for(lambda: gemini_status(ed)["clients"] == 16, 5, "16 streams")
    streams[0].close()
    wait_for(lambda: gemini_status(ed)["clients"] == 15, 5, "a stream to close")
    for s in streams[1:]:
        s.close()
    wait_for(lambda: gemini_status(ed)["clients"] == 0, 5, "the streams to close")
    # MAX_SESSIONS = 32: the 33rd session ends the oldest one without a stream.
    more = [Http(status["port"], disc["authToken"]) for _ in range(32 - 17 + 1)]
    for c in more:
        c.initialize()
    assert gemini_status(ed)["sessions"] == 32
    assert first.status("POST", {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}) == 404
    assert clients[1].request("tools/list")["result"]["tools"]
    # DELETE ends a session.
    assert clients[1].status("DELETE") == 200
    assert clients[1].status("POST", {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}) == 404
    assert gemini_status(ed)["sessions"] == 31


def test_context_updates_carry_the_cursor_and_selection(nvim_factory, amp_env):
    f = amp_env.workspace / "a.txt"
    f.write_text("héllo 😀 wörld\nsecond line\nthird\n")
    g = amp_env.workspace / "b.txt"
    g.write_text("other\n")
    ed = start(nvim_factory, amp_env)
    ed.edit(f)
    c, disc, status = open_session(ed)
    assert c.init["result"]["protocolVersion"] == "2025-06-18"
    assert c.init["result"]["capabilities"]["tools"]
    assert len(c.session) == 43
    tools = {t["name"] for t in c.request("tools/list")["result"]["tools"]}
    assert tools == {"openDiff", "closeDiff"}
    events = Events(c)
    # Sent once as soon as the stream opens.
    first = events.wait("ide/contextUpdate")
    assert first["workspaceState"]["isTrusted"] is True
    active = first["workspaceState"]["openFiles"][0]
    assert active["path"] == str(f) and active["isActive"] is True
    assert active["cursor"] == {"line": 1, "character": 1}
    # The cursor after the emoji: byte column 11 is UTF-16 character 8, so 9 1-based.
    ed.lua("vim.api.nvim_win_set_cursor(0, { 1, 11 })")
    ed.nvim.input("<Ignore>")
    moved = events.wait("ide/contextUpdate", lambda p: p["workspaceState"]["openFiles"][0].get("cursor")
                        == {"line": 1, "character": 9})
    assert "selectedText" not in moved["workspaceState"]["openFiles"][0]
    # A Visual selection of lines 2-3.
    ed.lua("vim.api.nvim_win_set_cursor(0, { 2, 0 })")
    ed.nvim.input("Vj")
    sel = events.wait("ide/contextUpdate",
                      lambda p: p["workspaceState"]["openFiles"][0].get("selectedText", "").endswith("third"))
    assert sel["workspaceState"]["openFiles"][0]["selectedText"] == "second line\nthird"
    assert sel["workspaceState"]["openFiles"][0]["cursor"]["line"] == 3
    ed.nvim.input("<Esc>")
    # A second window's file is an open file, older than the active one.
    ed.nvim.command("vsplit " + str(g))
    both = events.wait("ide/contextUpdate", lambda p: len(p["workspaceState"]["openFiles"]) == 2)
    files = both["workspaceState"]["openFiles"]
    assert files[0]["path"] == str(g) and files[0]["isActive"] is True
    assert files[1]["path"] == str(f) and files[1]["isActive"] is False
    assert files[1]["timestamp"] < files[0]["timestamp"]
    wait_for(lambda: gemini_status(ed)["clients"] == 1, 5, "one Gemini client")
    ed.nvim.command("Amp status")
    assert f"gemini on :{status['port']}, 1 client" in ed.messages()
    ed.nvim.command("checkhealth amp")
    health = "\n".join(ed.nvim.current.buffer[:])
    assert f"gemini: port {status['port']}, 1 client, discovery file {status['discovery_file']}" in health, health
    # DELETE ends the session and its stream.
    assert c.status("DELETE") == 200
    assert events.ended()
    wait_for(lambda: gemini_status(ed)["sessions"] == 0, 5, "no session")


def proposal_buffer(ed, path):
    """Opens Gemini's proposal for `path` as the user does (:Amp review)."""
    rel = os.path.relpath(path, ed.cwd)
    win = open_review(ed, f"{rel} (proposed by Gemini)", pick=f"{rel} (Gemini's proposal)", arg=rel)
    return ed.lua("return vim.api.nvim_win_get_buf(...)", win)


def test_open_diffs_past_the_review_limit_are_rejected_with_the_reason_logged(nvim_factory, amp_env):
    ed = start(nvim_factory, amp_env)
    c, disc, status = open_session(ed)
    events = Events(c)
    limit = 32  # core::review::MAX_OPEN_REVIEWS, :help amp-review
    files = [amp_env.workspace / f"f{i}.txt" for i in range(limit + 1)]
    buffers = buffer_count(ed)
    for f in files[:limit]:
        assert c.tool("openDiff", {"filePath": str(f), "newContent": "new\n"})["result"] == {"content": []}
    wait_proposals(ed, limit)
    # Waiting proposals are counted, and hold no window or buffer.
    assert ed.lua("return #vim.api.nvim_list_tabpages()") == 1
    assert buffer_count(ed) == buffers
    assert f"{limit} proposals" in ed.lua("return require('amp').statusline()")
    # One more: not shown, and Gemini is not left waiting for it.
    c.tool("openDiff", {"filePath": str(files[limit]), "newContent": "new\n"})
    assert events.wait("ide/diffRejected") == {"filePath": str(files[limit])}
    assert len(proposals(ed)) == limit
    wait_for(lambda: "32 reviews wait for a decision already" in amp_log(ed), 5, "the reason in the log")
    # A new proposal for a file under review replaces its review: allowed.
    c.tool("openDiff", {"filePath": str(files[0]), "newContent": "newer\n"})
    wait_for(lambda: [p["rel"] for p in proposals(ed)][-1] == "f0.txt", 5, "the replaced proposal")
    assert len(proposals(ed)) == limit
    buf = proposal_buffer(ed, files[0])
    assert ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", buf) == ["newer"]
    # A proposed text over 16 MiB is refused; the count is unchanged.
    c.tool("closeDiff", {"filePath": str(files[1])})
    big = "x" * (16 * 1024 * 1024 + 1)
    c.tool("openDiff", {"filePath": str(files[limit]), "newContent": big})
    assert events.wait("ide/diffRejected", lambda p: p["filePath"] == str(files[limit])) \
        == {"filePath": str(files[limit])}
    wait_for(lambda: "more than a review shows" in amp_log(ed), 5, "the size reason in the log")
    assert len(proposals(ed)) == limit - 1


def test_open_diff_accept_with_w_reject_with_q_and_close_diff(nvim_factory, amp_env):
    f = amp_env.workspace / "code.py"
    f.write_text("one\ntwo\nthree\n")
    ed = start(nvim_factory, amp_env)
    ed.edit(f)
    c, disc, status = open_session(ed)
    events = Events(c)
    # openDiff answers at once, before any decision.
    user = where_the_user_is(ed)
    answer = c.tool("openDiff", {"filePath": str(f), "newContent": "one\nTWO\nthree\n"})
    assert answer["result"] == {"content": []}
    wait_proposals(ed, 1)
    assert where_the_user_is(ed) == user, "a proposal that arrives takes nothing from the user"
    buf = proposal_buffer(ed, f)
    assert ed.lua("return vim.api.nvim_get_current_buf()") == buf
    assert ed.lua("return vim.wo.diff") is True
    ed.lua("vim.api.nvim_buf_set_lines(0, 2, 3, false, { 'THREE (mine)' })")
    ed.nvim.command("write")
    accepted = events.wait("ide/diffAccepted")
    assert accepted == {"filePath": str(f), "content": "one\nTWO\nTHREE (mine)\n"}
    # The editor never writes the file: Gemini does.
    assert f.read_text() == "one\ntwo\nthree\n"
    wait_for(lambda: ed.lua("return #vim.api.nvim_list_tabpages()") == 1, 5, "the review to close")

    # :q in the proposal rejects.
    c.tool("openDiff", {"filePath": str(f), "newContent": "one\nzwei\nthree\n"})
    proposal_buffer(ed, f)
    ed.nvim.command("quit")
    assert events.wait("ide/diffRejected") == {"filePath": str(f)}
    wait_for(lambda: ed.lua("return #vim.api.nvim_list_tabpages()") == 1, 5, "the review to close")

    # closeDiff (the user decided in Gemini's terminal): the proposal's
    # current text, the user's edits included; no notification when suppressed.
    c.tool("openDiff", {"filePath": str(f), "newContent": "uno\n"})
    buf = proposal_buffer(ed, f)
    ed.lua("vim.api.nvim_buf_set_lines(..., 0, -1, false, { 'uno', 'dos' })", buf)
    closed = c.tool("closeDiff", {"filePath": str(f), "suppressNotification": True})
    assert json.loads(closed["result"]["content"][0]["text"]) == {"content": "uno\ndos\n"}
    wait_for(lambda: ed.lua("return #vim.api.nvim_list_tabpages()") == 1, 5, "the review to close")
    none = c.tool("closeDiff", {"filePath": str(f)})
    assert json.loads(none["result"]["content"][0]["text"]) == {"content": None}
    # The next event is the next decision's, not a rejection of the closed one.
    c.tool("openDiff", {"filePath": str(f), "newContent": "last\n"})
    proposal_buffer(ed, f)
    ed.nvim.command("write")
    assert events.wait("ide/diffAccepted", timeout=10)["content"] == "last\n"
    assert [m["method"] for m in events.seen if m["method"].startswith("ide/diff")] \
        == ["ide/diffAccepted", "ide/diffRejected", "ide/diffAccepted"]
    assert f.read_text() == "one\ntwo\nthree\n"
    bad = c.tool("openDiff", {"filePath": str(f)})
    assert bad["error"]["code"] == -32602


def test_accepting_a_proposal_for_a_buffer_with_unsaved_changes_loses_nothing(nvim_factory, amp_env):
    """Gemini proposes from the file on disk; the buffer has an unsaved
    line. The proposal is shown over the buffer's text, Gemini is told the
    accepted text with that line, the buffer takes it at once, and Gemini's
    write then leaves the buffer saved: no conflict, nothing lost."""
    f = amp_env.workspace / "dirty.py"
    f.write_text("a = 1\nb = 2\n")
    ed = start(nvim_factory, amp_env)
    ed.edit(f)
    ed.lua("vim.api.nvim_buf_set_lines(0, 2, 2, false, { 'c = 3  # unsaved' })")
    c, disc, status = open_session(ed)
    events = Events(c)
    c.tool("openDiff", {"filePath": str(f), "newContent": "a = 100\nb = 2\n"})
    buf = proposal_buffer(ed, f)
    assert ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", buf) == ["a = 100", "b = 2", "c = 3  # unsaved"]
    ed.nvim.command("write")
    accepted = events.wait("ide/diffAccepted")["content"]
    assert accepted == "a = 100\nb = 2\nc = 3  # unsaved\n"
    assert ed.buf_lines(f) == ["a = 100", "b = 2", "c = 3  # unsaved"]
    f.write_text(accepted)  # as Gemini does after ide/diffAccepted
    wait_for(lambda: ed.lua("return vim.bo[vim.fn.bufnr(...)].modified", str(f)) is False, 10,
             "the buffer to count as saved")
    assert ed.buf_lines(f) == ["a = 100", "b = 2", "c = 3  # unsaved"]
    assert "changed on disk; unsaved changes kept" not in ed.messages()


# The real Gemini CLI ----------------------------------------------------------

needs_gemini = pytest.mark.skipif(not ah.gemini_available(), reason="needs tests/fixtures/agents (npm ci) and tmux")


def run_gemini(ed, amp_env, turns, extra_env=None):
    responses = ah.gemini_fake_responses(amp_env.root / "responses.jsonl", turns)
    env = ah.gemini_home(amp_env.home)
    env.update(fh.private_tmpdir(amp_env))
    # What a terminal Neovim starts gets (:Amp open gemini): the plugin's
    # agent variables, REMOTE_CONTAINERS included when this runs in a
    # container (as on CI), without which Gemini dials host.docker.internal.
    agent_env = ed.lua("return require('amp.agent_env').env()")
    status = gemini_status(ed)
    assert agent_env["GEMINI_CLI_IDE_SERVER_PORT"] == str(status["port"])
    assert agent_env["GEMINI_CLI_IDE_PID"] == str(ed.pid)
    assert agent_env["GEMINI_CLI_IDE_WORKSPACE_PATH"] == status["workspace_path"]
    env.update(agent_env)
    env.update(extra_env or {})
    return ah.Tmux(amp_env.root, ah.gemini_argv(responses), env, amp_env.workspace)


def review_open(ed):
    """The user opens Gemini's proposal once it arrives (:Amp review)."""
    if len(proposals(ed)) != 1:
        return False
    return ed.lua("return vim.api.nvim_win_get_buf(...)", open_review(ed, "(proposed by Gemini)"))


def edit_turn(path, old, new):
    return [{"functionCall": {"name": "replace", "args": {
        "file_path": str(path), "old_string": old, "new_string": new, "instruction": "edit"}}}]


@needs_gemini
def test_real_gemini_connects_and_sees_the_selection(nvim_factory, amp_env):
    f = amp_env.workspace / "notes.txt"
    f.write_text("alpha\nbeta line\ngamma line\ndelta\n")
    ed = start(nvim_factory, amp_env)
    discovery(ed)
    ed.edit(f)
    fh.enter_visual_lines(ed)
    # Gemini's own telemetry, to a local file, records what it sends the
    # model (the fake responses stand in for the model, not for the CLI).
    telemetry = amp_env.root / "telemetry.jsonl"
    tmux = run_gemini(ed, amp_env, [[{"text": "Fine."}]], {
        "GEMINI_TELEMETRY_ENABLED": "true", "GEMINI_TELEMETRY_TARGET": "local",
        "GEMINI_TELEMETRY_OUTFILE": str(telemetry), "GEMINI_TELEMETRY_LOG_PROMPTS": "true"})
    try:
        with tmux.screen_on_failure("Gemini did not connect"):
            wait_for(lambda: gemini_status(ed)["clients"] == 1, 60, "the real Gemini CLI to open its event stream")
        tmux.wait_screen("Type your message", 60)
        tmux.submit("/ide status")
        tmux.wait_screen("Connected to Neovim", 30)
        # The contextUpdate reached it: the active file is listed.
        wait_for(lambda: "notes.txt (active)" in tmux.screen(), 10, "the active file in /ide status")
        assert gemini_status(ed)["sessions"] == 1
        tmux.submit("what did I select?")
        tmux.wait_screen("Fine.", 60)

        def sent_context():
            # The context is JSON inside the prompt inside the telemetry's
            # JSON: its quotes and line breaks are escaped several times.
            flat = (telemetry.read_text() if telemetry.exists() else "").replace("\\", "")
            return '"activeFile":' in flat and flat
        try:
            flat = wait_for(sent_context, 30, "the request with the editor context in Gemini's telemetry")
        except AssertionError:
            raise AssertionError("telemetry: " + (telemetry.read_text()[-3000:] if telemetry.exists() else "none"))
        # What the model is told: the active file, the 1-based cursor (the
        # end of the Visual line selection: after "gamma line") and the text.
        assert f'"path": "{f}"' in flat
        assert '"cursor": {n      "line": 3,n      "character": 11n    }' in flat, flat[-3000:]
        assert '"selectedText": "beta linengamma line"' in flat, flat[-3000:]
    finally:
        tmux.close()
    wait_for(lambda: gemini_status(ed)["clients"] == 0, 10, "the stream to end with Gemini")


@needs_gemini
def test_real_gemini_open_diff_accepted_with_w_then_rejected_with_q(nvim_factory, amp_env):
    f = amp_env.workspace / "story.txt"
    f.write_text("once\nupon\na time\n")
    ed = start(nvim_factory, amp_env)
    discovery(ed)
    ed.edit(f)
    tmux = run_gemini(ed, amp_env, [
        edit_turn(f, "upon", "UPON"),
        [{"text": "Edited."}],
        edit_turn(f, "once", "twice"),
        [{"text": "Understood."}],
    ])
    try:
        wait_for(lambda: gemini_status(ed)["clients"] == 1, 60, "the real Gemini CLI to connect")
        tmux.wait_screen("Type your message", 60)
        tmux.submit("capitalize upon")
        with tmux.screen_on_failure("no review opened"):
            buf = wait_for(lambda: review_open(ed), 60, "Gemini's openDiff review in Neovim")
        assert ed.lua("return vim.api.nvim_get_current_buf()") == buf
        assert ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)") == ["once", "UPON", "a time"]
        ed.lua("vim.api.nvim_buf_set_lines(0, 2, 3, false, { 'a good time' })")
        ed.nvim.command("write")
        # Gemini writes the file itself, with the user's edit.
        tmux.wait_written(f, "once\nUPON\na good time\n", 30, "Gemini to write the accepted text")
        wait_for(lambda: ed.buf_lines(f) == ["once", "UPON", "a good time"], 10, "the buffer to reload")
        tmux.wait_screen("Edit  story.txt → Accepted", 30)
        tmux.wait_screen("Edited.", 60)

        tmux.submit("now change once")
        buf = wait_for(lambda: review_open(ed), 60, "the second review")
        assert ed.lua("return vim.api.nvim_get_current_buf()") == buf
        ed.nvim.command("quit")
        wait_for(lambda: ed.lua("return #vim.api.nvim_list_tabpages()") == 1, 10, "the review to close")
        # A rejection cancels the edit: the file stays as it was.
        # Gemini shows the outcome and cancels the request.
        tmux.wait_screen("Edit  story.txt → Rejected", 30)
        tmux.wait_screen("Request cancelled.", 30)
        assert f.read_text() == "once\nUPON\na good time\n"
    finally:
        tmux.close()
