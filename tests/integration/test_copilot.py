"""The GitHub Copilot CLI front-end (agents.copilot): its lockfile in
~/.copilot/ide/ and its private Unix socket, MCP Streamable HTTP over that
socket with the lockfile's nonce, the selection it pushes from the one
published state, open_diff through the review view (read-only: Copilot
writes its own proposal), and the real Copilot CLI attached to a real
Neovim, offline."""

import json
import os
import socket
import stat
import time

import pytest

from conftest import dead_pid, wait_for
import agents_helpers as ah
import front_end_helpers as fh
from mcp_clients import Events, Http, text_of
from openai_mock import OpenAIMock, request_text
from resilience_helpers import amp_log
from review_helpers import open_review, proposals, wait_proposals, where_the_user_is, winbar

SETUP = {"agents": {"amp": True, "copilot": True}}


def start(nvim_factory, amp_env, **kw):
    """With a private $TMPDIR: the socket's directory is $TMPDIR/amp-nvim-<uid>/copilot."""
    return fh.start_with_private_tmpdir(nvim_factory, amp_env, SETUP, **kw)


def copilot_status(ed):
    return fh.agent_status(ed, "copilot")


def lockfile(ed):
    return fh.wait_discovery_file(
        ed, "copilot", "socket", lambda status: ed.env.home / ".copilot" / "ide" / os.path.basename(status["lockfile"]),
        "the Copilot server", "the Copilot lockfile")


def nonce(lock):
    scheme, secret = lock["headers"]["Authorization"].split(" ", 1)
    assert scheme == "Nonce"
    return secret


def open_session(ed):
    path, lock, status = lockfile(ed)
    c = Http(None, nonce(lock), unix=lock["socketPath"])
    c.init = c.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                      "clientInfo": {"name": "copilot-cli", "version": "test"}})
    assert c.notify("notifications/initialized") == 202
    return c, lock, status


def test_copilot_is_off_by_default(nvim_factory, amp_env):
    ed = nvim_factory(_extra_env=fh.private_tmpdir(amp_env))
    assert copilot_status(ed) == {"enabled": False}
    assert not (amp_env.home / ".copilot").exists()
    assert not (amp_env.root / "tmp" / f"amp-nvim-{os.geteuid()}").exists()


def test_lockfile_and_socket_are_private_follow_cd_and_go_on_exit(nvim_factory, amp_env):
    ide = amp_env.home / ".copilot" / "ide"
    ide.mkdir(parents=True)
    stale = ide / "11111111-1111-4111-8111-111111111111.lock"
    stale.write_text(json.dumps({"pid": dead_pid(), "socketPath": "/nowhere"}))
    alive = ide / "22222222-2222-4222-8222-222222222222.lock"
    alive.write_text(json.dumps({"pid": os.getpid(), "socketPath": "/elsewhere"}))
    # A dead editor's socket in our directory is swept too.
    sock_dir = amp_env.root / "tmp" / f"amp-nvim-{os.geteuid()}" / "copilot"
    sock_dir.mkdir(parents=True)
    dead_socket = sock_dir / f"{dead_pid()}.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(dead_socket))
    s.close()
    ed = start(nvim_factory, amp_env)
    path, lock, status = lockfile(ed)
    assert set(lock) == {"socketPath", "scheme", "headers", "pid", "timestamp", "workspaceFolders", "ideName"}
    assert lock["scheme"] == "pipe" and lock["pid"] == ed.pid
    assert lock["workspaceFolders"] == [str(amp_env.workspace)]
    assert abs(lock["timestamp"] / 1000 - time.time()) < 60
    assert len(nonce(lock)) == 43 and nonce(lock) != ed.lock["authToken"]
    assert list(lock["headers"]) == ["Authorization"]
    # <uuid>.lock, version 4.
    name = path.name
    assert len(name) == len("xxxxxxxx-xxxx-4xxx-8xxx-xxxxxxxxxxxx.lock") and name[14] == "4", name
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    sock = lock["socketPath"]
    assert sock == status["socket"] == str(sock_dir / f"{ed.pid}.sock")
    assert stat.S_ISSOCK(os.stat(sock).st_mode)
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(sock_dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(sock_dir.parent).st_mode) == 0o700
    wait_for(lambda: not stale.exists() and not dead_socket.exists(), 5, "the stale lockfile and socket to go")
    assert alive.exists()
    assert status["discovery_file"] == str(path) and status["lockfile"] == str(path)
    # Copilot needs no variable: it takes the lockfile whose folder is its own.
    assert status["env"] == {} or status["env"] == []
    other = amp_env.root / "elsewhere"
    other.mkdir()
    ed.nvim.command("cd " + str(other))
    wait_for(lambda: json.loads(path.read_text())["workspaceFolders"] == [str(other)], 10, "the file to follow :cd")
    assert json.loads(path.read_text())["socketPath"] == sock
    assert ed.quit() == 0
    assert not path.exists() and not os.path.exists(sock)
    assert alive.exists()


