"""OpenCode, a client of the Claude front-end (agents.claude): it reads
Claude's lockfiles (`~/.claude/ide/*.lock`, sending the token) or dials a
port variable without any token, which is refused (one policy for every
agent); `:Amp open opencode` therefore starts it with the port variables
empty, so it takes the lockfile route. It sends `initialize` and
`notifications/initialized` and nothing else, and is told apart from
Claude Code by its clientInfo (named OpenCode, lines counted from 1).

The real OpenCode (tests/fixtures/agent-opencode) runs in this Neovim's
terminal, offline against a local OpenAI-compatible stand-in
(tests/integration/openai_mock.py) through a provider entry in its config."""

import json
import os
import time

import pytest
from websockets.exceptions import ConnectionClosed

from conftest import wait_for
import agents_helpers as ah
import front_end_helpers as fh
from mcp_clients import Mcp
from openai_mock import OpenAIMock
from resilience_helpers import amp_log
from test_claude import claude_lock, claude_status
from test_terminal import NO_CI, notes, read_env, record_notes, recording_agent

SETUP = {"agents": {"amp": True, "claude": True}}


def record_events(ed):
    ed.lua("""
        _G.seen = {}
        vim.api.nvim_create_autocmd('User', { pattern = { 'AmpClientConnected', 'AmpClientDisconnected' },
          callback = function(ev) table.insert(_G.seen, { ev.match, ev.data.agent, ev.data.name }) end })
    """)


def test_the_token_less_port_route_is_refused(nvim_factory):
    """What OpenCode does with CLAUDE_CODE_SSE_PORT or OPENCODE_EDITOR_SSE_PORT
    set: a WebSocket to the port with no token and no subprotocol. Refused
    like any client without the token, and never counted as connected."""
    ed = nvim_factory(**SETUP)
    _, lock, status = claude_lock(ed)
    record_events(ed)
    for token in (None, "wrong", lock["authToken"] + "x"):
        c = Mcp(status["port"], token, protocol=None)
        with pytest.raises(ConnectionClosed) as closed:
            c.request("initialize", {"protocolVersion": "2025-11-25",
                                     "clientInfo": {"name": "opencode", "version": "0.0.0"}}, timeout=5)
        assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1008, "Authentication failed"), token
    assert claude_status(ed)["clients"] == 0
    time.sleep(1.5)  # past the naming deadline: still nothing announced
    assert ed.lua("return _G.seen") == []
    assert ed.lua("return require('amp').statusline()") == "amp"


def test_an_opencode_client_is_named_gets_the_selection_and_mentions_from_line_1(nvim_factory, amp_env):
    """OpenCode's handshake: initialize, notifications/initialized, nothing
    more. It still gets the selection; it is announced as OpenCode; lines
    are counted from 1, as it reads them."""
    f = amp_env.workspace / "notes.txt"
    f.write_text("alpha\nbeta line\ngamma line\ndelta\n")
    ed = nvim_factory(**SETUP)
    ed.edit(f)
    _, lock, status = claude_lock(ed)
    record_events(ed)
    c = Mcp(status["port"], lock["authToken"], protocol=None)
    assert c.ws.subprotocol is None
    init = c.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "opencode", "version": "0.0.0"}})
    assert init["result"]["protocolVersion"] == "2025-11-25"
    c.notify("notifications/initialized")
    first = c.wait_notification("selection_changed")
    assert first["filePath"] == str(f) and first["text"] == "" and first["selection"]["start"]["line"] == 1
    ed.nvim.input("jVj")
    sel = c.wait_notification("selection_changed", lambda p: p["text"] == "beta line\ngamma line")
    assert (sel["selection"]["start"]["line"], sel["selection"]["end"]["line"]) == (2, 3)
    ed.nvim.input("<Esc>")
    wait_for(lambda: ed.lua("return require('amp').statusline()") == "amp: 1 agent (OpenCode)", 5, "the statusline")
    assert ed.lua("return _G.seen") == [["AmpClientConnected", "claude", "OpenCode"]]
    # :Amp ref of lines 2-3: OpenCode reads lines 2 to 3.
    ed.nvim.command("2,3Amp ref")
    assert c.wait_notification("at_mentioned") == {"filePath": str(f), "lineStart": 2, "lineEnd": 3}
    c.close()
    wait_for(lambda: ed.lua("return _G.seen")[-1] == ["AmpClientDisconnected", "claude", "OpenCode"], 5,
             "the disconnect, by name")


