"""Neovim as an MCP server for any agent (agents.mcp): its discovery file,
the stdio entry point an agent's configuration names once, and the
official MCP SDK's client over that entry point and over Streamable HTTP
calling every tool against a real Neovim; edits through the review (:w
accepts with the user's change and the file is what :w writes, :q
rejects), two Neovims each found by their own client, no Neovim (an error
at once), bad input refused in one line."""

from __future__ import annotations

import json
import os
import stat
import time

import pytest

import agents_helpers as ah
import front_end_helpers as fh
from conftest import wait_for
from mcp_sdk import SdkClient, http_spec, sdk_available, stdio_spec
from review_helpers import open_review, proposals, wait_proposals

SETUP = {"agents": {"amp": False, "mcp": True}, "_wait": False}
needs_sdk = pytest.mark.skipif(not sdk_available(), reason="needs node and tests/fixtures/agent-mcp (npm ci)")
TOOLS = {"get_selection", "get_open_files", "get_workspace_folders", "read_file", "get_diagnostics", "open_file",
         "propose_edit"}


def mcp_status(ed) -> dict:
    return ed.lua("return require('amp').status().agents.mcp") or {}


def discovery(ed) -> tuple:
    return fh.wait_discovery_file(
        ed, "mcp", "port", lambda status: ed.env.data_home / "amp" / "mcp" / f"{status['port']}.json",
        "the MCP server", "the discovery file")


@pytest.fixture
def clients():
    made: list[SdkClient] = []

    def make(spec: dict) -> SdkClient:
        c = SdkClient(spec)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def connect(clients, spec) -> SdkClient:
    c = clients(spec)
    assert c.connected["event"] == "connected", c.connected
    return c


def test_mcp_is_off_by_default(nvim_factory, amp_env):
    ed = nvim_factory()
    assert mcp_status(ed) == {"enabled": False}
    assert not (amp_env.data_home / "amp" / "mcp").exists()
    assert ed.lua("return vim.env.AMP_NVIM_MCP_PORT") is None


def test_discovery_file_entry_point_and_amp_mcp(nvim_factory, amp_env):
    ed = nvim_factory(**SETUP)
    path, disc, status = discovery(ed)
    assert set(disc) == {"port", "url", "authToken", "pid", "workspaceFolders", "ideName", "maxRequestBytes"}
    assert (disc["port"], disc["pid"], disc["workspaceFolders"]) == (status["port"], ed.pid, [str(amp_env.workspace)])
    assert disc["url"] == f"http://127.0.0.1:{status['port']}/mcp" == status["url"]
    assert len(disc["authToken"]) == 43
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    # Terminals this Neovim starts name it to the entry point.
    assert ed.lua("return vim.env.AMP_NVIM_MCP_PORT") == str(status["port"])
    entry = ed.lua("return require('amp').mcp_server_config()")
    assert os.path.realpath(entry["command"]) == os.path.realpath(ed.lua("return vim.v.progpath"))
    assert entry["args"][:2] == ["--clean", "-l"] and entry["args"][2].endswith("lua/amp/mcp/stdio.lua")
    assert entry["args"][3] == str(path.parent)
    # :Amp mcp: a scratch buffer with JSON and TOML ready to paste, no message.
    before = ed.messages()
    ed.nvim.command("Amp mcp")
    lines = ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")
    assert ed.lua("return vim.bo.buftype") == "nofile" and ed.messages() == before
    text = "\n".join(lines)
    start = lines.index("{")
    block = "\n".join(lines[start:lines.index("}", start) + 1])
    assert json.loads(block) == {"mcpServers": {"neovim": entry}}
    assert "[mcp_servers.neovim]" in text and f'command = "{entry["command"]}"' in text
    assert status["url"] in text
    # :checkhealth names the entry point.
    ed.nvim.command("checkhealth amp")
    health = "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    assert "mcp: agents reach it with" in health and "mcp: port" in health
    assert ed.quit() == 0
    assert not path.exists()