def test_a_wrong_nonce_is_refused_and_server_discover_is_answered(nvim_factory, amp_env):
    ed = start(nvim_factory, amp_env)
    path, lock, status = lockfile(ed)
    sock, secret = lock["socketPath"], nonce(lock)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
    ok = Http(None, secret, unix=sock)
    assert ok.status("POST", init, token=None) == 401
    assert ok.status("POST", init, token="wrong") == 401
    assert ok.status("POST", init, token=secret + "x") == 401
    assert ok.status("POST", init, headers={"X-Unused": "1"}, token="") == 401
    # The Bearer scheme is not the Nonce one, even with the right secret.
    bearer = Http(None, secret, unix=sock)
    bearer.scheme = "Bearer"
    assert bearer.status("POST", init) == 401
    for host in ("evil.test", "localhost.evil.test"):
        assert Http(None, secret, unix=sock, host=host).status("POST", init) == 403, host
    assert ok.status("POST", init, headers={"Origin": "http://localhost"}) == 403
    # Copilot's first request: server/discover, without a session: -32601,
    # and it goes on with initialize.
    conn, resp = ok.send("POST", {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {}},
                         headers={"X-Copilot-Session-Id": "s", "X-Copilot-PID": str(os.getpid())})
    reply = json.loads(resp.read())
    conn.close()
    assert resp.status == 200 and reply["error"]["code"] == -32601, reply
    # Any other request without a session still needs one.
    assert ok.status("POST", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}) == 400
    # A body without Content-Length (chunked, as Node sends it) is read.
    body = json.dumps(init).encode()
    raw = socket.socket(socket.AF_UNIX)
    raw.settimeout(10)
    raw.connect(sock)
    raw.sendall(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Nonce " + secret.encode()
                + b"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
    got = b""
    while b"\r\n\r\n" not in got or not got.rstrip().endswith(b"}"):
        chunk = raw.recv(65536)
        if not chunk:
            break
        got += chunk
    raw.close()
    assert got.startswith(b"HTTP/1.1 200") and b"mcp-session-id" in got.lower(), got[:300]
    assert json.loads(got.split(b"\r\n\r\n", 1)[1])["result"]["protocolVersion"] == "2025-11-25"


def test_tools_selection_changed_diagnostics_and_status(nvim_factory, amp_env):
    f = amp_env.workspace / "a.txt"
    f.write_text("héllo 😀 wörld\nsecond line\nthird\n")
    ed = start(nvim_factory, amp_env)
    ed.edit(f)
    c, lock, status = open_session(ed)
    assert c.init["result"]["protocolVersion"] == "2025-11-25"
    assert len(c.session) == 43
    tools = [t["name"] for t in c.request("tools/list")["result"]["tools"]]
    assert tools == ["get_selection", "get_diagnostics", "open_diff", "close_diff", "update_session_name"]
    events = Events(c)
    # Sent at once when the stream opens: the cursor, an empty selection.
    first = events.wait("selection_changed")
    assert first["filePath"] == str(f) and first["fileUrl"] == f.as_uri()
    assert first["selection"] == {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0},
                                  "isEmpty": True}
    assert first["text"] == ""
    # A Visual selection of lines 2-3: 0-based lines, UTF-16 characters.
    ed.lua("vim.api.nvim_win_set_cursor(0, { 2, 0 })")
    ed.nvim.input("Vj")
    sel = events.wait("selection_changed", lambda p: p["text"].endswith("third"))
    assert sel["text"] == "second line\nthird"
    assert sel["selection"]["start"] == {"line": 1, "character": 0} and sel["selection"]["isEmpty"] is False
    # The newest state only: after a burst, the last one arrives last.
    ed.nvim.input("<Esc>")
    ed.lua("vim.api.nvim_win_set_cursor(0, { 1, 0 })")
    for col in (1, 2, 3, 11):
        ed.lua("vim.api.nvim_win_set_cursor(0, { 1, ... })", col)
        ed.nvim.input("<Ignore>")
    # Byte column 11 is after the emoji: UTF-16 character 8.
    last = events.wait("selection_changed", lambda p: p["selection"]["start"] == {"line": 0, "character": 8})
    assert last["selection"]["isEmpty"] is True
    # get_selection: the newest selection that was more than a cursor.
    got = text_of(c.tool("get_selection", {}))
    assert got["text"] == "second line\nthird" and got["current"] is False
    # get_diagnostics: Neovim's, in VS Code's shape.
    ed.lua("""
        local ns = vim.api.nvim_create_namespace('copilot-test')
        vim.diagnostic.set(ns, 0, { { lnum = 0, col = 11, end_col = 12, severity = vim.diagnostic.severity.ERROR,
                                      message = 'bad word', source = 'test' } })""")
    diags = text_of(c.tool("get_diagnostics", {"uri": f.as_uri()}))
    assert diags == [{"uri": f.as_uri(), "diagnostics": [{"message": "bad word", "severity": "Error",
                      "source": "test", "range": {"start": {"line": 0, "character": 8},
                                                  "end": {"line": 0, "character": 9}}}]}], diags
    assert text_of(c.tool("update_session_name", {"name": "Fix the bug"})) == {"success": True}
    # The log is written off the main thread.
    wait_for(lambda: "is named Fix the bug" in amp_log(ed), 10, "the session's name in the log")
    # Registered by name, listed by :Amp status and :checkhealth amp.
    wait_for(lambda: copilot_status(ed)["clients"] == 1, 5, "one Copilot client")
    wait_for(lambda: ed.lua("return require('amp').statusline()") == "amp: 1 agent (Copilot)", 5,
             "the statusline to name Copilot")
    ed.nvim.command("Amp status")
    assert f"copilot on {status['socket']}, 1 client" in ed.messages()
    ed.nvim.command("checkhealth amp")
    health = "\n".join(ed.nvim.current.buffer[:])
    assert f"copilot: socket {status['socket']}, 1 client, discovery file {status['lockfile']}" in health, health
    # :Amp ref: add_selection, which Copilot types into its prompt as @file:2-3.
    ed.nvim.command("wincmd p")
    ed.nvim.command("buffer " + str(f))
    ed.nvim.command("2,3Amp ref")
    added = events.wait("add_selection")
    assert added["filePath"] == str(f) and added["selectedText"] is None
    assert (added["selection"]["start"]["line"], added["selection"]["end"]["line"]) == (1, 2)
    # DELETE ends the session and its stream.
    assert c.status("DELETE") == 200
    assert events.ended()
    wait_for(lambda: copilot_status(ed)["sessions"] == 0, 5, "no session")


