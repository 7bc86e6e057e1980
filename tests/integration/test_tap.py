"""The tap gateway provider (agents.tap) against a gateway written from the
Provider Interface v2 specification (tap_gateway.py) and a real Neovim:
pairing with the code the user types (a wrong one: AUTH_FAILED in one
line), the issued token reused on reconnect, hello/hello.ack and the
binding to this workspace's session among several, every tool through the
gateway against real buffers, propose_edit through the review (:w with a
tweak, :q), tool.cancel, a session's shutdown closing its reviews, a
dropped connection (reconnectToken within 30 s; the calls in flight fail
DISCONNECTED) and a restarted gateway (pairing again), the size and
concurrency limits at the limit and one past, no gateway (a clear state, no
hang), and off by default."""

from __future__ import annotations

import time

import pytest

from conftest import wait_for
from review_helpers import open_review, proposals, wait_proposals
from tap_gateway import Gateway

TOOLS = {"get_selection", "get_open_files", "get_workspace_folders", "read_file", "get_diagnostics", "open_file",
         "propose_edit"}
MAX_IN_BYTES = 2_000_000  # :help amp-tap-limits
MAX_CALLS = 8


@pytest.fixture
def gateway():
    gw = Gateway()
    yield gw
    gw.stop()


def setup_for(gw: Gateway, **kw) -> dict:
    opts = {"agents": {"amp": False, "tap": True}, "tap": {"url": gw.url}, "_wait": False}
    opts.update(kw)
    return opts


def tap_status(ed) -> dict:
    return ed.lua("return require('amp').status().agents.tap") or {}


def messages(ed) -> list[str]:
    return ed.lua("return vim.split(vim.fn.execute('messages'), '\\n', { trimempty = true })")


def type_code(ed, code: str) -> None:
    """The user runs :Amp tap pair and types `code` at the vim.ui.input prompt."""
    ed.lua("""
        local code = ...
        vim.ui.input = function(opts, on_confirm)
          _G.tap_prompt = opts.prompt
          on_confirm(code)
        end""", code)
    # (An error message makes nvim_command raise: read it from :messages.)
    ed.lua("pcall(vim.cmd, 'Amp tap pair')")


def wait_pairing(ed, gw: Gateway, n: int = 1) -> str:
    """The gateway asked to pair (the n-th time): the code Copilot shows."""
    wait_for(lambda: len(gw.timeline) >= n and "pairing" in tap_status(ed).get("state", ""), 20,
             f"pairing request {n}")
    return gw.last_code()


def paired(ed, gw: Gateway, session: str = "mine"):
    """Pairs with the right code; the provider bound to `session`."""
    type_code(ed, wait_pairing(ed, gw))
    p = gw.wait_bound(session)
    wait_for(lambda: tap_status(ed).get("clients") == 1, 10, "the tap client to count as connected")
    return p


def text_of(result: dict):
    assert "error" not in result, result
    return result["data"]


def test_off_by_default_no_connection_attempt(nvim_factory, gateway, amp_env):
    gateway.add_session("mine", amp_env.workspace)
    # The gateway's address is set, agents.tap is not.
    ed = nvim_factory(agents={"amp": False, "mcp": True}, tap={"url": gateway.url}, _wait=False)
    assert ed.lua("return require('amp.config').defaults.agents.tap") is False
    wait_for(lambda: ed.lua("return require('amp').status().running"), 10, "the server")
    time.sleep(1.5)  # a connection is made within ~0.1 s when on
    assert gateway.connections == 0
    assert tap_status(ed) == {"enabled": False}
    ed.nvim.command("Amp tap")
    assert messages(ed)[-1] == "amp: tap: off (set agents.tap = true; :help amp-tap)"


def test_a_bad_url_is_refused_by_setup(nvim_factory):
    ed = nvim_factory(agents={"amp": False}, _wait=False)
    err = ed.lua("""local _, err = require('amp.config').resolve({ tap = { url = 'ws://example.com:9400' } })
        return err""")
    assert err == "amp: setup: tap.url must be a ws:// URL on this machine (localhost, 127.0.0.1 or [::1]), " \
                  "got \"ws://example.com:9400\"", err