@needs_sdk
def test_the_sdk_over_the_stdio_entry_point_calls_every_tool(nvim_factory, amp_env, clients):
    ws = amp_env.workspace
    notes = ws / "notes.txt"
    notes.write_text("alpha\nbeta line\ngamma line\n")
    (ws / "other.txt").write_text("other\n")
    ed = nvim_factory(**SETUP)
    _, _, status = discovery(ed)
    ed.edit(notes)
    ed.lua("vim.api.nvim_buf_set_lines(0, 0, 1, false, { 'ALPHA (unsaved)' })")
    c = connect(clients, stdio_spec(ed, ws))
    assert c.connected["serverInfo"]["name"] == "neovim"
    assert c.connected["capabilities"]["resources"]["subscribe"] is True
    assert "Neovim" in c.connected["instructions"]
    tools = c.request("listTools")["tools"]
    assert {t["name"] for t in tools} == TOOLS
    assert all(t["inputSchema"]["type"] == "object" for t in tools)
    assert wait_for(lambda: mcp_status(ed)["clients"] == 1, 10, "the client to count as connected")

    assert c.json("get_workspace_folders") == {"folders": [str(ws)]}
    # The buffer's text, unsaved line included; a file no buffer has.
    assert c.text("read_file", {"path": "notes.txt"}) == "ALPHA (unsaved)\nbeta line\ngamma line\n"
    assert c.text("read_file", {"path": str(ws / "other.txt")}) == "other\n"
    # The selection: lines 2-3 in Visual line mode, 1-based.
    fh.enter_visual_lines(ed)
    sel = wait_for(lambda: (s := c.json("get_selection"))["text"] and s, 5, "the selection")
    assert sel["path"] == str(notes) and sel["text"] == "beta line\ngamma line"
    assert sel["start"] == {"line": 2, "column": 1} and sel["isEmpty"] is False
    ed.nvim.input("<Esc>")
    wait_for(lambda: c.json("get_selection")["isEmpty"], 5, "the cursor after Visual mode")
    assert c.json("get_selection", {"latest": True})["text"] == "beta line\ngamma line"
    files = c.json("get_open_files")["files"]
    mine = next(f for f in files if f["path"] == str(notes))
    assert mine["active"] and mine["visible"] and mine["modified"]
    # Diagnostics as Neovim has them.
    ed.lua("""local ns = vim.api.nvim_create_namespace('t')
        vim.diagnostic.set(ns, 0, { { lnum = 1, col = 5, end_lnum = 1, end_col = 9,
          severity = vim.diagnostic.severity.WARN, message = 'odd word', source = 'test' } })""")
    diags = c.json("get_diagnostics", {"path": "notes.txt"})["files"]
    assert diags == [{"path": str(notes), "diagnostics": [{"severity": "warning", "message": "odd word",
                      "source": "test", "start": {"line": 2, "column": 6}, "end": {"line": 2, "column": 10}}]}]
    # open_file shows the file at the line, as Amp's openURI does.
    assert c.text("open_file", {"path": "other.txt", "line": 1, "column": 3}).startswith("Opened ")
    assert ed.lua("return vim.api.nvim_buf_get_name(0)") == str(ws / "other.txt")
    assert ed.lua("return vim.api.nvim_win_get_cursor(0)") == [1, 2]
    # Resources: the selection, the open files, each open file.
    uris = {r["uri"] for r in c.request("listResources")["resources"]}
    assert {"neovim://selection", "neovim://open-files", f"file://{notes}"} <= uris
    read = c.request("readResource", uri=f"file://{notes}")["contents"][0]
    assert read["text"].startswith("ALPHA (unsaved)")
    assert json.loads(c.request("readResource", uri="neovim://selection")["contents"][0]["text"])["path"]
    c.request("subscribe", uri="neovim://selection")
    ed.lua("vim.api.nvim_win_set_cursor(0, { 1, 1 })")
    wait_for(lambda: any(n["params"]["uri"] == "neovim://selection" for n in c.notifications), 10,
             "notifications/resources/updated")
    c.close()
    wait_for(lambda: mcp_status(ed)["clients"] == 0, 10, "the client to be gone")


