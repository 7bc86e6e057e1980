"""`:Amp open [agent]`: the agent's CLI in a terminal of this Neovim, with the
environment that attaches it here, toggled by the same command; the agent
variables Neovim keeps in its own environment follow :Amp stop / start; and
`:Amp send` / `prompt` / `ref` typed into that terminal (bracketed paste)
reach the real Amp CLI's prompt.

The environment checks run a small shell script as the agent's command (a
real process that writes down its environment and directory); the delivery
checks run the real `amp` (tests/fixtures/amp-cli) in the terminal, pointed
at the offline stand-in for the Amp service, as test_cli.py does, and the
real Claude Code (tests/fixtures/agents) with a local Messages API, as
test_claude.py does.
"""
from __future__ import annotations

import json
import os
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

from review_helpers import proposals
from conftest import REPO, lua_literal, wait_for

CLI_FIXTURE = REPO / "tests" / "fixtures" / "amp-cli"
AMP_BIN = CLI_FIXTURE / "node_modules" / "@ampcode" / "cli-linux-x64" / "amp"

sys.path.insert(0, str(CLI_FIXTURE))
import offline_server  # noqa: E402

# The agent runs as a person runs it: no CI marker from the test runner.
CI_MARKERS = ("CI", "CONTINUOUS_INTEGRATION", "GITHUB_ACTIONS", "BUILD_NUMBER", "RUN_ID")
NO_CI = {name: None for name in CI_MARKERS}


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def recording_agent(tmp_path: Path, name: str = "agent") -> tuple[Path, Path]:
    """A stand-in agent: on each start it appends a line to ``starts``, writes
    its environment, directory and arguments, then waits (a running job)."""
    out = tmp_path / f"{name}-out"
    out.mkdir()
    cmd = script(tmp_path / f"{name}.sh", f"""
out={lua_sh(out)}
echo started >> "$out/starts"
env > "$out/env.tmp" && mv "$out/env.tmp" "$out/env"
pwd > "$out/cwd"
printf '%s\\n' "$@" > "$out/args"
exec sleep 600
""")
    return cmd, out


def lua_sh(path: Path) -> str:
    return "'" + str(path).replace("'", "'\\''") + "'"


def read_env(out: Path) -> dict[str, str]:
    wait_for(lambda: (out / "env").exists(), 10, "the agent to write its environment")
    env = {}
    for line in (out / "env").read_text().splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            env[k] = v
    return env


def starts(out: Path) -> int:
    try:
        return len((out / "starts").read_text().splitlines())
    except OSError:
        return 0


def record_notes(ed) -> None:
    ed.lua("""
        _G.amp_notes = {}
        vim.notify = function(msg, level) table.insert(_G.amp_notes, { msg = msg, level = level }) end
    """)


def notes(ed) -> list[str]:
    return [n["msg"] for n in (ed.lua("return _G.amp_notes") or [])]


def terminal_state(ed, agent: str) -> dict:
    return ed.lua("""
        local agent = ...
        local term = require('amp.terminal').get(agent)
        local wins = {}
        for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
          if term and vim.api.nvim_win_get_buf(win) == term.buf then table.insert(wins, win) end
        end
        return { running = term ~= nil, buf = term and term.buf or -1, job = term and term.job or -1,
                 shown = #wins, windows = #vim.api.nvim_tabpage_list_wins(0) }
    """, agent)


# ---------------------------------------------------------------- environment


def test_open_starts_the_agent_in_the_workspace_attached_to_this_neovim(nvim_factory, tmp_path):
    cmd, out = recording_agent(tmp_path)
    ed = nvim_factory(agents={"amp": True, "claude": True},
                      terminal={"cmd": {"claude": [str(cmd), "--first arg", "two"]}},
                      _extra_env=dict(NO_CI, no_proxy="corp.example", NO_PROXY=None))
    sub = ed.cwd / "sub dir"
    sub.mkdir()
    ed.lua("vim.fn.chdir(...)", str(sub))
    # What a user's config may have done to Neovim's own environment must not
    # matter: the terminal gets the variables explicitly.
    ed.lua("vim.env.CLAUDE_CODE_SSE_PORT = '1'")
    ed.nvim.command("Amp open claude")
    env = read_env(out)
    status = ed.lua("return require('amp').status()")
    port = status["agents"]["claude"]["port"]
    assert env["CLAUDE_CODE_SSE_PORT"] == str(port), env
    # OpenCode dials that variable without the token (refused): never set.
    assert "OPENCODE_EDITOR_SSE_PORT" not in env, env
    assert env["ENABLE_IDE_INTEGRATION"] == "true", env
    assert env["no_proxy"] == "corp.example,127.0.0.1,localhost,::1", env
    assert "127.0.0.1" in env["NO_PROXY"], env
    assert env["NVIM"] == ed.lua("return vim.v.servername"), env
    assert (out / "cwd").read_text().strip() == str(sub)
    assert (out / "args").read_text().splitlines() == ["--first arg", "two"]
    state = terminal_state(ed, "claude")
    assert state["running"] and state["shown"] == 1 and state["windows"] == 2, state
    assert ed.lua("return vim.bo[...].buftype", state["buf"]) == "terminal"