def test_pairing_binding_and_the_token_on_reconnect(nvim_factory, gateway, amp_env):
    ws = amp_env.workspace
    gateway.add_session("elsewhere", amp_env.root / "other", foreground=True)
    gateway.add_session("parent", ws.parent, foreground=True)
    gateway.add_session("mine", ws, label="fix the parser")
    ed = nvim_factory(**setup_for(gateway))
    code = wait_pairing(ed, gateway)
    # One line tells the user what to do; nothing took the keyboard.
    wait_for(lambda: any(":Amp tap pair" in m for m in messages(ed)), 10, "the pairing notice")
    assert ed.lua("return vim.api.nvim_get_mode().mode") == "n"
    assert gateway.messages("auth") == [{"type": "auth", "mode": "pair"}]
    # A wrong code: AUTH_FAILED, one line, and a new pairing (a new code).
    type_code(ed, "000000" if code != "000000" else "111111")
    assert ed.lua("return _G.tap_prompt") == "Pairing code shown in Copilot: "
    wait_for(lambda: any("wrong pairing code (AUTH_FAILED)" in m for m in messages(ed)), 10, "the one-line error")
    wrong = [m for m in messages(ed) if "AUTH_FAILED" in m]
    assert wrong == ["amp: tap: wrong pairing code (AUTH_FAILED): run :Amp tap pair again with the new code "
                     "Copilot shows"], wrong
    code = wait_pairing(ed, gateway, 2)
    # Not six digits: refused here, the pairing still waits.
    type_code(ed, "12ab")
    assert messages(ed)[-1] == "amp: tap: a pairing code is the 6 digits the Copilot session shows"
    type_code(ed, code)
    p = gateway.wait_bound("mine")
    hello = p.hello
    assert (hello["name"], hello["protocolVersion"], hello["session"]) == ("neovim", 2, "mine")
    assert "reconnectToken" not in hello
    assert {t["name"] for t in hello["tools"]} == TOOLS
    assert all(t["parameters"]["type"] == "object" for t in hello["tools"])
    assert hello["concurrency"] == {"max": MAX_CALLS, "scope": "instance"}
    wait_for(lambda: tap_status(ed).get("clients") == 1, 10, "registered")
    status = tap_status(ed)
    assert status["session"] == "mine" and status["paired"] is True and status["provider_id"] == p.provider_id
    assert status["state"] == "connected to Copilot session fix the parser (mine)"
    wait_for(lambda: "amp: Tap connected" in messages(ed), 10, "the connection notice")
    ed.nvim.command("Amp tap")
    assert messages(ed)[-1] == "amp: tap: connected to Copilot session fix the parser (mine)"
    ed.nvim.command("Amp status")
    assert messages(ed)[-1].startswith("amp: running, tap connected, "), messages(ed)[-1]
    # (:checkhealth last: it leaves its buffer current.)
    ed.nvim.command("tabnew")
    ed.nvim.command("checkhealth amp")
    health = ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")
    assert any("OK" in line and f"tap: connected to Copilot session fix the parser (mine) ({gateway.url})" in line
               for line in health), health
    assert any("OK" in line and "a client of the tap gateway only" in line for line in health), health
    ed.nvim.command("tabclose")
    issued = next(iter(gateway.tokens))
    # The connection drops: the issued token (no pairing), then the reconnectToken.
    first_id, reconnect_token = p.provider_id, p.reconnect_token
    gateway.drop_connections()
    again = wait_for(lambda: (b := gateway.bound("mine")) and b[0].conn != p.conn and b[0], 20, "the reconnect")
    assert gateway.messages("auth")[-1] == {"type": "auth", "token": issued}
    assert again.hello["reconnectToken"] == reconnect_token
    assert again.provider_id == first_id
    assert len(gateway.timeline) == 2, "no new pairing"