def accept_review(ed, rel: str, change_line: tuple[int, str] | None = None) -> None:
    """The user opens the proposal (:Amp review), changes a line, :w."""
    wait_proposals(ed, 1)
    win = open_review(ed, f"{rel} (proposed by MCP)")
    ed.lua("vim.api.nvim_set_current_win(...)", win)
    if change_line:
        row, text = change_line
        ed.lua("vim.api.nvim_buf_set_lines(0, ..., ... + 1, false, { select(2, ...) })", row, text)
    ed.nvim.command("write")


@needs_sdk
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_edits_go_through_the_review_and_are_written_as_w_writes_them(nvim_factory, amp_env, clients, transport):
    ws = amp_env.workspace
    crlf = ws / "dos.txt"
    crlf.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    latin = ws / "latin.txt"
    latin.write_bytes("caf\xe9\nna\xefve\n".encode("latin-1"))
    ed = nvim_factory(**SETUP)
    discovery(ed)
    c = connect(clients, stdio_spec(ed, ws) if transport == "stdio" else http_spec(ed))
    # :w accepts, with the user's own change; the model wrote "\n".
    rid = c.send("callTool", name="propose_edit", arguments={"path": "dos.txt", "newText": "one\nTWO\nthree\n",
                                                              "description": "capitals"})
    accept_review(ed, "dos.txt", (2, "three (mine)"))
    result = c.answer(rid)["result"]
    answer = json.loads(result["content"][0]["text"])
    assert answer["decision"] == "accepted" and answer["changedByUser"] is True, answer
    assert answer["text"] == "one\r\nTWO\r\nthree (mine)\r\n"
    assert crlf.read_bytes() == b"one\r\nTWO\r\nthree (mine)\r\n"
    # A Latin-1 file, by patch: written in Latin-1, as :w writes it.
    patch = "--- a/latin.txt\n+++ b/latin.txt\n@@ -1,2 +1,2 @@\n-café\n+café au lait\n naïve\n"
    rid = c.send("callTool", name="propose_edit", arguments={"path": str(latin), "patch": patch})
    accept_review(ed, "latin.txt")
    answer = json.loads(c.answer(rid)["result"]["content"][0]["text"])
    assert (answer["decision"], answer["changedByUser"]) == ("accepted", False), answer
    assert latin.read_bytes() == "caf\xe9 au lait\nna\xefve\n".encode("latin-1")
    assert ed.buf_lines(latin) == ["café au lait", "naïve"]
    # :q rejects: the file is unchanged.
    before = crlf.read_bytes()
    rid = c.send("callTool", name="propose_edit", arguments={"path": "dos.txt", "newText": "gone\n"})
    wait_proposals(ed, 1)
    win = open_review(ed, "dos.txt (proposed by MCP)")
    ed.lua("vim.api.nvim_set_current_win(...)", win)
    ed.nvim.command("quit")
    answer = json.loads(c.answer(rid)["result"]["content"][0]["text"])
    assert answer["decision"] == "rejected", answer
    assert crlf.read_bytes() == before
    wait_for(lambda: not proposals(ed), 5, "no proposal left")


