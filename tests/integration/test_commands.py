""":Amp subcommands, the message API, User events and :checkhealth amp.

Real headless Neovim running the commands, real WebSocket clients receiving
what they send.
"""

from __future__ import annotations

import re
import time

from conftest import port_accepts, wait_for
from context_helpers import (QUIET, WAIT, connect_recorder, events, feed, install_event_log,
                             wait_event, wait_nvim, write)

SUBCOMMANDS = {"start", "stop", "restart", "status", "log", "send", "prompt", "ref", "buffer", "review"}
LINES = ["first line", "second é→😀 line", "\tthird line", "fourth", "fifth"]
TEXT = "\n".join(LINES) + "\n"
EVENTS = ["AmpServerStarted", "AmpServerStopped", "AmpClientConnected", "AmpClientDisconnected"]


def ready_client(ed):
    """A connected client that has received its first frame (so the server counts it)."""
    rec = connect_recorder(ed)
    rec.wait_note(lambda n: n.name == "pluginMetadata", "pluginMetadata")
    return rec


def status(ed):
    return ed.lua("return require('amp').status()")


def command_output(ed, cmd):
    return ed.nvim.api.exec2(cmd, {"output": True})["output"]


# ------------------------------------------------------------ messages


def test_amp_send_reaches_every_client_as_user_sent_message(nvim_factory):
    ed = nvim_factory()
    one, two = ready_client(ed), ready_client(ed)
    m1, m2 = one.mark(), two.mark()
    ed.nvim.command("Amp send hello")
    one.wait_payload("userSentMessage", {"message": "hello"}, since=m1)
    two.wait_payload("userSentMessage", {"message": "hello"}, since=m2)

    m1 = one.mark()
    ed.nvim.command("Amp send explain é→😀 please")
    one.wait_payload("userSentMessage", {"message": "explain é→😀 please"}, since=m1)


def test_amp_prompt_with_text_and_with_a_range(nvim_factory):
    ed = nvim_factory()
    a = write(ed, "a.txt", TEXT)
    ed.edit(a)
    rec = ready_client(ed)

    m = rec.mark()
    ed.nvim.command("2,3Amp prompt")
    rec.wait_payload("appendToPrompt", {"message": LINES[1] + "\n" + LINES[2]}, since=m)

    m = rec.mark()
    ed.nvim.command("Amp prompt look at this")
    rec.wait_payload("appendToPrompt", {"message": "look at this"}, since=m)


def test_amp_ref_sends_a_path_relative_to_the_cwd_with_lines(nvim_factory):
    ed = nvim_factory()
    p = write(ed, "sub dir/ref file.txt", TEXT)
    ed.edit(p)
    rec = ready_client(ed)

    m = rec.mark()
    ed.nvim.command("2,3Amp ref")
    # (typed into a terminal it gets a space on each side; the protocol's is bare)
    rec.wait_payload("appendToPrompt", {"message": "@sub dir/ref file.txt#L2-L3"}, since=m)

    m = rec.mark()
    ed.nvim.command("5Amp ref")
    rec.wait_payload("appendToPrompt", {"message": "@sub dir/ref file.txt#L5"}, since=m)


def test_amp_buffer_sends_the_whole_buffer_as_it_is_now(nvim_factory):
    ed = nvim_factory()
    a = write(ed, "a.txt", TEXT)
    ed.edit(a)
    feed(ed, "ggIedited <Esc>")  # unsaved: the buffer, not the file on disk
    wait_nvim(ed, "getline(1)", "edited first line")
    rec = ready_client(ed)

    m = rec.mark()
    ed.nvim.command("Amp buffer")
    rec.wait_payload("appendToPrompt", {"message": "\n".join(["edited first line"] + LINES[1:])}, since=m)


def test_message_api_says_what_reached_nothing(nvim_factory):
    """With no agent's terminal to type into, the API's callback gets false
    and the one line shown; a protocol client still gets the notification
    (and the line says so); nothing is kept for later."""
    ed = nvim_factory()
    send = """
        local fn = ...
        _G.amp_result = nil
        local ok, reason = require("amp.message")[fn]("from the api", function(ok, why)
          _G.amp_result = { ok = ok, why = why == nil and vim.NIL or why }
        end)
        return { ok = ok == nil and vim.NIL or ok, reason = reason == nil and vim.NIL or reason }
    """

    def result():
        return wait_for(lambda: ed.lua("return _G.amp_result"), WAIT, "the send's result")

    for fn in ("send_message", "send_to_prompt"):
        r = ed.lua(send, fn)
        assert r == {"ok": None, "reason": None}, (fn, r)  # looking for the agent's terminal
        assert result() == {"ok": False, "why": "amp: run :Amp open to start an agent: none is connected, "
                                                "so nothing was sent"}, fn

    rec = ready_client(ed)
    m = rec.mark()
    ed.lua(send, "send_message")
    assert result() == {"ok": False, "why": "amp: run :Amp open to type into the agent: no terminal of it "
                                            "found (userSentMessage sent to 1 client)"}
    rec.wait_payload("userSentMessage", {"message": "from the api"}, since=m)
    ed.lua(send, "send_to_prompt")
    assert result()["ok"] is False
    rec.wait_payload("appendToPrompt", {"message": "from the api"}, since=m)

    # An empty text, or no server: refused at once.
    r = ed.lua("return { require('amp.message').send_message('  ') }")
    assert r == [False, "amp: give the text to send: the message is empty"], r
    ed.nvim.command("Amp stop")
    r = ed.lua("return { require('amp.message').send_message('x') }")
    assert r == [False, "amp: start the server with :Amp start, or run :Amp open: nothing is running"], r