def test_every_tool_through_the_gateway_against_real_buffers(nvim_factory, gateway, amp_env):
    ws = amp_env.workspace
    notes = ws / "notes.txt"
    notes.write_text("alpha\nbeta line\ngamma line\n")
    (ws / "other.txt").write_text("other\n")
    gateway.add_session("mine", ws)
    ed = nvim_factory(**setup_for(gateway))
    paired(ed, gateway)
    ed.edit(notes)
    ed.lua("vim.api.nvim_buf_set_lines(0, 0, 1, false, { 'ALPHA (unsaved)' })")
    assert text_of(gateway.call_sync("get_workspace_folders")) == {"folders": [str(ws)]}
    assert text_of(gateway.call_sync("read_file", {"path": "notes.txt"})) == "ALPHA (unsaved)\nbeta line\ngamma line\n"
    assert text_of(gateway.call_sync("read_file", {"path": str(ws / "other.txt")})) == "other\n"
    ed.nvim.input("jVj")
    wait_for(lambda: ed.lua("return vim.fn.mode()") == "V", 5, "Visual mode")
    sel = wait_for(lambda: (s := text_of(gateway.call_sync("get_selection")))["text"] and s, 5, "the selection")
    assert sel["path"] == str(notes) and sel["text"] == "beta line\ngamma line"
    assert sel["start"] == {"line": 2, "column": 1} and sel["isEmpty"] is False
    ed.nvim.input("<Esc>")
    files = text_of(gateway.call_sync("get_open_files"))["files"]
    mine = next(f for f in files if f["path"] == str(notes))
    assert mine["active"] and mine["visible"] and mine["modified"]
    ed.lua("""local ns = vim.api.nvim_create_namespace('t')
        vim.diagnostic.set(ns, 0, { { lnum = 1, col = 5, end_lnum = 1, end_col = 9,
          severity = vim.diagnostic.severity.WARN, message = 'odd word', source = 'test' } })""")
    diags = text_of(gateway.call_sync("get_diagnostics", {"path": "notes.txt"}))["files"]
    assert diags == [{"path": str(notes), "diagnostics": [{"severity": "warning", "message": "odd word",
                      "source": "test", "start": {"line": 2, "column": 6}, "end": {"line": 2, "column": 10}}]}]
    assert text_of(gateway.call_sync("open_file", {"path": "other.txt", "line": 1, "column": 3})).startswith("Opened ")
    assert ed.lua("return vim.api.nvim_buf_get_name(0)") == str(ws / "other.txt")
    assert ed.lua("return vim.api.nvim_win_get_cursor(0)") == [1, 2]
    # Refusals are errors the model reads; an unknown tool is NOT_FOUND.
    outside = gateway.call_sync("read_file", {"path": "/etc/passwd"})
    assert "outside the workspace" in outside["error"] and "data" not in outside, outside
    assert gateway.call_sync("no_such_tool")["errorCode"] == "NOT_FOUND"
    assert gateway.late_results == []


def accept_or_reject(ed, rel: str, accept: bool, change_line: tuple[int, str] | None = None) -> None:
    wait_proposals(ed, 1)
    assert proposals(ed)[0]["agent"] == "Tap"
    win = open_review(ed, f"{rel} (proposed by Tap)")
    ed.lua("vim.api.nvim_set_current_win(...)", win)
    if change_line:
        row, text = change_line
        ed.lua("vim.api.nvim_buf_set_lines(0, ..., ... + 1, false, { select(2, ...) })", row, text)
    ed.nvim.command("write" if accept else "quit")


def test_propose_edit_through_the_review(nvim_factory, gateway, amp_env):
    ws = amp_env.workspace
    crlf = ws / "dos.txt"
    crlf.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    gateway.add_session("mine", ws)
    ed = nvim_factory(**setup_for(gateway))
    paired(ed, gateway)
    # :w with the user's tweak: the tweak is on disk, as :w writes it.
    _, fut = gateway.call("propose_edit", {"path": "dos.txt", "newText": "one\nTWO\nthree\n",
                                           "description": "capitals"})
    accept_or_reject(ed, "dos.txt", True, (2, "three (mine)"))
    answer = text_of(fut.result(20))
    assert answer["decision"] == "accepted" and answer["changedByUser"] is True, answer
    assert answer["text"] == "one\r\nTWO\r\nthree (mine)\r\n"
    assert crlf.read_bytes() == b"one\r\nTWO\r\nthree (mine)\r\n"
    # :q rejects: the file stays.
    before = crlf.read_bytes()
    _, fut = gateway.call("propose_edit", {"path": "dos.txt", "newText": "gone\n"})
    accept_or_reject(ed, "dos.txt", False)
    assert text_of(fut.result(20))["decision"] == "rejected"
    assert crlf.read_bytes() == before
    wait_for(lambda: not proposals(ed), 5, "no proposal left")