def open_diff(c, path, text, tab):
    """Sends open_diff on a connection of its own (it answers when the
    user decides); returns how to read the answer."""
    body = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "open_diff", "arguments": {"original_file_path": str(path), "new_file_contents": text,
                                           "tab_name": tab}}}).encode()
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(c.unix)
    s.sendall(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Nonce " + c.token.encode()
              + b"\r\nMcp-Session-Id: " + c.session.encode()
              + b"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
              + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")

    def answer():
        got = b""
        while True:
            head, _, rest = got.partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), None)
            if length is not None and len(rest) >= length:
                s.close()
                return text_of(json.loads(rest[:length]))
            chunk = s.recv(65536)
            assert chunk, f"closed without an answer: {got!r}"
            got += chunk
    return answer


def review_window(ed, path):
    rel = os.path.relpath(path, ed.cwd)
    return open_review(ed, f"{rel} (proposed by Copilot)", pick=f"{rel} (Copilot's proposal)", arg=rel)


def test_open_diff_saved_with_w_rejected_with_q_and_the_file_is_copilots_to_write(nvim_factory, amp_env):
    f = amp_env.workspace / "code.py"
    f.write_text("one\ntwo\nthree\n")
    ed = start(nvim_factory, amp_env)
    ed.edit(f)
    c, lock, status = open_session(ed)
    user = where_the_user_is(ed)
    answer = open_diff(c, f, "one\nTWO\nthree\nfour\n", "[Copilot CLI] - code.py (a1b2c3)")
    wait_proposals(ed, 1)
    assert where_the_user_is(ed) == user, "a proposal that arrives takes nothing from the user"
    win = review_window(ed, f)
    buf = ed.lua("return vim.api.nvim_win_get_buf(...)", win)
    assert ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", buf) == ["one", "TWO", "three", "four"]
    # Copilot writes its own proposal on SAVED: the review offers no edit
    # and says so.
    bar = winbar(ed, win)
    assert "Copilot writes its own proposal: edits here are not kept" in bar, bar
    assert ed.lua("return vim.bo[...].modifiable", buf) is False
    # Rejecting one hunk would be an edit too: refused, nothing decided.
    ed.lua("vim.api.nvim_set_current_win(...)", win)
    ed.lua("vim.api.nvim_win_set_cursor(0, { 2, 0 })")
    ed.lua("require('amp.review').reject_hunk()")
    assert "edits here are not kept: :q rejects it all" in ed.messages()
    assert ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", buf) == ["one", "TWO", "three", "four"]
    # An edit forced in anyway: :w decides nothing and says why; undone, :w saves.
    ed.lua("vim.bo[...].modifiable = true", buf)
    ed.lua("vim.api.nvim_buf_set_lines(..., 1, 2, false, { 'mine' })", buf)
    ed.nvim.command("write")
    assert "undo your edits (u) to accept it, or :q to reject it" in ed.messages()
    assert len(proposals(ed)) == 1
    ed.nvim.command("undo")
    ed.nvim.command("write")
    assert answer() == {"success": True, "result": "SAVED", "trigger": "accepted_in_neovim",
                        "message": "The user accepted the proposal in Neovim (:w)"}
    # The editor writes nothing: Copilot does.
    assert f.read_text() == "one\ntwo\nthree\n"
    wait_for(lambda: ed.lua("return #vim.api.nvim_list_tabpages()") == 1, 5, "the review to close")
    f.write_text("one\nTWO\nthree\nfour\n")  # as Copilot does after SAVED
    wait_for(lambda: ed.buf_lines(f) == ["one", "TWO", "three", "four"], 10, "the buffer to reload")

    # :q rejects.
    answer = open_diff(c, f, "uno\n", "[Copilot CLI] - code.py (d4e5f6)")
    review_window(ed, f)
    ed.nvim.command("quit")
    assert answer()["result"] == "REJECTED"
    assert f.read_text() == "one\nTWO\nthree\nfour\n"

    # close_diff (the user decided in Copilot's terminal): the review closes,
    # the waiting open_diff is answered, and a second close finds none.
    answer = open_diff(c, f, "dos\n", "tab three")
    wait_proposals(ed, 1)
    assert text_of(c.tool("close_diff", {"tab_name": "tab three"})) == {
        "success": True, "already_closed": False, "tab_name": "tab three", "message": "The review was closed"}
    assert answer()["result"] == "REJECTED"
    wait_for(lambda: not proposals(ed), 10, "the closed review to go")
    assert text_of(c.tool("close_diff", {"tab_name": "tab three"}))["already_closed"] is True
    assert f.read_text() == "one\nTWO\nthree\nfour\n"
    bad = c.tool("open_diff", {"original_file_path": str(f), "tab_name": "x"})
    assert bad["error"]["code"] == -32602