# ------------------------------------------------------- server lifecycle


def test_amp_stop_removes_the_lockfile_and_amp_start_writes_a_new_one(nvim_factory):
    ed = nvim_factory()
    path, lock = ed.wait_lockfile()
    assert status(ed)["running"] is True

    ed.nvim.command("Amp stop")
    deadline = time.monotonic() + WAIT
    while path.exists():
        assert time.monotonic() < deadline, f"{path} still exists after :Amp stop"
        time.sleep(0.05)
    assert ed.own_lockfiles() == {}
    st = status(ed)
    assert st["running"] is False, st
    assert not port_accepts(lock["port"]), "the old port still accepts connections"

    ed.nvim.command("Amp start")
    new_path, new_lock = ed.wait_lockfile()
    st = status(ed)
    assert st["running"] is True and st["port"] == new_lock["port"], (st, new_lock)
    assert st["lockfile"] == str(new_path), (st, new_path)
    assert new_lock["authToken"] and new_lock["pid"] == ed.pid
    rec = ready_client(ed)  # the new server answers
    assert rec.closed is None


def test_amp_status_reports_without_error(nvim_factory):
    ed = nvim_factory()
    port = ed.lock["port"]
    out = command_output(ed, "Amp status")
    assert "running" in out and str(port) in out, out
    ed.nvim.command("Amp stop")
    out = command_output(ed, "Amp status")
    assert "not running" in out, out
    out = command_output(ed, "Amp")  # no subcommand: the status
    assert "not running" in out, out


def test_completion_lists_the_subcommands(nvim_factory):
    ed = nvim_factory()
    got = ed.nvim.funcs.getcompletion("Amp ", "cmdline")
    assert SUBCOMMANDS <= set(got), got
    assert sorted(ed.nvim.funcs.getcompletion("Amp st", "cmdline")) == ["start", "status", "stop"]
    assert ed.nvim.funcs.getcompletion("Amp re", "cmdline") == ["ref", "restart", "review"]


# Feature modules completing subcommand names must not load (lua/amp/commands.lua).
FEATURE_MODULES = """
local out = {}
for _, feature in ipairs(require('amp.commands').features) do
  out[#out + 1] = feature.module
end
return out
"""


def test_completing_subcommand_names_loads_no_feature(nvim_factory):
    ed = nvim_factory(auto_start=False, _wait=False)
    modules = ed.lua(FEATURE_MODULES)
    assert len(modules) >= 9
    heavy = ["amp.openctx", "amp.review", "amp.terminal", "amp.tap", "amp.message"]
    loaded = "return vim.tbl_filter(function(m) return package.loaded[m] ~= nil end, {...})"
    assert ed.lua(loaded, *modules, *heavy) == []
    got = ed.nvim.funcs.getcompletion("Amp ", "cmdline")
    assert SUBCOMMANDS <= set(got) and got == sorted(got), got
    assert ed.lua(loaded, *modules, *heavy) == []
    # An unknown name's error lists every name, still without loading them.
    said = ed.lua("local ok, err = pcall(vim.cmd, 'Amp nope'); return ok and vim.fn.execute('messages') or err")
    assert f'there is no "nope" ({", ".join(got)})' in said, said
    assert ed.lua(loaded, *modules, *heavy) == []
    # Completing a subcommand's arguments loads its feature (and only it).
    assert ed.nvim.funcs.getcompletion("Amp annotations t", "cmdline") == ["toggle"]
    assert ed.lua(loaded, *modules) == ["amp.openctx.commands"]