def test_each_agent_gets_its_own_protocols_variables(nvim_factory, tmp_path):
    """Amp finds the editor by its lockfile: its terminal gets no Claude
    variables from the plugin (Neovim's own $NVIM only)."""
    cmd, out = recording_agent(tmp_path)
    ed = nvim_factory(agents={"amp": True, "claude": False}, terminal={"cmd": {"amp": [str(cmd)]}},
                      _extra_env=dict(NO_CI, CLAUDE_CODE_SSE_PORT=None, GEMINI_CLI_IDE_SERVER_PORT=None))
    ed.nvim.command("Amp open")  # terminal.default = "amp"
    env = read_env(out)
    assert "CLAUDE_CODE_SSE_PORT" not in env and "GEMINI_CLI_IDE_SERVER_PORT" not in env, env
    assert env["NVIM"] == ed.lua("return vim.v.servername")
    assert terminal_state(ed, "amp")["running"]


def test_gemini_gets_the_port_of_the_gemini_front_end_when_there_is_one(nvim_factory, tmp_path):
    """The terminal's Gemini variables come from status().agents.gemini;
    without a Gemini front-end the agent starts unattached and is told so."""
    cmd, out = recording_agent(tmp_path)
    ed = nvim_factory(terminal={"cmd": {"gemini": [str(cmd)]}},
                      _extra_env=dict(NO_CI, GEMINI_CLI_IDE_SERVER_PORT=None))
    record_notes(ed)
    assert ed.lua("return require('amp').status().agents.gemini") == {"enabled": False}
    ed.nvim.command("Amp open gemini")
    env = read_env(out)
    assert "GEMINI_CLI_IDE_SERVER_PORT" not in env, env
    assert notes(ed) == ["amp: set agents.gemini = true to attach gemini: it starts unattached, "
                         "this Neovim serves no gemini protocol"], notes(ed)


def test_gemini_terminal_attaches_to_the_gemini_front_end(nvim_factory, tmp_path):
    cmd, out = recording_agent(tmp_path)
    ed = nvim_factory(agents={"amp": True, "gemini": True}, terminal={"cmd": {"gemini": [str(cmd)]}},
                      _extra_env=dict(NO_CI, GEMINI_CLI_IDE_SERVER_PORT=None, TMPDIR=str(tmp_path)))
    record_notes(ed)
    ed.nvim.command("Amp open gemini")
    env = read_env(out)
    status = ed.lua("return require('amp').status()")
    assert env["GEMINI_CLI_IDE_SERVER_PORT"] == str(status["agents"]["gemini"]["port"]), env
    assert env["GEMINI_CLI_IDE_WORKSPACE_PATH"] == status["agents"]["gemini"]["workspace_path"], env
    # Gemini prefers the discovery file of the pid it is told.
    assert env["GEMINI_CLI_IDE_PID"] == str(ed.pid), env
    assert "CLAUDE_CODE_SSE_PORT" not in env
    assert notes(ed) == [], notes(ed)


def test_the_environment_function_takes_each_front_ends_variables(nvim_factory):
    """agent_env() gathers the variables every enabled front-end reports in
    status().agents[<id>].env (whatever the agent), adds the loopback names
    to no_proxy, and gives nothing of a disabled agent or a stopped server."""
    ed = nvim_factory()
    env = ed.lua("""
        return require('amp.agent_env').env({ running = true, workspace_folders = { '/w/a', '/w/b' },
          agents = {
            gemini = { enabled = true, port = 4242,
                       env = { GEMINI_CLI_IDE_SERVER_PORT = '4242', GEMINI_CLI_IDE_WORKSPACE_PATH = '/w/a:/w/b' } },
            newagent = { enabled = true, env = { NEW_AGENT_PORT = '7' } },
            claude = { enabled = false, env = { CLAUDE_CODE_SSE_PORT = '1' } },
          } })
    """)
    assert env["GEMINI_CLI_IDE_SERVER_PORT"] == "4242"
    assert env["GEMINI_CLI_IDE_WORKSPACE_PATH"] == "/w/a:/w/b"
    assert env["NEW_AGENT_PORT"] == "7"
    assert "CLAUDE_CODE_SSE_PORT" not in env
    assert "127.0.0.1" in env["no_proxy"].split(",") and "localhost" in env["no_proxy"].split(",")
    stopped = "return require('amp.agent_env').env({ running = false, agents = { gemini = { env = { X = '1' } } } })"
    assert ed.lua(stopped) in ({}, [])


def test_opening_amp_says_when_another_editor_serves_the_folder(nvim_factory, tmp_path):
    """The Amp CLI connects by itself only when one live lockfile has its
    directory: with a second Neovim in the same folder, :Amp open amp says
    so in one line; a lockfile of a dead editor does not count."""
    cmd, out = recording_agent(tmp_path)
    ed = nvim_factory(terminal={"cmd": {"amp": [str(cmd)]}}, _extra_env=NO_CI)
    record_notes(ed)
    dead = ed.env.lockfile_dir / "1.json"
    dead.write_text('{"port": 1, "authToken": "x", "pid": 999999999, "ideName": "Neovim", '
                    f'"workspaceFolders": ["{ed.cwd}"]}}')
    ed.nvim.command("Amp open amp")
    assert notes(ed) == []
    ed.nvim.command("Amp open amp")  # hide
    ed.lua("vim.fn.jobstop(require('amp.terminal').get('amp').job)")
    wait_for(lambda: ed.lua("return require('amp.terminal').get('amp') == nil"), 5, "the job to end")
    nvim_factory(_extra_env=NO_CI)  # another Neovim, same workspace
    ed.nvim.command("Amp open amp")
    assert notes(ed) == ["amp: pick this Neovim in amp (ctrl+o, Connect to IDE): another editor serves "
                         "this folder too"], notes(ed)