def test_a_close_diff_right_after_its_open_diff_leaves_no_review_behind(nvim_factory, amp_env):
    """Copilot's edit dialog re-runs when its IDE connection is renewed
    (a few times while it starts): close_diff of the old tab then comes a
    few ms after its open_diff, before that review is shown. It must close
    it all the same: no proposal is left waiting for a user whom Copilot
    no longer asks."""
    f = amp_env.workspace / "race.txt"
    f.write_text("a\n")
    ed = start(nvim_factory, amp_env)
    c, lock, status = open_session(ed)
    closer = Http(None, c.token, unix=c.unix)
    closer.session = c.session
    for i in range(8):
        answer = open_diff(c, f, f"b{i}\n", f"tab {i}")
        # Copilot's close_diff follows its open_diff on the wire: the server
        # has taken the open_diff (it may not show its review yet).
        wait_for(lambda: copilot_status(ed)["opening"] == 1, 5, "the open_diff taken")
        closed = text_of(closer.tool("close_diff", {"tab_name": f"tab {i}"}))
        assert closed["already_closed"] is False, closed
        assert answer()["result"] == "REJECTED"
    # The one that is not closed stays, and only it.
    answer = open_diff(c, f, "last\n", "tab last")
    assert [p["name"] for p in wait_proposals(ed, 1)] == ["tab last"]
    assert text_of(closer.tool("close_diff", {"tab_name": "tab last"}))["already_closed"] is False
    assert answer()["result"] == "REJECTED"
    wait_for(lambda: not proposals(ed), 5, "no proposal left")
    assert f.read_text() == "a\n"