@needs_sdk
def test_a_new_file_is_reviewed_against_nothing_and_made_as_w_makes_it(nvim_factory, amp_env, clients):
    """propose_edit of a path where no file is yet: the review shows every
    line as added; :w makes the file (and its missing directories) byte for
    byte and mode for mode as Neovim's own `:w ++p` of a new buffer does;
    :q makes nothing. A file made or a buffer opened meanwhile is never
    written over; an empty text and a never-saved buffer are refused."""
    ws = amp_env.workspace
    ed = nvim_factory(**SETUP)
    discovery(ed)
    c = connect(clients, http_spec(ed))
    new = ws / "src" / "deep" / "new.txt"
    rid = c.send("callTool", name="propose_edit", arguments={"path": "src/deep/new.txt", "newText": "alpha\nbeta"})
    accept_review(ed, "new.txt", (1, "beta (mine)"))
    answer = json.loads(c.answer(rid)["result"]["content"][0]["text"])
    assert (answer["decision"], answer["created"], answer["changedByUser"]) == ("accepted", True, True), answer
    # Neovim's own :w ++p of a new buffer with those lines, beside it.
    by_nvim = ws / "by_nvim" / "deep" / "new.txt"
    ed.lua("""
        local buf = vim.api.nvim_create_buf(true, false)
        vim.api.nvim_buf_set_lines(buf, 0, -1, false, { 'alpha', 'beta (mine)' })
        local path = ...
        vim.api.nvim_buf_call(buf, function()
          vim.cmd('silent write ++p ' .. vim.fn.fnameescape(path))
        end)
    """, str(by_nvim))
    assert new.read_bytes() == by_nvim.read_bytes() == b"alpha\nbeta (mine)\n"
    assert stat.S_IMODE(new.stat().st_mode) == stat.S_IMODE(by_nvim.stat().st_mode)
    assert stat.S_IMODE(new.parent.stat().st_mode) == stat.S_IMODE(by_nvim.parent.stat().st_mode)
    # By patch, as `diff -u /dev/null` writes one.
    patch = "--- /dev/null\n+++ b/made.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n"
    rid = c.send("callTool", name="propose_edit", arguments={"path": "made.txt", "patch": patch})
    accept_review(ed, "made.txt")
    assert json.loads(c.answer(rid)["result"]["content"][0]["text"])["created"] is True
    assert (ws / "made.txt").read_bytes() == b"one\ntwo\n"
    # :q makes nothing, not even the directory.
    rid = c.send("callTool", name="propose_edit", arguments={"path": "other/none.txt", "newText": "x\n"})
    wait_proposals(ed, 1)
    ed.lua("vim.api.nvim_set_current_win(...)", open_review(ed, "none.txt (proposed by MCP)"))
    ed.nvim.command("quit")
    assert json.loads(c.answer(rid)["result"]["content"][0]["text"])["decision"] == "rejected"
    assert not (ws / "other").exists()
    # Made by someone else during the review: theirs stays, the agent is told.
    late = ws / "late.txt"
    rid = c.send("callTool", name="propose_edit", arguments={"path": "late.txt", "newText": "mine\n"})
    wait_proposals(ed, 1)
    late.write_text("theirs\n")
    accept_review(ed, "late.txt")
    result = c.answer(rid)["result"]
    assert result.get("isError") is True, result
    assert "late.txt was made by someone else during the review: nothing was written" in result["content"][0]["text"]
    assert late.read_text() == "theirs\n"
    wait_for(lambda: not proposals(ed), 5, "no proposal left")
    # Refused at once: nothing to review, or the user's never-saved buffer.
    assert "an empty new file has nothing to review" in c.refusal("propose_edit", {"path": "empty.txt", "newText": ""})
    ed.lua("vim.cmd.edit(...); vim.api.nvim_buf_set_lines(0, 0, -1, false, { 'draft' })", str(ws / "draft.txt"))
    why = c.refusal("propose_edit", {"path": "draft.txt", "newText": "x\n"})
    assert "draft.txt is open in Neovim but was never saved" in why, why
    assert not (ws / "draft.txt").exists() and not (ws / "empty.txt").exists()
    assert not proposals(ed)


@needs_sdk
def test_two_neovims_in_different_folders_each_found_by_their_own_client(nvim_factory, amp_env, clients):
    a, b = amp_env.workspace, amp_env.root / "project-b"
    nested = a / "sub"
    b.mkdir()
    nested.mkdir()
    for ws in (a, b, nested):
        (ws / "who.txt").write_text("disk\n")
    eds = {}
    for name, ws in (("a", a), ("b", b), ("nested", nested)):
        ed = nvim_factory(**SETUP, _cwd=ws)
        discovery(ed)
        ed.edit(ws / "who.txt")
        ed.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, { ... })", f"buffer of {name}")
        eds[name] = ed
    # Each client's working directory decides; the most specific folder wins.
    for name, cwd in (("a", a), ("b", b), ("nested", nested), ("nested", nested)):
        c = connect(clients, stdio_spec(eds[name], cwd))
        assert c.text("read_file", {"path": "who.txt"}) == f"buffer of {name}\n", name
        c.close()
    # The variable set in a Neovim's terminals wins over the folder.
    port_b = mcp_status(eds["b"])["port"]
    c = connect(clients, stdio_spec(eds["a"], a, env={"AMP_NVIM_MCP_PORT": str(port_b)}))
    assert c.json("get_workspace_folders") == {"folders": [str(b)]}