def test_each_feature_registers_the_names_it_lists(nvim_factory):
    ed = nvim_factory(auto_start=False, _wait=False)
    got = ed.lua("""
        local commands = require('amp.commands')
        local out = {}
        for _, feature in ipairs(commands.features) do
          local before = vim.deepcopy(vim.tbl_keys(commands.commands))
          require(feature.module)
          local added = vim.tbl_filter(function(name)
            return not vim.list_contains(before, name)
          end, vim.tbl_keys(commands.commands))
          table.sort(added)
          local listed = vim.deepcopy(feature.names)
          table.sort(listed)
          out[#out + 1] = { feature.module, added, listed }
        end
        return out
    """)
    seen = []
    for module, added, listed in got:
        assert added == listed, module
        seen += listed
    assert len(seen) == len(set(seen)), seen
    assert SUBCOMMANDS <= set(seen)


def test_a_subcommand_registered_by_the_user_keeps_its_name(nvim_factory):
    ed = nvim_factory(auto_start=False, _wait=False)
    ed.lua("""
        require('amp.commands').register('diff', { run = function() vim.g.amp_user_diff = 1 end })
    """)
    # Loading the feature that also names `diff` (through `take`'s
    # completion) leaves the user's.
    ed.nvim.funcs.getcompletion("Amp take ", "cmdline")
    assert ed.lua("return package.loaded['amp.files.commands'] ~= nil") is True
    ed.nvim.command("Amp diff")
    assert ed.lua("return vim.g.amp_user_diff") == 1


# ------------------------------------------------------------ User events


def test_user_events_fire_with_data(nvim_factory):
    ed = nvim_factory()
    path, lock = ed.wait_lockfile()
    install_event_log(ed, EVENTS)

    rec = ready_client(ed)
    connected = wait_event(ed, "AmpClientConnected")
    assert isinstance(connected["data"], dict) and connected["data"], connected

    n = len(events(ed))
    rec.client.close()
    disconnected = wait_event(ed, "AmpClientDisconnected", since=n)
    assert isinstance(disconnected["data"], dict) and disconnected["data"], disconnected

    n = len(events(ed))
    ed.nvim.command("Amp stop")
    stopped = wait_event(ed, "AmpServerStopped", since=n)
    assert stopped["data"]["port"] == lock["port"], stopped

    n = len(events(ed))
    ed.nvim.command("Amp start")
    new_path, new_lock = ed.wait_lockfile()
    started = wait_event(ed, "AmpServerStarted", since=n)
    assert started["data"]["port"] == new_lock["port"], started
    assert started["data"]["lockfile"] == str(new_path), started

    time.sleep(QUIET)
    # The first server's own AmpServerStarted may reach the log too: its
    # lockfile is on disk (which the test waited for) before the event gets
    # to the main thread. It is that server's, and at most once.
    all_events = events(ed)
    stop_at = next(i for i, e in enumerate(all_events) if e["match"] == "AmpServerStopped")
    first_start = [i for i, e in enumerate(all_events[:stop_at]) if e["match"] == "AmpServerStarted"]
    assert len(first_start) <= 1, f"the first server started once, events: {all_events!r}"
    assert all(all_events[i]["data"]["port"] == lock["port"] for i in first_start), all_events
    matches = [e["match"] for i, e in enumerate(all_events) if i not in first_start]
    assert matches.count("AmpServerStarted") == 1, f"one start, events: {events(ed)!r}"
    assert matches.count("AmpServerStopped") == 1, f"one stop, events: {events(ed)!r}"
    assert matches.count("AmpClientConnected") == 1, f"one connection, events: {events(ed)!r}"
    assert matches.count("AmpClientDisconnected") == 1, f"one disconnection, events: {events(ed)!r}"


# ------------------------------------------------------------ checkhealth


def health_lines(ed):
    ed.nvim.command("checkhealth amp")
    assert ed.nvim.eval("&filetype") == "checkhealth"
    return ed.nvim.api.buf_get_lines(0, 0, -1, False)


def ok_line(lines, pattern):
    return any(re.search(r"\bOK\b", l) and re.search(pattern, l) for l in lines)


def test_checkhealth_reports_ok_and_names_the_problem_when_stopped(nvim_factory):
    ed = nvim_factory()
    path, lock = ed.wait_lockfile()
    lines = health_lines(ed)
    report = "\n".join(lines)
    assert ok_line(lines, r"libamp_core\.so"), report
    assert ok_line(lines, re.escape(f"127.0.0.1:{lock['port']}")), report
    assert ok_line(lines, re.escape(str(path)) + r".*600"), report
    assert not any(re.search(r"\bERROR\b", l) for l in lines), report

    ed.nvim.command("Amp stop")
    lines = health_lines(ed)
    report = "\n".join(lines)
    assert ok_line(lines, r"libamp_core\.so"), report
    assert any(re.search(r"\b(WARNING|ERROR)\b", l) and "not running" in l for l in lines), report
    assert not ok_line(lines, r"listening on"), report