def test_a_close_diff_read_before_its_open_diff_rejects_it_without_a_review(nvim_factory, amp_env):
    """Each tool call is an HTTP request of its own: a close_diff can reach
    the server before the open_diff it closes. That open_diff (same
    session, same tab, within 5 s) is answered REJECTED at once; nothing
    is shown, nothing waits, and the next open_diff of the tab is a review
    as usual."""
    f = amp_env.workspace / "early.txt"
    f.write_text("a\n")
    ed = start(nvim_factory, amp_env)
    c, lock, status = open_session(ed)
    closed = text_of(c.tool("close_diff", {"tab_name": "early tab"}))
    assert closed["already_closed"] is True, closed
    assert open_diff(c, f, "b\n", "early tab")()["result"] == "REJECTED"
    assert not proposals(ed) and copilot_status(ed)["opening"] == 0
    answer = open_diff(c, f, "c\n", "early tab")
    assert [p["name"] for p in wait_proposals(ed, 1)] == ["early tab"]
    assert text_of(c.tool("close_diff", {"tab_name": "early tab"}))["already_closed"] is False
    assert answer()["result"] == "REJECTED"
    assert f.read_text() == "a\n"


def test_a_disconnected_copilot_s_review_closes_and_nothing_is_written(nvim_factory, amp_env):
    f = amp_env.workspace / "gone.txt"
    f.write_text("before\n")
    ed = start(nvim_factory, amp_env)
    c, lock, status = open_session(ed)
    events = Events(c)
    wait_for(lambda: copilot_status(ed)["clients"] == 1, 5, "one Copilot client")
    answer = open_diff(c, f, "after\n", "[Copilot CLI] - gone.txt (0)")
    review_window(ed, f)
    # Copilot goes: its event stream closes (and stays closed past 2 s).
    events.close()
    wait_for(lambda: not proposals(ed), 10, "the review to close with its agent")
    assert answer()["result"] == "REJECTED"
    assert "Copilot disconnected: its proposal for gone.txt was closed (nothing written)" in ed.messages()
    wait_for(lambda: ed.lua("return #vim.api.nvim_list_tabpages()") == 1, 5, "the view to close")
    assert f.read_text() == "before\n"
    assert copilot_status(ed)["clients"] == 0