# ---------------------------------------------------------------- toggle, position, completion


def test_the_same_command_hides_shows_and_restarts(nvim_factory, tmp_path):
    cmd, out = recording_agent(tmp_path)
    ed = nvim_factory(terminal={"cmd": {"amp": [str(cmd)]}}, _extra_env=NO_CI)
    ed.nvim.command("Amp open amp")
    wait_for(lambda: starts(out) == 1, 10, "the agent to start")
    first = terminal_state(ed, "amp")
    assert first["shown"] == 1 and first["windows"] == 2, first
    width = ed.lua("return vim.api.nvim_win_get_width(vim.fn.bufwinid(...))", first["buf"])
    assert width == int(ed.lua("return vim.o.columns") * 0.4), width
    assert ed.lua("return vim.fn.win_screenpos(vim.fn.bufwinid(...))[2]", first["buf"]) > 1  # on the right

    ed.nvim.command("Amp open amp")  # hide
    hidden = terminal_state(ed, "amp")
    assert hidden["running"] and hidden["shown"] == 0 and hidden["windows"] == 1, hidden
    assert hidden["buf"] == first["buf"] and hidden["job"] == first["job"]

    ed.nvim.command("Amp open amp")  # show again: the same job
    again = terminal_state(ed, "amp")
    assert again["shown"] == 1 and again["buf"] == first["buf"] and again["job"] == first["job"], again
    time.sleep(0.3)
    assert starts(out) == 1

    ed.lua("vim.fn.jobstop(...)", first["job"])
    wait_for(lambda: not terminal_state(ed, "amp")["running"], 10, "the job to exit")
    ed.nvim.command("Amp open amp")  # exited: started anew, in the same window
    wait_for(lambda: starts(out) == 2, 10, "the agent to start again")
    new = terminal_state(ed, "amp")
    assert new["running"] and new["shown"] == 1 and new["windows"] == 2, new
    assert new["job"] != first["job"] and new["buf"] != first["buf"]
    assert ed.lua("return vim.api.nvim_buf_is_valid(...)", first["buf"]) is False


@pytest.mark.parametrize("position", ["bottom", "float", "left"])
def test_position_and_size(nvim_factory, tmp_path, position):
    cmd, out = recording_agent(tmp_path)
    ed = nvim_factory(terminal={"cmd": {"amp": [str(cmd)]}, "position": position, "size": 25},
                      _extra_env=NO_CI)
    ed.nvim.command("set columns=120 lines=50")
    ed.nvim.command("Amp open")
    buf = terminal_state(ed, "amp")["buf"]
    win = ed.lua("return vim.fn.bufwinid(...)", buf)
    cfg = ed.lua("return vim.api.nvim_win_get_config(...)", win)
    row, col = ed.lua("return vim.fn.win_screenpos(...)", win)
    if position == "float":
        assert cfg["relative"] == "editor", cfg
        # 25 is below the float's minimum width (80): the minimum wins.
        assert ed.lua("return { vim.api.nvim_win_get_width(...), vim.api.nvim_win_get_height(...) }",
                      win) == [80, 25]
    elif position == "bottom":
        assert cfg["relative"] == "" and row > 1 and col == 1, (cfg, row, col)
        assert ed.lua("return vim.api.nvim_win_get_height(...)", win) == 25
    else:
        assert cfg["relative"] == "" and col == 1, (cfg, row, col)
        assert ed.lua("return vim.api.nvim_win_get_width(...)", win) == 25
    ed.nvim.command("Amp open")
    assert terminal_state(ed, "amp")["shown"] == 0


def test_a_float_at_80x24_is_big_enough_for_the_real_amp_cli(nvim_factory, recording_service):
    """The default size (0.4) of a float in an 80x24 editor was 32x8, where
    the Amp CLI exits ("Terminal is too small"): a float is at least 80x20,
    or the whole editor less its border, and the real CLI draws its prompt."""
    if not AMP_BIN.exists():
        pytest.fail(f"the Amp CLI is not installed: npm ci --prefix {CLI_FIXTURE}")
    url, _ = recording_service
    ed = nvim_factory(terminal={"cmd": {"amp": [str(AMP_BIN), "--hide-welcome", "--log-file", "amp-cli.log"]},
                                "position": "float"},
                      _extra_env=dict(NO_CI, AMP_URL=url, AMP_API_KEY="sk-offline-test", AMP_SKIP_UPDATE_CHECK="1"))
    ed.nvim.command("set columns=80 lines=24")
    ed.nvim.command("Amp open")
    buf = terminal_state(ed, "amp")["buf"]
    win = ed.lua("return vim.fn.bufwinid(...)", buf)
    assert ed.lua("return { vim.api.nvim_win_get_width(...), vim.api.nvim_win_get_height(...) }",
                  win) == [78, 20]
    wait_for(lambda: prompt_lines(screen(ed, buf)), 40, "the CLI to draw its prompt")
    assert terminal_state(ed, "amp")["running"], screen(ed, buf)