def test_open_opencode_takes_the_lockfile_route_and_makes_this_neovims_lockfile_the_one(nvim_factory, tmp_path):
    """`:Amp open opencode`: its port variables empty (Neovim's own
    environment has CLAUDE_CODE_SSE_PORT, for Claude Code), this Neovim's
    lockfile the newest of those that hold the folder, and a one-line
    warning when another live editor's lockfile holds it too."""
    cmd, out = recording_agent(tmp_path)
    ed = nvim_factory(**SETUP, terminal={"cmd": {"opencode": [str(cmd)]}}, _extra_env=NO_CI)
    path, lock, status = claude_lock(ed)
    assert ed.lua("return vim.env.CLAUDE_CODE_SSE_PORT") == str(status["port"])
    # Another live editor (this test's pid) serving the same folder, its
    # lockfile written after this Neovim's.
    other = path.parent / "1.lock"
    other.write_text(json.dumps({"pid": os.getpid(), "workspaceFolders": [str(ed.cwd)], "transport": "ws",
                                 "authToken": "theirs"}))
    now = time.time()
    os.utime(path, (now - 60, now - 60))
    os.utime(other, (now - 30, now - 30))
    record_notes(ed)
    ed.nvim.command("Amp open opencode")
    env = read_env(out)
    assert env["CLAUDE_CODE_SSE_PORT"] == "" and env["OPENCODE_EDITOR_SSE_PORT"] == "", env
    assert "127.0.0.1" in env["no_proxy"].split(","), env
    assert path.stat().st_mtime > other.stat().st_mtime, "OpenCode takes the newest lockfile among equals"
    assert notes(ed) == ["amp: opencode attaches to this Neovim, but another editor serves this folder too: "
                         "it may take that one when it reconnects"], notes(ed)
    # Alone in the folder: nothing to say.
    other.unlink()
    ed.nvim.command("Amp open opencode")  # hides it
    ed.lua("vim.fn.jobstop(require('amp.terminal').get('opencode').job)")
    wait_for(lambda: ed.lua("return require('amp.terminal').get('opencode')") is None, 5, "the job to end")
    record_notes(ed)
    ed.nvim.command("Amp open opencode")
    wait_for(lambda: ed.lua("return require('amp.terminal').get('opencode')") is not None, 5, "a new job")
    assert notes(ed) == [], notes(ed)


def test_open_opencode_says_when_it_cannot_find_this_neovim(nvim_factory, amp_env, tmp_path):
    """OpenCode reads ~/.claude/ide only: a lockfile moved by
    CLAUDE_CONFIG_DIR is not found, and the user is told in one line."""
    cmd, out = recording_agent(tmp_path)
    config = amp_env.root / "claude config"
    ed = nvim_factory(**SETUP, terminal={"cmd": {"opencode": [str(cmd)]}},
                      _extra_env=dict(NO_CI, CLAUDE_CONFIG_DIR=str(config)))
    wait_for(lambda: (claude_status(ed) or {}).get("port"), 10, "the Claude server")
    record_notes(ed)
    ed.nvim.command("Amp open opencode")
    read_env(out)
    assert notes(ed) == [f"amp: opencode reads ~/.claude/ide only, this Neovim's lockfile is in {config / 'ide'} "
                         "(CLAUDE_CONFIG_DIR): it starts unattached"], notes(ed)


# The real OpenCode -----------------------------------------------------------

needs_opencode = pytest.mark.skipif(not ah.opencode_available(),
                                    reason="needs tests/fixtures/agent-opencode (npm ci)")