# The real Copilot CLI ---------------------------------------------------------

needs_copilot = pytest.mark.skipif(not ah.copilot_available(),
                                   reason="needs tests/fixtures/agent-copilot (npm ci) and tmux")
TRUST = "Do you trust the files in this folder?"


def run_copilot(ed, amp_env, script):
    """Copilot CLI in tmux in the workspace, offline against a model
    stand-in, with its log; returns (tmux, model, log dir). Its folder-trust
    question is answered (the lockfile does not vouch for the folder)."""
    model = OpenAIMock(script)
    env = ah.copilot_env(amp_env.home, model.url)
    # What a terminal Neovim starts gets (:Amp open copilot): Copilot needs
    # no variable of ours, only the workspace as its working folder.
    assert copilot_status(ed)["env"] in ({}, [])
    logs = amp_env.root / "copilot-logs"
    tmux = ah.Tmux(amp_env.root, [str(ah.COPILOT), "--log-dir", str(logs), "--log-level", "all"], env,
                   amp_env.workspace)
    try:
        tmux.answer_dialog(TRUST, 60)
        settled(ed, tmux, logs)
    except AssertionError:
        tmux.close()
        model.close()
        raise
    return tmux, model, logs


def settled(ed, tmux, logs, quiet: float = 1.5):
    """Waits until Copilot's connection to Neovim has settled: once its
    folder is trusted it reloads its MCP servers and renews the IDE
    connection (a prompt sent meanwhile goes without the selection, which
    it forgets while disconnected). Settled: its screen says it reloaded
    with the IDE connected, and its log's last IDE line is "Connected" and
    stays so for `quiet` seconds."""
    tmux.wait_screen("MCP Servers reloaded: 1 server connected", 60)
    last, since = None, time.monotonic()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        lines = [line for line in copilot_log(logs).splitlines() if "IDE MCP server" in line]
        now = (len(lines), lines[-1] if lines else "")
        if now != last:
            last, since = now, time.monotonic()
        elif ("Connected to IDE MCP server" in now[1] and copilot_status(ed)["clients"] == 1
              and time.monotonic() - since >= quiet):
            return
        time.sleep(0.1)
    raise AssertionError(f"Copilot's IDE connection never settled: {last}\n{tmux.screen()}")


def copilot_log(logs):
    return "\n".join(p.read_text(errors="replace") for p in sorted(logs.glob("*.log")))


def session_events(amp_env) -> list[dict]:
    """Copilot's record of its session(s): ~/.copilot/session-state/<id>/events.jsonl."""
    out = []
    for p in sorted((amp_env.home / ".copilot" / "session-state").glob("*/events.jsonl")):
        for line in p.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


@needs_copilot
@pytest.mark.real_agent
def test_real_copilot_connects_sees_the_selection_and_takes_amp_send(nvim_factory, amp_env):
    f = amp_env.workspace / "notes.txt"
    f.write_text("alpha\nbeta line\ngamma line\ndelta\n")
    ed = start(nvim_factory, amp_env)
    lockfile(ed)
    ed.edit(f)
    fh.enter_visual_lines(ed)
    tmux, model, logs = run_copilot(ed, amp_env, [[{"type": "text", "text": "Fine."}]])
    try:
        try:
            wait_for(lambda: "Connected to IDE MCP server: Neovim" in copilot_log(logs), 60,
                     "Copilot to log its connection to Neovim")
        except AssertionError:
            raise AssertionError("not connected; screen:\n" + tmux.screen() + copilot_log(logs)[-3000:])
        wait_for(lambda: copilot_status(ed)["clients"] == 1, 10, "Copilot's event stream")
        assert copilot_status(ed)["pids"], "the connected process is known"
        tmux.submit("what did I select?")
        try:
            body = model.wait_for_request("beta line\ngamma line", request_text, 60)
        except AssertionError:
            raise AssertionError("no selection in the model request; screen:\n" + tmux.screen()
                                 + "\n".join(request_text(r)[-1500:] for r in model.requests))
        # The selection's file is named to the model with it.
        assert "notes.txt" in request_text(body)
        tmux.wait_screen("Fine.", 60)
        # :Amp send types into the terminal Copilot runs in (a tmux pane),
        # found from the process connected to our Unix socket.
        ed.nvim.input("<Esc>")
        ed.nvim.command("Amp send hello from neovim")
        try:
            tmux.wait_screen("hello from neovim", 20)
        except AssertionError as e:
            raise AssertionError(f"messages: {ed.messages()}; status: {copilot_status(ed)}") from e
        wait_for(lambda: "hello from neovim" in "\n".join(request_text(r) for r in model.requests), 30,
                 "the sent message to reach the model")
    finally:
        tmux.close()
        model.close()
    wait_for(lambda: copilot_status(ed)["clients"] == 0, 10, "Copilot to be gone")