@needs_sdk
def test_no_neovim_running_is_a_clear_error_at_once(nvim_factory, amp_env, clients):
    ed = nvim_factory(**SETUP)
    path, _, _ = discovery(ed)
    spec = stdio_spec(ed, amp_env.workspace)
    assert ed.quit() == 0
    assert not path.exists()
    started = time.monotonic()
    c = clients(spec)
    took = time.monotonic() - started
    assert c.connected["event"] == "error", c.connected
    message = c.connected["message"]
    assert f"no Neovim serves {amp_env.workspace}" in message and "agents = { mcp = true }" in message, message
    # At once: a start of node and of the entry point, far from any timeout.
    assert took < 15, took


@needs_sdk
def test_bad_input_is_refused_in_one_line(nvim_factory, amp_env, clients, tmp_path):
    ws = amp_env.workspace
    (ws / "a.txt").write_text("a\n")
    os.mkfifo(ws / "pipe")
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    os.symlink(outside, ws / "link.txt")
    ed = nvim_factory(**SETUP, server={"max_frame_bytes": 1024 * 1024})
    discovery(ed)
    for spec in (stdio_spec(ed, ws), http_spec(ed)):
        c = connect(clients, spec)
        stdio = spec["transport"] == "stdio"
        for path in (str(outside), "/proc/self/pagemap", "../outside.txt", "link.txt"):
            for tool in ("read_file", "open_file", "propose_edit"):
                why = c.refusal(tool, {"path": path, "newText": "x"})
                assert "outside the workspace" in why, (path, tool, why)
        for tool in ("read_file", "open_file", "propose_edit"):
            assert "FIFO" in c.refusal(tool, {"path": "pipe", "newText": "x"}), tool
        assert "longer than any file's" in c.refusal("read_file", {"path": "x/" * 5000})
        assert "path is required" in c.refusal("read_file", {})
        assert "does not match" in c.refusal("propose_edit", {"path": "a.txt", "patch": "@@ -1 +1 @@\n-zz\n+y\n"})
        # Arguments over server.max_frame_bytes: refused, the client goes on.
        # (Over HTTP the server answers 413 and closes before the body is
        # read, which Node's fetch reports as "fetch failed".)
        reply = c.answer(c.send("callTool", name="read_file", arguments={"path": "a" * (2 * 1024 * 1024)}))
        assert "error" in reply, reply
        if stdio:
            assert "over 1048576 bytes (server.max_frame_bytes)" in reply["error"], reply
        assert c.text("read_file", {"path": "a.txt"}) == "a\n"
        unknown = c.answer(c.send("callTool", name="no_such_tool", arguments={}))
        assert "unknown tool" in unknown.get("error", ""), unknown
        c.close()
    assert (ws / "a.txt").read_text() == "a\n" and outside.read_text() == "secret\n"
    assert not proposals(ed)


# A real agent CLI ---------------------------------------------------------------

needs_gemini = pytest.mark.skipif(not ah.gemini_available(), reason="needs tests/fixtures/agents (npm ci) and tmux")