def test_completion_lists_the_agents_found_on_path(nvim_factory, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("claude", "opencode"):
        script(bindir / name, "exec sleep 600\n")
    (bindir / "gemini").write_text("not executable\n")
    other = script(tmp_path / "my-gemini", "exec sleep 600\n")
    ed = nvim_factory(_extra_env=dict(NO_CI, PATH=f"{bindir}:{os.environ['PATH']}"))
    assert ed.lua("return vim.fn.getcompletion('Amp open ', 'cmdline')") == ["claude", "opencode"]
    assert ed.lua("return vim.fn.getcompletion('Amp open o', 'cmdline')") == ["opencode"]
    ed.lua("require('amp').setup(...)", {"terminal": {"cmd": {"gemini": [str(other)]}}})
    assert ed.lua("return vim.fn.getcompletion('Amp open ', 'cmdline')") == ["claude", "gemini", "opencode"]
    assert "open" in ed.lua("return vim.fn.getcompletion('Amp ', 'cmdline')")


def test_open_passes_arguments_to_the_agent_and_completes_them(nvim_factory, tmp_path):
    """`:Amp open {agent} {args...}` starts the agent with its command plus
    the arguments (`:Amp open --continue`: the default agent's); arguments
    for a running agent start nothing and say so in one line; completion
    offers each CLI's common arguments after the agent."""
    cmd, out = recording_agent(tmp_path)
    ed = nvim_factory(agents={"amp": True, "claude": True},
                      terminal={"cmd": {"claude": [str(cmd), "--permission-mode", "default"],
                                        "amp": [str(cmd)]}}, _extra_env=NO_CI)
    record_notes(ed)
    ed.nvim.command("Amp open claude --continue --resume abc")
    wait_for(lambda: (out / "args").exists(), 10, "the agent to start")
    assert (out / "args").read_text().splitlines() == [
        "--permission-mode", "default", "--continue", "--resume", "abc"]
    ed.nvim.command("Amp open claude --continue")  # running: shown, not restarted
    assert starts(out) == 1
    assert notes(ed) == ["amp: exit claude first to start it with --continue: it is running"], notes(ed)
    ed.lua("vim.fn.jobstop(require('amp.terminal').get('claude').job)")
    wait_for(lambda: ed.lua("return require('amp.terminal').get('claude') == nil"), 5, "claude to end")
    (out / "args").unlink()
    ed.nvim.command("Amp open --continue")  # terminal.default = "amp"
    wait_for(lambda: (out / "args").exists(), 10, "the default agent to start")
    assert (out / "args").read_text().splitlines() == ["--continue"]
    assert ed.lua("return vim.fn.getcompletion('Amp open claude --', 'cmdline')") == [
        "--continue", "--resume", "--model", "--permission-mode", "--fork-session"]
    assert ed.lua("return vim.fn.getcompletion('Amp open gemini --re', 'cmdline')") == ["--resume"]
    assert ed.lua("return vim.fn.getcompletion('Amp open amp threads c', 'cmdline')") == ["continue"]


def test_claude_starts_in_the_permission_mode_that_asks_the_editor(nvim_factory):
    """The default command of `:Amp open claude` asks for Claude Code's
    "default" permission mode: its edits are proposed to the editor
    (openDiff) instead of written without asking (2.1's "auto")."""
    ed = nvim_factory(_extra_env=NO_CI)
    assert ed.lua("return require('amp').get_config().terminal.cmd.claude") == [
        "claude", "--permission-mode", "default"]


def test_the_real_claude_opened_with_the_default_command_proposes_its_edits(nvim_factory, amp_env, tmp_path):
    """`:Amp open claude` with the default command (the real Claude Code as
    `claude` on PATH, offline): an edit the model asks for comes to Neovim
    as a review (openDiff), and the file is not written before a decision."""
    import agents_helpers as ah
    if not ah.CLAUDE.is_file():
        pytest.fail(f"Claude Code is not installed: npm ci --prefix {ah.AGENTS.parent}")
    f = amp_env.workspace / "story.txt"
    f.write_text("once\nupon\na time\n")
    mock = ah.AnthropicMock([
        [{"type": "tool_use", "name": "Edit", "input": {"file_path": str(f), "old_string": "upon",
                                                         "new_string": "UPON"}}],
        [{"type": "text", "text": "Edited."}],
    ])
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "claude").symlink_to(ah.CLAUDE)
    try:
        env = ah.claude_home(amp_env.home, amp_env.workspace)
        env.update(NO_CI, ANTHROPIC_BASE_URL=mock.url, CLAUDE_CODE_SSE_PORT=None, ENABLE_IDE_INTEGRATION=None,
                   PATH=f"{bindir}:{os.environ['PATH']}")
        ed = nvim_factory(agents={"amp": True, "claude": True}, _extra_env=env)
        ed.nvim.command("set columns=150 lines=40")
        ed.edit(f)
        ed.nvim.command("Amp open claude")
        buf = terminal_state(ed, "claude")["buf"]
        wait_for(lambda: ed.lua("return require('amp').status().agents.claude.clients") == 1, 60,
                 "the real claude to connect to this Neovim")
        wait_for(lambda: any(l.startswith("❯") for l in screen(ed, buf)), 60, "Claude's prompt")
        time.sleep(1)
        ed.nvim.command("Amp send capitalize upon")

        def review_open():
            waiting = proposals(ed)
            return len(waiting) == 1 and waiting[0]["agent"] == "Claude" and waiting[0]["rel"] == "story.txt"
        try:
            wait_for(review_open, 60, "Claude's edit as a review in Neovim")
        except AssertionError:
            raise AssertionError("no review opened; screen:\n" + "\n".join(screen(ed, buf)))
        assert f.read_text() == "once\nupon\na time\n"
    finally:
        mock.close()