def edit(path, old, new):
    return [{"type": "tool_use", "name": "edit", "input": {"path": str(path), "old_str": old, "new_str": new}}]


def review_of_copilot(ed, settle: float = 1.5):
    """The user opens Copilot's proposal once it arrives (:Amp review).
    While Copilot starts it renews its IDE connection a few times, and its
    edit dialog then closes its review and asks again under a new tab name
    (within milliseconds): the one proposal that stays for `settle` seconds
    is the one Copilot waits for."""
    seen = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        now = [p["name"] for p in proposals(ed)]
        if len(now) == 1 and seen and seen[0] == now[0] and time.monotonic() - seen[1] >= settle:
            return open_review(ed, "(proposed by Copilot)")
        if len(now) != 1 or not seen or seen[0] != now[0]:
            seen = (now[0], time.monotonic()) if len(now) == 1 else None
        time.sleep(0.1)
    raise AssertionError(f"no settled proposal: {proposals(ed)}")


@needs_copilot
@pytest.mark.real_agent
def test_real_copilot_edit_saved_with_w_as_proposed_then_rejected_with_q(nvim_factory, amp_env):
    f = amp_env.workspace / "story.txt"
    f.write_text("once\nupon\na time\n")
    ed = start(nvim_factory, amp_env)
    lockfile(ed)
    ed.edit(f)
    tmux, model, logs = run_copilot(ed, amp_env, [
        edit(f, "upon", "UPON"),
        [{"type": "text", "text": "Edited."}],
        edit(f, "once", "twice"),
        [{"type": "text", "text": "Understood."}],
    ])
    try:
        wait_for(lambda: copilot_status(ed)["clients"] == 1, 60, "Copilot to connect")
        tmux.submit("capitalize upon")
        try:
            win = review_of_copilot(ed)
        except AssertionError:
            raise AssertionError("no review; screen:\n" + tmux.screen() + copilot_log(logs)[-3000:])
        buf = ed.lua("return vim.api.nvim_win_get_buf(...)", win)
        assert ed.lua("return vim.api.nvim_get_current_buf()") == buf
        assert ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)") == ["once", "UPON", "a time"]
        # The tweak: not offered. The view says so and takes no edit; one
        # forced in is not accepted; undone, :w accepts the proposal as is.
        assert "Copilot writes its own proposal: edits here are not kept" in winbar(ed, win)
        assert ed.lua("return vim.bo.modifiable") is False
        ed.lua("vim.bo.modifiable = true")
        ed.lua("vim.api.nvim_buf_set_lines(0, 2, 3, false, { 'a good time' })")
        ed.nvim.command("write")
        assert "undo your edits (u) to accept it" in ed.messages()
        time.sleep(1)
        assert f.read_text() == "once\nupon\na time\n", "nothing is decided by that :w"
        ed.nvim.command("undo")
        ed.nvim.command("write")
        # Copilot writes its proposal: the bytes on disk are its own.
        tmux.wait_written(f, "once\nUPON\na time\n", 30, "Copilot to write its proposal")
        wait_for(lambda: ed.buf_lines(f) == ["once", "UPON", "a time"], 10, "the buffer to reload")
        assert ed.lua("return vim.bo[vim.fn.bufnr(...)].modified", str(f)) is False
        tmux.wait_screen("Edited.", 60)

        tmux.submit("now change once")
        win = review_of_copilot(ed)
        ed.nvim.command("quit")
        wait_for(lambda: ed.lua("return #vim.api.nvim_list_tabpages()") == 1, 10, "the review to close")
        # Rejected: the file stays as it was, and Copilot records it.
        time.sleep(1)
        assert f.read_text() == "once\nUPON\na time\n"

        def outcomes():
            done = [e for e in session_events(amp_env) if e.get("type") == "tool.execution_complete"]
            return len(done) >= 2 and done
        try:
            done = wait_for(outcomes, 30, "Copilot's record of both edits")
        except AssertionError:
            raise AssertionError("events: " + json.dumps(session_events(amp_env))[-4000:])
        assert done[0]["data"]["success"] is True, done[0]
        assert done[1]["data"]["success"] is False and done[1]["data"]["error"]["code"] == "rejected", done[1]
        # Both decided in Neovim (Copilot's own dialog was never answered).
        decided = [e["data"]["result"]["kind"] for e in session_events(amp_env)
                   if e.get("type") == "permission.completed"]
        assert decided == ["approved", "denied-interactively-by-user"], decided
    finally:
        tmux.close()
        model.close()