@needs_opencode
def test_checkhealth_names_the_opencode_cli_and_its_version(nvim_factory):
    ed = nvim_factory(terminal={"cmd": {"opencode": [str(ah.OPENCODE)]}})
    ed.nvim.command("checkhealth amp")
    health = "\n".join(ed.nvim.current.buffer[:])
    assert f"opencode (OpenCode) 1.18.33: {ah.OPENCODE}" in health, health


def screen(ed, buf) -> str:
    return "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", buf))


def user_text(body: dict) -> str:
    """The texts of the last user message of a chat request."""
    message = [m for m in body.get("messages") or [] if m.get("role") == "user"][-1]
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))


def typed(ed, job: int, text: str) -> None:
    """Types `text` into OpenCode's terminal, then Enter apart from it."""
    ed.lua("vim.api.nvim_chan_send(...)", job, text)
    time.sleep(0.5)
    ed.lua("vim.api.nvim_chan_send(..., '\\r')", job)


@needs_opencode
@pytest.mark.real_agent
def test_real_opencode_attaches_gets_the_selection_and_a_mention(nvim_factory, amp_env):
    f = amp_env.workspace / "notes.txt"
    f.write_text("alpha\nbeta line\ngamma line\ndelta\n")
    mock = OpenAIMock([[{"type": "text", "text": "Fine."}], [{"type": "text", "text": "Seen."}]])
    offline = ah.opencode_config(amp_env.config_home, mock.url)
    ed = nvim_factory(**SETUP, terminal={"cmd": {"opencode": [str(ah.OPENCODE)]}, "position": "right", "size": 0.6},
                      _extra_env=dict(NO_CI, **offline))
    claude_lock(ed)
    record_events(ed)
    ed.lua("vim.o.columns = 200; vim.o.lines = 50")
    ed.edit(f)
    try:
        ed.nvim.command("Amp open opencode")
        term = ed.lua("return require('amp.terminal').get('opencode')")
        buf, job = term["buf"], term["job"]
        try:
            wait_for(lambda: claude_status(ed)["clients"] == 1, 60, "OpenCode to connect")
        except AssertionError:
            raise AssertionError("OpenCode did not connect; screen:\n" + screen(ed, buf))
        # It came through the lockfile with its token, and is named.
        wait_for(lambda: ed.lua("return require('amp').statusline()") == "amp: 1 agent (OpenCode)", 5,
                 "the statusline to name OpenCode")
        assert ed.lua("return _G.seen") == [["AmpClientConnected", "claude", "OpenCode"]]
        assert "wrong or missing auth token" not in amp_log(ed)
        wait_for(lambda: "Ask anything" in screen(ed, buf), 30, "OpenCode's prompt")
        # A Visual selection in the file's window, kept while the prompt goes.
        ed.nvim.command("wincmd p")
        fh.enter_visual_lines(ed)
        typed(ed, job, "what did I select?")
        body = mock.wait_for(lambda reqs: next((r for r in reqs if r.get("tools")
                                                and "what did I select?" in user_text(r)), None), 45)
        assert (f'<system-reminder>Note: The user selected #2-3 from "{f}". ```beta line\ngamma line```'
                in user_text(body)), user_text(body)
        ed.nvim.input("<Esc>")
        wait_for(lambda: "Fine." in screen(ed, buf), 30, "the answer on OpenCode's screen")
        # :Amp ref puts a mention of lines 2-3 in OpenCode's prompt, which
        # then reads those lines for the model.
        ed.nvim.command("2,3Amp ref")
        wait_for(lambda: "@notes.txt#2-3" in screen(ed, buf), 10, "the mention in OpenCode's prompt")
        typed(ed, job, "explain")
        body = mock.wait_for(lambda reqs: next((r for r in reqs if r.get("tools")
                                                and "@notes.txt#2-3 explain" in user_text(r)), None), 45)
        assert "2: beta line\n3: gamma line" in user_text(body), user_text(body)
    finally:
        ed.lua("local t = require('amp.terminal').get('opencode'); if t then vim.fn.jobstop(t.job) end")
        mock.close()
    wait_for(lambda: claude_status(ed)["clients"] == 0, 10, "OpenCode to go")