def test_a_missing_executable_or_unknown_agent_is_one_line(nvim_factory):
    ed = nvim_factory(terminal={"cmd": {"claude": ["no-such-agent-xyz"]}}, _extra_env=NO_CI)
    record_notes(ed)
    ed.nvim.command("Amp open claude")
    ed.nvim.command("Amp open nobody")
    assert notes(ed) == [
        "amp: set terminal.cmd.claude or install no-such-agent-xyz: `no-such-agent-xyz` is not on PATH",
        "amp: use one of amp, claude, gemini, qwen, copilot, opencode, codex, crush, cursor, goose, kiro "
        "(or name it in terminal.cmd); there is no agent 'nobody'",
    ]
    assert ed.lua("return #vim.api.nvim_tabpage_list_wins(0)") == 1
    err = ed.lua("local ok, err = pcall(require('amp').setup, { terminal = { position = 'middle' } }); return err")
    assert "amp: setup: terminal.position must be one of right|left|bottom|top|float, got \"middle\"" in err, err
    err = ed.lua("local ok, err = pcall(require('amp').setup, { terminal = { cmd = { amp = 'amp' } } }); return err")
    assert "amp: setup: terminal.cmd.amp must be a non-empty list of strings, got \"amp\"" in err, err


# ---------------------------------------------------------------- Neovim's own environment


def test_agent_variables_follow_stop_start_and_restart(nvim_factory):
    ed = nvim_factory(agents={"amp": True, "claude": True},
                      _extra_env=dict(NO_CI, no_proxy="corp.example", NO_PROXY=None,
                                      CLAUDE_CODE_SSE_PORT=None, ENABLE_IDE_INTEGRATION=None))

    def env():
        return ed.lua("""return { port = vim.env.CLAUDE_CODE_SSE_PORT or vim.NIL,
                                  ide = vim.env.ENABLE_IDE_INTEGRATION or vim.NIL,
                                  no_proxy = vim.env.no_proxy or vim.NIL, NO_PROXY = vim.env.NO_PROXY or vim.NIL,
                                  child = vim.fn.system({ 'sh', '-c', 'printf %s "$CLAUDE_CODE_SSE_PORT"' }) }""")

    port = str(ed.lua("return require('amp').status().agents.claude.port"))
    assert env() == {"port": port, "ide": "true", "no_proxy": "corp.example,127.0.0.1,localhost,::1",
                     "NO_PROXY": "127.0.0.1,localhost,::1", "child": port}
    ed.nvim.command("Amp stop")
    assert env() == {"port": None, "ide": None, "no_proxy": "corp.example", "NO_PROXY": None, "child": ""}
    ed.nvim.command("Amp start")
    port = str(ed.lua("return require('amp').status().agents.claude.port"))
    assert env()["port"] == port and env()["child"] == port
    ed.nvim.command("Amp restart")
    ed.wait_lockfile()
    port = str(ed.lua("return require('amp').status().agents.claude.port"))
    assert env() == {"port": port, "ide": "true", "no_proxy": "corp.example,127.0.0.1,localhost,::1",
                     "NO_PROXY": "127.0.0.1,localhost,::1", "child": port}
    # claude switched off by setup(): the variables go with it
    ed.lua("require('amp').setup(...)", {"agents": {"amp": True, "claude": False}})
    wait_for(lambda: ed.lua("return require('amp').is_running()"), 10, "the server to run again")
    assert env() == {"port": None, "ide": None, "no_proxy": "corp.example", "NO_PROXY": None, "child": ""}
    # a value the user set meanwhile is theirs: stop leaves it
    ed.lua("require('amp').setup(...)", {"agents": {"amp": True, "claude": True}})
    wait_for(lambda: env()["port"] is not None, 10, "the variables again")
    ed.lua("vim.env.CLAUDE_CODE_SSE_PORT = '4321'")
    ed.nvim.command("Amp stop")
    assert env()["port"] == "4321"


# ---------------------------------------------------------------- delivery through the terminal


def test_send_without_a_terminal_keeps_the_protocol_path(nvim_factory):
    ed = nvim_factory()
    c = ed.connect()
    ed.nvim.command("Amp prompt over the socket")
    msg = c.recv_message(timeout=5)
    while "appendToPrompt" not in (msg.get("serverNotification") or {}):
        msg = c.recv_message(timeout=5)
    assert msg["serverNotification"]["appendToPrompt"] == {"message": "over the socket"}


def test_send_prompt_and_ref_type_into_the_agents_terminal(nvim_factory, tmp_path):
    """With a stand-in agent that records what reaches its terminal: prompt
    and ref arrive as bracketed pastes, send with Enter; the socket gets
    nothing."""
    out = tmp_path / "typed"
    cmd = script(tmp_path / "cat-agent.sh", f"stty raw -echo; exec cat > {lua_sh(out)}\n")
    ed = nvim_factory(terminal={"cmd": {"amp": [str(cmd)]}}, _extra_env=NO_CI)
    c = ed.connect()
    src = ed.cwd / "notes.txt"
    src.write_text("one\ntwo\nthree\n")
    ed.edit(src)
    file_win = ed.lua("return vim.api.nvim_get_current_win()")
    ed.nvim.command("Amp open")
    time.sleep(0.5)  # stty ran
    ed.nvim.command("Amp prompt hello there")
    ed.lua("vim.api.nvim_set_current_win(...)", file_win)
    ed.nvim.command("2,3Amp prompt")
    ed.nvim.command("2Amp ref")
    ed.nvim.command("Amp send go \x1b[201~now")
    want = (b"\x1b[200~hello there\x1b[201~" b"\x1b[200~two\rthree\x1b[201~" b"\x1b[200~ @notes.txt#L2 \x1b[201~"
            b"\x1b[200~go now\x1b[201~\r")
    wait_for(lambda: out.exists() and out.read_bytes() == want, 5,
             f"the typed text (got {out.read_bytes() if out.exists() else None!r})")
    with pytest.raises(TimeoutError):
        while True:
            msg = c.recv_message(timeout=0.5)
            assert not {"appendToPrompt", "userSentMessage"} & set(msg.get("serverNotification") or {}), msg
    # the job ended: back to the protocol path
    ed.lua("vim.fn.jobstop(require('amp.terminal').get('amp').job)")
    wait_for(lambda: ed.lua("return require('amp.terminal').target() == nil"), 5, "the job to end")
    ed.nvim.command("Amp prompt over the socket")
    msg = c.recv_message(timeout=5)
    while "appendToPrompt" not in (msg.get("serverNotification") or {}):
        msg = c.recv_message(timeout=5)
    assert msg["serverNotification"]["appendToPrompt"] == {"message": "over the socket"}