def test_cancel_and_the_session_ending_close_the_reviews(nvim_factory, gateway, amp_env):
    ws = amp_env.workspace
    a = ws / "a.txt"
    a.write_text("a\n")
    gateway.add_session("mine", ws)
    ed = nvim_factory(**setup_for(gateway))
    p = paired(ed, gateway)
    # tool.cancel: CANCELLED is the call's terminal state; its review closes.
    cid, fut = gateway.call("propose_edit", {"path": "a.txt", "newText": "b\n"})
    wait_proposals(ed, 1)
    gateway.cancel(cid)
    assert fut.result(10)["errorCode"] == "CANCELLED"
    wait_for(lambda: not proposals(ed), 10, "the cancelled call's review to close")
    assert a.read_text() == "a\n"
    # The session ends: shutdown.ready, the review closed, the tap disconnected.
    _, fut = gateway.call("propose_edit", {"path": "a.txt", "newText": "c\n"})
    wait_proposals(ed, 1)
    gateway.end_session("mine")
    assert {"type": "shutdown.ready", "sessionId": "mine"} in [m for c, m in gateway.received if c == p.conn]
    assert fut.result(10)["errorCode"] == "DISCONNECTED"
    wait_for(lambda: not proposals(ed), 10, "the ended session's review to close")
    wait_for(lambda: tap_status(ed).get("clients") == 0, 10, "the tap client to be gone")
    wait_for(lambda: any(m.startswith("amp: Tap disconnected") for m in messages(ed)), 10, "the notice")
    assert a.read_text() == "a\n"
    state = wait_for(lambda: "waiting" in (s := tap_status(ed)["state"]) and s, 10, "the waiting state")
    assert state == f"connected to the gateway; no Copilot session is running (waiting for one in {ws})"
    # A new session in this workspace: bound again on the same connection.
    gateway.add_session("next", ws)
    again = gateway.wait_bound("next")
    assert again.conn == p.conn and "reconnectToken" not in again.hello
    assert gateway.late_results == []


def test_a_dropped_connection_and_a_restarted_gateway(nvim_factory, gateway, amp_env):
    ws = amp_env.workspace
    (ws / "a.txt").write_text("a\n")
    gateway.add_session("mine", ws)
    ed = nvim_factory(**setup_for(gateway))
    p = paired(ed, gateway)
    _, fut = gateway.call("propose_edit", {"path": "a.txt", "newText": "b\n"})
    wait_proposals(ed, 1)
    gateway.drop_connections()
    # The call in flight fails DISCONNECTED (not replayed); its review closes.
    assert fut.result(10)["errorCode"] == "DISCONNECTED"
    wait_for(lambda: not proposals(ed), 10, "the review of the lost call to close")
    again = wait_for(lambda: (b := gateway.bound("mine")) and b[0].conn != p.conn and b[0], 20, "the reconnect")
    assert again.hello["reconnectToken"] == p.reconnect_token and again.provider_id == p.provider_id
    assert text_of(gateway.call_sync("read_file", {"path": "a.txt"})) == "a\n"
    # The gateway restarts: the token is unknown (AUTH_FAILED), pairing again.
    gateway.restart()
    wait_for(lambda: any("no longer accepts this editor's token (AUTH_FAILED)" in m for m in messages(ed)), 20,
             "the one-line error")
    type_code(ed, wait_pairing(ed, gateway))
    fresh = gateway.wait_bound("mine")
    assert fresh.provider_id != p.provider_id
    assert text_of(gateway.call_sync("read_file", {"path": "a.txt"})) == "a\n"
    assert gateway.late_results == []
    # :Amp stop: goodbye, and the connection closes.
    ed.nvim.command("Amp stop")
    wait_for(lambda: not gateway.bound(), 10, "the provider to leave")
    assert [m for c, m in gateway.received if c == fresh.conn][-1] == {"type": "goodbye", "reason": "Neovim is closing"}