@pytest.mark.real_agent
@needs_gemini
def test_real_gemini_cli_calls_the_tools_and_its_edit_goes_through_the_review(nvim_factory, amp_env):
    """Gemini CLI (its own IDE integration off) with Neovim's MCP server in
    its settings' mcpServers, exactly as :Amp mcp gives it; its model is
    the CLI's recorded-responses player. It reads the file (the buffer's
    unsaved text) and proposes an edit, which the user changes and accepts
    with :w: the file holds what :w writes, and Gemini goes on."""
    ws = amp_env.workspace
    story = ws / "story.txt"
    story.write_text("once\nupon\na time\n")
    ed = nvim_factory(**SETUP)
    discovery(ed)
    ed.edit(story)
    ed.lua("vim.api.nvim_buf_set_lines(0, 2, 3, false, { 'a time (unsaved)' })")
    env = ah.gemini_home(amp_env.home, ide=False)
    settings_path = amp_env.home / ".gemini" / "settings.json"
    settings = json.loads(settings_path.read_text())
    entry = ed.lua("return require('amp').mcp_server_config()")
    settings["mcpServers"] = {"neovim": {**entry, "trust": True, "timeout": 600000}}
    settings_path.write_text(json.dumps(settings))
    responses = ah.gemini_fake_responses(amp_env.root / "responses.jsonl", [
        [{"functionCall": {"name": "mcp_neovim_read_file", "args": {"path": "story.txt"}}}],
        [{"functionCall": {"name": "mcp_neovim_propose_edit",
                           "args": {"path": "story.txt", "newText": "once\nUPON\na time (unsaved)\n"}}}],
        [{"text": "Edited after your review."}],
    ])
    log = amp_env.state_home / "nvim" / "amp.log"
    tmux = ah.Tmux(amp_env.root, ah.gemini_argv(responses), env, ws)
    try:
        with tmux.screen_on_failure("Gemini did not start"):
            tmux.wait_screen("Type your message", 60)
        wait_for(lambda: mcp_status(ed)["sessions"] >= 1, 30, "Gemini's MCP session")
        tmux.submit("capitalize upon")
        with tmux.screen_on_failure("no proposal"):
            wait_proposals(ed, 1, timeout=60)
        logged = log.read_text()
        assert '"name":"read_file"' in logged and '"name":"propose_edit"' in logged, logged[-3000:]
        win = open_review(ed, "story.txt (proposed by MCP)")
        ed.lua("vim.api.nvim_set_current_win(...)", win)
        # The proposal is over the buffer's text, its unsaved line included.
        assert ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)") == ["once", "UPON", "a time (unsaved)"]
        ed.lua("vim.api.nvim_buf_set_lines(0, 0, 1, false, { 'twice' })")
        ed.nvim.command("write")
        wait_for(lambda: story.read_text() == "twice\nUPON\na time (unsaved)\n", 30, "the accepted text on disk")
        assert ed.buf_lines(story) == ["twice", "UPON", "a time (unsaved)"]
        with tmux.screen_on_failure("Gemini did not go on"):
            tmux.wait_screen("Edited after your review.", 60)
    finally:
        tmux.close()


# :Amp open -----------------------------------------------------------------------

def stand_in(tmp_path, name: str, body: str = "") -> tuple:
    """A stand-in agent for `:Amp open`: writes its arguments and
    environment, runs `body`, then waits."""
    out = tmp_path / f"{name}-out"
    out.mkdir()
    path = tmp_path / f"{name}.sh"
    path.write_text(f"""#!/bin/sh
out='{out}'
printf '%s\\n' "$@" > "$out/args"
env > "$out/env.tmp" && mv "$out/env.tmp" "$out/env"
{body}
exec sleep 600
""")
    path.chmod(0o755)
    return path, out


def lines_of(path, what: str) -> list[str]:
    wait_for(path.exists, 10, what)
    return path.read_text().splitlines()