@pytest.fixture
def recording_service():
    """The offline stand-in for the Amp service, recording each request."""
    seen: list[tuple[str, str]] = []
    lock = threading.Lock()

    class Recording(offline_server.Handler):
        def _record(self):
            with lock:
                seen.append((self.command, self.path))
            self._answer()

        do_GET = do_POST = do_PUT = _record

    server = offline_server.Server(("127.0.0.1", 0), Recording)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()


def screen(ed, buf: int) -> list[str]:
    return ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", buf)


def prompt_lines(lines: list[str]) -> list[str]:
    """The lines inside the CLI's prompt box (the last box drawn with ╭ ╰)."""
    top = max((i for i, l in enumerate(lines) if "╭" in l), default=None)
    bottom = max((i for i, l in enumerate(lines) if "╰" in l), default=None)
    if top is None or bottom is None or bottom <= top:
        return []
    return [l.strip().strip("│").strip() for l in lines[top + 1:bottom]]


def prompt_box(lines: list[str]) -> str:
    """The text inside the CLI's prompt box, on one line."""
    return " ".join(prompt_lines(lines)).strip()


def test_the_real_amp_cli_gets_prompt_ref_and_send_through_its_terminal(nvim_factory, recording_service):
    if not AMP_BIN.exists():
        pytest.fail(f"the Amp CLI is not installed: npm ci --prefix {CLI_FIXTURE}")
    url, seen = recording_service
    ed = nvim_factory(
        terminal={"cmd": {"amp": [str(AMP_BIN), "--hide-welcome", "--log-file", "amp-cli.log"]},
                  "size": 0.8},
        _extra_env=dict(NO_CI, AMP_URL=url, AMP_API_KEY="sk-offline-test", AMP_SKIP_UPDATE_CHECK="1"))
    ed.nvim.command("set columns=150 lines=40")
    src = ed.cwd / "notes.txt"
    src.write_text("alpha\nbeta\n")
    ed.edit(src)
    file_win = ed.lua("return vim.api.nvim_get_current_win()")
    ed.nvim.command("Amp open amp")
    buf = terminal_state(ed, "amp")["buf"]
    wait_for(lambda: "Welcome to Amp" in "\n".join(screen(ed, buf)) and "╰" in "\n".join(screen(ed, buf)),
             40, "the CLI to draw its prompt")
    # It found this Neovim through the lockfile and connected.
    wait_for(lambda: ed.lua("return require('amp').status().clients") == 1, 20, "the CLI to connect")
    assert prompt_lines(screen(ed, buf)) and prompt_box(screen(ed, buf)) == ""

    ed.nvim.command("Amp prompt some text for the agent")
    wait_for(lambda: prompt_box(screen(ed, buf)) == "some text for the agent", 10,
             "the text in the CLI's prompt")
    ed.lua("vim.api.nvim_set_current_win(...)", file_win)
    ed.nvim.command("2Amp ref")
    # typed after text: a space before the reference, and one after it
    wait_for(lambda: prompt_box(screen(ed, buf)) == "some text for the agent @notes.txt#L2", 10,
             "the reference in the CLI's prompt")
    # lines of a range: pasted as lines (the CLI's prompt grows a line)
    ed.nvim.command("1,2Amp prompt")
    wait_for(lambda: prompt_lines(screen(ed, buf))[:2] == ["some text for the agent @notes.txt#L2 alpha", "beta"],
             10, "the range's lines in the CLI's prompt")

    before = len(seen)
    ed.nvim.command("Amp send and submit it")
    # Submitted: the prompt is empty again and the CLI asks the service for a thread.
    wait_for(lambda: prompt_lines(screen(ed, buf)) and prompt_box(screen(ed, buf)) == "", 15,
             "the prompt to be submitted")
    wait_for(lambda: ("POST", "/api/thread-actors") in seen[before:], 15,
             "the CLI's request for a thread for the submitted message")