def test_limits_calls_in_flight_and_message_size(nvim_factory, gateway, amp_env):
    ws = amp_env.workspace
    for i in range(MAX_CALLS + 1):
        (ws / f"f{i}.txt").write_text(f"{i}\n")
    gateway.add_session("mine", ws)
    ed = nvim_factory(**setup_for(gateway))
    p = paired(ed, gateway)
    # MAX_CALLS calls waiting for the user: the limit; one more is refused at once.
    waiting = [gateway.call("propose_edit", {"path": f"f{i}.txt", "newText": "x\n"})[1] for i in range(MAX_CALLS)]
    wait_proposals(ed, MAX_CALLS)
    refused = gateway.call_sync("propose_edit", {"path": f"f{MAX_CALLS}.txt", "newText": "x\n"}, timeout=10)
    assert (refused["errorCode"], refused["retryable"]) == ("RATE_LIMITED", True), refused
    assert len(proposals(ed)) == MAX_CALLS
    # One done (the user rejects f0.txt's): room for one more.
    win = open_review(ed, "f0.txt (proposed by Tap)", pick="f0.txt")
    ed.lua("vim.api.nvim_set_current_win(...)", win)
    ed.nvim.command("quit")
    assert text_of(waiting[0].result(20))["decision"] == "rejected"
    assert text_of(gateway.call_sync("read_file", {"path": "f0.txt"})) == "0\n"
    # A message of MAX_IN_BYTES is read; one byte more closes the connection
    # (1009) and the provider reconnects with its token.
    _, fut = gateway.call("read_file", {"path": "f0.txt"}, size=MAX_IN_BYTES)
    assert text_of(fut.result(20)) == "0\n"
    _, fut = gateway.call("read_file", {"path": "f0.txt"}, size=MAX_IN_BYTES + 1)
    assert fut.result(20)["errorCode"] == "DISCONNECTED"
    wait_for(lambda: any(f"a message of {MAX_IN_BYTES + 1} bytes, over the limit of {MAX_IN_BYTES}" in m
                         for m in messages(ed)), 10, "the one-line error")
    again = wait_for(lambda: (b := gateway.bound("mine")) and b[0].conn != p.conn and b[0], 20, "the reconnect")
    assert again.hello["reconnectToken"] == p.reconnect_token
    # The other reviews' calls were lost with the connection: their reviews closed.
    wait_for(lambda: not proposals(ed), 10, "the reviews of the lost calls to close")
    assert all(f.result(5)["errorCode"] == "DISCONNECTED" for f in waiting[1:])


def test_a_gateway_that_stops_reading_is_left_after_the_write_timeout(nvim_factory, gateway, amp_env):
    ws = amp_env.workspace
    (ws / "big.txt").write_text("x" * 99 + "\n" * 1 + ("y" * 99 + "\n") * 39_999)  # 4 MB
    gateway.add_session("mine", ws)
    ed = nvim_factory(**setup_for(gateway))
    p = paired(ed, gateway)
    gateway.pause_reading(p)
    t0 = time.monotonic()
    # 6 answers of 4 MB: more than the socket buffers hold.
    for _ in range(6):
        gateway.call("read_file", {"path": "big.txt"}, provider=p)
    again = wait_for(lambda: (b := gateway.bound("mine")) and b[0].conn != p.conn and b[0], 90,
                     "the connection to be left and made again")
    waited = time.monotonic() - t0
    assert waited > 10, f"left after {waited:.1f} s, before the 15 s write timeout"
    assert again.hello["reconnectToken"] == p.reconnect_token
    assert ed.lua("return 1 + 1") == 2


def test_no_gateway_a_clear_state_and_no_hang(nvim_factory, amp_env):
    gw = Gateway()
    url = gw.url
    gw.stop()  # nothing listens there now
    ed = nvim_factory(agents={"amp": False, "tap": True}, tap={"url": url}, _wait=False)
    state = wait_for(lambda: "next try" in (s := tap_status(ed).get("state", "")) and s, 20, "the retry state")
    assert state.startswith(f"no tap gateway at {url}: ") and state.endswith(" s)"), state
    ed.nvim.command("Amp tap")
    last = messages(ed)[-1]
    assert last.startswith(f"amp: tap: no tap gateway at {url}") and "\n" not in last
    # The editor answers at once meanwhile, and nobody was told an error.
    t0 = time.monotonic()
    assert ed.lua("return 1 + 1") == 2
    assert time.monotonic() - t0 < 2
    assert [m for m in messages(ed) if m.startswith("amp:")] == [last], "no notice but the one asked for"
    # The wait doubles: 1 s, 2 s, 4 s (at most 30 s, :help amp-tap-limits).
    seen = {state.rsplit("(", 1)[-1]}
    wait_for(lambda: seen.add(tap_status(ed)["state"].rsplit("(", 1)[-1]) or "next try in 4 s)" in seen, 20,
             "the third wait")
    assert {"next try in 1 s)", "next try in 2 s)"} <= seen, seen
    ed.lua("pcall(vim.cmd, 'Amp tap pair 123456')")
    assert messages(ed)[-1] == "amp: tap: no pairing is waiting for a code (see :Amp tap)"