def test_open_passes_the_server_per_run_and_an_agent_in_its_terminal_finds_this_neovim(nvim_factory, amp_env,
                                                                                      tmp_path):
    init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                  "clientInfo": {"name": "in-terminal", "version": "0"}}})
    call = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                       "params": {"name": "get_workspace_folders", "arguments": {}}})
    cursor, cursor_out = stand_in(tmp_path, "cursor", f"""
# The entry point as an agent with a sanitized environment starts it, from
# a folder no Neovim serves: this Neovim is found as its ancestor.
cd /
printf '%s\\n%s\\n' '{init}' '{call}' | env -u AMP_NVIM_MCP_PORT -u XDG_DATA_HOME "$ENTRY_COMMAND" --clean -l "$ENTRY_SCRIPT" "$ENTRY_DIR" > "$out/replies.tmp" 2> "$out/stderr"
mv "$out/replies.tmp" "$out/replies"
""")
    claude, claude_out = stand_in(tmp_path, "claude")
    goose, goose_out = stand_in(tmp_path, "goose")
    ed = nvim_factory(**SETUP, terminal={"cmd": {"cursor": [str(cursor)], "claude": [str(claude)],
                                                 "goose": [str(goose), "session"]}},
                      _extra_env={name: None for name in ah.CI_MARKERS})
    _, _, status = discovery(ed)
    entry = ed.lua("return require('amp').mcp_server_config()")
    ed.lua("vim.env.ENTRY_COMMAND, vim.env.ENTRY_SCRIPT, vim.env.ENTRY_DIR = ...", entry["command"], entry["args"][2],
           entry["args"][3])
    ed.nvim.command("Amp open cursor")
    replies = [json.loads(line) for line in lines_of(cursor_out / "replies", "the entry point's answers")]
    assert replies[0]["result"]["serverInfo"]["name"] == "neovim", replies
    assert json.loads(replies[1]["result"]["content"][0]["text"]) == {"folders": [str(amp_env.workspace)]}
    # No flag for Cursor CLI: its configuration names the entry once.
    assert lines_of(cursor_out / "args", "cursor's arguments") == [""]  # (printf of no arguments)
    env = dict(line.split("=", 1) for line in lines_of(cursor_out / "env", "cursor's environment") if "=" in line)
    assert env["AMP_NVIM_MCP_PORT"] == str(status["port"])
    # Claude Code without its own protocol served: --mcp-config for this run.
    ed.nvim.command("Amp open claude")
    args = lines_of(claude_out / "args", "claude's arguments")
    assert args[0] == "--mcp-config" and json.loads(args[1]) == {"mcpServers": {"neovim": entry}}, args
    # Goose: --with-extension with the command line.
    ed.nvim.command("Amp open goose")
    args = lines_of(goose_out / "args", "goose's arguments")
    assert args[:2] == ["session", "--with-extension"] and args[2].startswith(entry["command"] + " --clean -l "), args
    assert ed.lua("return vim.tbl_contains(require('amp.terminal').names(), 'kiro')")


@needs_sdk
def test_a_neovim_restarted_in_the_folder_is_found_again_by_the_same_client(nvim_factory, amp_env, clients):
    ws = amp_env.workspace
    (ws / "f.txt").write_text("disk\n")
    first = nvim_factory(**SETUP)
    discovery(first)
    c = connect(clients, stdio_spec(first, ws))
    assert c.text("read_file", {"path": "f.txt"}) == "disk\n"
    assert first.quit() == 0
    # Gone, and no other Neovim: the call says so, in one line.
    reply = c.answer(c.send("callTool", name="read_file", arguments={"path": "f.txt"}))
    assert f"no Neovim serves {ws}" in reply.get("error", ""), reply
    second = nvim_factory(**SETUP)
    discovery(second)
    second.edit(ws / "f.txt")
    second.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, { 'second' })")
    # The same client, a new session with the Neovim started since.
    assert c.text("read_file", {"path": "f.txt"}) == "second\n"
    wait_for(lambda: mcp_status(second)["sessions"] == 1, 10, "the new session")


@needs_sdk
def test_a_discovery_directory_others_may_write_is_not_trusted(nvim_factory, amp_env, clients):
    ed = nvim_factory(**SETUP)
    path, _, _ = discovery(ed)
    path.parent.chmod(0o777)
    c = clients(stdio_spec(ed, amp_env.workspace))
    assert c.connected["event"] == "error", c.connected
    assert f"{path.parent} is not a private directory of yours" in c.connected["message"], c.connected
    path.parent.chmod(0o700)
    c = connect(clients, stdio_spec(ed, amp_env.workspace))
    assert c.json("get_workspace_folders") == {"folders": [str(amp_env.workspace)]}