def test_text_reaches_the_real_amp_cli_in_a_tmux_pane(nvim_factory, amp_env, recording_service):
    """The README's main flow: `amp` runs in another terminal, a tmux pane,
    not started by Neovim. The plugin finds the connected agent's process
    (its socket to this Neovim's port), the pane it runs in, and pastes
    there: prompt and ref land in the CLI's prompt, send submits it. Each
    says in one line where the text went."""
    import shutil
    import agents_helpers as ah
    if not AMP_BIN.exists():
        pytest.fail(f"the Amp CLI is not installed: npm ci --prefix {CLI_FIXTURE}")
    if not shutil.which("tmux"):
        pytest.fail("tmux is needed")
    url, seen = recording_service
    ed = nvim_factory(_extra_env=NO_CI)
    src = ed.cwd / "notes.txt"
    src.write_text("alpha\nbeta\n")
    ed.edit(src)
    env = {k: amp_env.environ[k] for k in ("HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME",
                                           "XDG_CACHE_HOME")}
    env.update(AMP_URL=url, AMP_API_KEY="sk-offline-test", AMP_SKIP_UPDATE_CHECK="1", TERM="xterm-256color")
    tmux = ah.Tmux(amp_env.root, [str(AMP_BIN), "--hide-welcome", "--log-file", str(amp_env.root / "cli.log")],
                   env, amp_env.workspace, width=150, height=40)
    try:
        def lines():
            return tmux.screen().splitlines()
        wait_for(lambda: prompt_lines(lines()), 40, "the CLI to draw its prompt")
        wait_for(lambda: ed.lua("return require('amp').status().clients") == 1, 20, "the CLI to connect")
        time.sleep(0.5)
        record_notes(ed)
        ed.nvim.command("Amp prompt some text for the agent")
        wait_for(lambda: prompt_box(lines()) == "some text for the agent", 10, "the text in the CLI's prompt")
        assert notes(ed) == ["amp: typed into amp in tmux pane %0"], notes(ed)
        ed.nvim.command("2Amp ref")
        wait_for(lambda: prompt_box(lines()) == "some text for the agent @notes.txt#L2", 10,
                 "the reference in the CLI's prompt")
        before = len(seen)
        ed.nvim.command("Amp send and submit it")
        wait_for(lambda: prompt_lines(lines()) and prompt_box(lines()) == "", 15, "the prompt to be submitted")
        wait_for(lambda: ("POST", "/api/thread-actors") in seen[before:], 15,
                 "the CLI's request for a thread for the submitted message")
        assert ed.lua("return require('amp.terminal') and require('amp.terminal').target() or vim.NIL") is None
    finally:
        tmux.close()


def test_text_reaches_an_agent_in_a_terminal_of_this_neovim(nvim_factory, tmp_path):
    """An agent started with plain `:terminal` (not :Amp open) is found by
    its connection too, and the text goes into that terminal's job; a
    process that holds a connection but is no agent's program (a script
    named otherwise) is not typed into."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    out = tmp_path / "typed"
    body = f"""#!{sys.executable}
import json, os, sys, tty, urllib.parse
from pathlib import Path
from websockets.sync.client import connect
tty.setraw(0)  # before connecting: the test types once the connection is seen
lock = json.loads(Path(sys.argv[1]).read_text())
ws = connect(f"ws://127.0.0.1:{{lock['port']}}/?auth={{urllib.parse.quote(lock['authToken'], safe='')}}",
             proxy=None, ping_interval=None)
with open({str(out)!r}, "ab", buffering=0) as f:
    while True:
        data = os.read(0, 4096)
        if not data:
            break
        f.write(data)