@needs_copilot
@pytest.mark.real_agent
def test_real_copilot_opened_with_amp_open_attaches_with_nothing_set(nvim_factory, amp_env, tmp_path):
    """`:Amp open copilot` with the default command (`copilot` on PATH):
    Copilot attaches to this Neovim by its working folder alone, `:Amp
    send` reaches it, and :checkhealth finds the binary and its version."""
    mock = OpenAIMock([[{"type": "text", "text": "Hello back."}]])
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "copilot").symlink_to(ah.COPILOT)
    try:
        env = ah.copilot_env(amp_env.home, mock.url)
        env.update({name: None for name in ah.CI_MARKERS}, PATH=f"{bindir}:{os.environ['PATH']}",
                   **fh.private_tmpdir(amp_env))
        ed = nvim_factory(**SETUP, _extra_env=env)
        lockfile(ed)
        ed.nvim.command("set columns=160 lines=45")
        ed.nvim.command("Amp open copilot")
        term = ed.lua("local t = require('amp.terminal').get('copilot'); return { buf = t.buf, job = t.job }")

        def screen():
            return "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", term["buf"]))
        try:
            wait_for(lambda: TRUST in screen(), 60, "Copilot's folder-trust question")
        except AssertionError:
            raise AssertionError("screen:\n" + screen())
        # Its default (Yes, for this session), again while it stays: a key
        # pressed while the dialog is still being drawn can be lost.
        for _ in range(5):
            time.sleep(0.5)
            ed.lua("vim.fn.chansend(..., '\\r')", term["job"])
            deadline = time.monotonic() + 5
            while TRUST in screen() and time.monotonic() < deadline:
                time.sleep(0.2)
            if TRUST not in screen():
                break
        wait_for(lambda: copilot_status(ed)["clients"] == 1, 60, "Copilot in :Amp open to attach")
        assert copilot_status(ed)["pids"]
        time.sleep(1)
        ed.nvim.command("Amp send hello over amp open")
        wait_for(lambda: "hello over amp open" in "\n".join(request_text(r) for r in mock.requests), 60,
                 "the sent text to reach the model")
        wait_for(lambda: "Hello back." in screen(), 30, "the answer on Copilot's screen")
        ed.nvim.command("checkhealth amp")
        health = "\n".join(ed.nvim.current.buffer[:])
        assert f"copilot (GitHub Copilot CLI) 1.0.102: {bindir / 'copilot'}" in health, health
    finally:
        mock.close()