"""
    agent = bindir / "amp"
    agent.write_text(body)
    agent.chmod(0o755)
    other = bindir / "not-an-agent"
    other.write_text(body)
    other.chmod(0o755)
    ed = nvim_factory(_extra_env=NO_CI)
    lock_path, _ = ed.wait_lockfile()
    record_notes(ed)
    # The same client under another name: no route.
    ed.lua("vim.cmd.enew(); require('amp.compat').term_start({ ... }, { cwd = vim.fn.getcwd() })", str(other), str(lock_path))
    wait_for(lambda: ed.lua("return require('amp').status().clients") == 1, 10, "the client to connect")
    ed.nvim.command("Amp prompt nobody types this")
    wait_for(lambda: notes(ed), 5, "the one line")
    assert notes(ed) == ["amp: run :Amp open to type into the agent: no terminal of it found "
                         "(appendToPrompt sent to 1 client)"], notes(ed)
    ed.lua("vim.fn.jobstop(vim.bo.channel)")
    wait_for(lambda: ed.lua("return require('amp').status().clients") == 0, 10, "the client to go")
    ed.lua("_G.amp_notes = {}")
    ed.lua("vim.cmd.enew(); require('amp.compat').term_start({ ... }, { cwd = vim.fn.getcwd() })", str(agent), str(lock_path))
    wait_for(lambda: ed.lua("return require('amp').status().clients") == 1, 10, "the agent to connect")
    ed.nvim.command("wincmd p")
    ed.nvim.command("Amp prompt hello")
    ed.nvim.command("Amp send go")
    want = b"\x1b[200~hello\x1b[201~\x1b[200~go\x1b[201~\r"
    try:
        wait_for(lambda: out.exists() and out.read_bytes() == want, 5, "the typed text")
    except AssertionError:
        raise AssertionError(f"got {out.read_bytes() if out.exists() else None!r}; notes {notes(ed)}")
    assert notes(ed) == ["amp: typed into amp in a terminal of this Neovim"] * 2, notes(ed)


def test_the_real_claude_in_its_terminal_attaches_and_gets_send(nvim_factory, amp_env):
    """`:Amp open claude` runs the real Claude Code (offline: a local stand-in
    for the Messages API) with the port variables: it connects to this
    Neovim's Claude server by itself, and :Amp send typed into its terminal
    is submitted to the model; :Amp ref goes as at_mentioned."""
    import agents_helpers as ah
    if not ah.CLAUDE.is_file():
        pytest.fail(f"Claude Code is not installed: npm ci --prefix {ah.AGENTS.parent}")
    mock = ah.AnthropicMock([[{"type": "text", "text": "noted"}]])
    try:
        env = ah.claude_home(amp_env.home, amp_env.workspace)
        env.update(NO_CI, ANTHROPIC_BASE_URL=mock.url, CLAUDE_CODE_SSE_PORT=None, ENABLE_IDE_INTEGRATION=None)
        ed = nvim_factory(agents={"amp": True, "claude": True}, terminal={"cmd": {"claude": [str(ah.CLAUDE)]}},
                          _extra_env=env)
        ed.nvim.command("set columns=150 lines=40")
        ed.nvim.command("Amp open claude")
        buf = terminal_state(ed, "claude")["buf"]
        wait_for(lambda: ed.lua("return require('amp').status().agents.claude.clients") == 1, 60,
                 "the real claude to connect to this Neovim")
        wait_for(lambda: any(l.startswith("❯") for l in screen(ed, buf)), 60, "Claude's prompt")
        time.sleep(1)
        src = amp_env.workspace / "notes.txt"
        src.write_text("alpha\nbeta\n")
        ed.nvim.command("wincmd p")
        ed.edit(src)
        # ref: Claude is connected, so it gets at_mentioned (and shows the
        # reference in its prompt itself); nothing is typed besides.
        ed.nvim.command("2Amp ref")

        def prompt():
            return next((l for l in screen(ed, buf) if l.startswith("❯")), "")
        wait_for(lambda: "@notes.txt#L2" in prompt(), 20, "the reference in Claude's prompt")
        time.sleep(0.5)
        assert prompt().count("notes.txt#L2") == 1, prompt()
        ed.nvim.command("Amp send hello from the neovim terminal")
        try:
            mock.wait_for(lambda rs: [r for r in rs if r.get("tools")
                                      and "hello from the neovim terminal" in ah.request_text(r)], 60)
        except AssertionError:
            raise AssertionError("the message did not reach the model; screen:\n" + "\n".join(screen(ed, buf)))
    finally:
        mock.close()


def test_no_proxy_gets_the_exact_loopback_entries(nvim_factory):
    """no_proxy is a comma list: `127.0.0.10` or `x127.0.0.1.example` does
    not exempt 127.0.0.1, so the loopback names are added as entries of
    their own; entries there already are kept once, in their order."""
    ed = nvim_factory()
    cases = {
        "": "127.0.0.1,localhost,::1",
        "127.0.0.10": "127.0.0.10,127.0.0.1,localhost,::1",
        "x127.0.0.1.example, corp": "x127.0.0.1.example,corp,127.0.0.1,localhost,::1",
        "localhost,127.0.0.1": "localhost,127.0.0.1,::1",
        "LOCALHOST,::1,,127.0.0.1": "LOCALHOST,::1,127.0.0.1",
    }
    for before, after in cases.items():
        assert ed.lua("return require('amp.agent_env').with_loopback(...)", before) == after, before
    assert ed.lua("return require('amp.agent_env').with_loopback(nil)") == "127.0.0.1,localhost,::1"


def test_an_agents_loopback_request_never_goes_to_the_proxy(nvim_factory, tmp_path):
    """With http_proxy set and no_proxy=127.0.0.10 (127.0.0.1 only as a
    substring), a real HTTP client started from Neovim (curl, which reads
    no_proxy as agents' HTTP libraries do) sends its request with Gemini's
    bearer token to the Gemini server on 127.0.0.1, not to the proxy."""
    import http.server
    seen: list[str] = []

    class Proxy(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            seen.append(self.path + " " + str(self.headers.get("Authorization")))
            self.send_response(502)
            self.end_headers()

        do_GET = do_POST  # noqa: N815

        def log_message(self, *args):
            pass

    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        proxy_url = f"http://127.0.0.1:{proxy.server_address[1]}"
        ed = nvim_factory(agents={"amp": True, "gemini": True},
                          _extra_env=dict(NO_CI, no_proxy="127.0.0.10", NO_PROXY="127.0.0.10",
                                          http_proxy=proxy_url, HTTP_PROXY=proxy_url,
                                          TMPDIR=str(tmp_path)))
        gemini = ed.lua("return require('amp').status().agents.gemini")
        assert ed.lua("return vim.env.no_proxy") == "127.0.0.10,127.0.0.1,localhost,::1"
        # The discovery file is written off the main thread, after start.
        wait_for(lambda: Path(gemini["discovery_file"]).exists(), 10, "Gemini's discovery file")
        token = json.loads(Path(gemini["discovery_file"]).read_text())["authToken"]
        code = ed.lua("""
            local port, token = ...
            return vim.fn.system({ 'curl', '-s', '-o', '/dev/null', '-w', '%{http_code}', '-X', 'POST',
              '-H', 'Authorization: Bearer ' .. token, '-H', 'Content-Type: application/json',
              '-H', 'Accept: application/json, text/event-stream',
              '--data', '{"jsonrpc":"2.0","id":1,"method":"ping"}', 'http://127.0.0.1:' .. port .. '/mcp' })
        """, gemini["port"], token)
        assert seen == [], f"the request went to the proxy: {seen}"
        assert code != "502" and code.isdigit() and code != "000", code
    finally:
        proxy.shutdown()
