"""The real Codex CLI (@openai/codex, pinned in tests/fixtures/agent-codex)
attached to a real Neovim as `:Amp open codex` starts it, offline in tmux
against a Responses-API stand-in (agents_helpers.ResponsesMock) through a
provider entry in a temporary CODEX_HOME: `/ide` reads the Visual selection
over the private IPC socket, and every apply_patch goes through our
PreToolUse hook into the review view."""

import json
import os
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import wait_for
import agents_helpers as ah
import front_end_helpers as fh
from review_helpers import open_review, proposals, wait_proposals

SETUP = {"agents": {"amp": True, "codex": True}, "codex": {"unofficial_ide_context": True}}

needs_codex = pytest.mark.skipif(not ah.codex_available(),
                                 reason="needs tests/fixtures/agent-codex (npm ci), node and tmux")


def codex_status(ed):
    return fh.wait_started(ed, "codex", "socket", "the Codex front-end")


def run_codex(ed, amp_env, mock) -> ah.Tmux:
    """The real Codex in a terminal as `:Amp open codex` starts it: its
    command (terminal.cmd.codex), the `-c` overrides of this Neovim's Codex
    front-end (our hook, trusted for this run) and its environment (a
    private TMPDIR, the hook's socket), with a CODEX_HOME of the test's."""
    env = ah.codex_home(amp_env.root / "codex-home", mock.url, amp_env.workspace)
    env.update(ed.lua("return require('amp.terminal').env('codex')"))
    cmd = ed.lua("return require('amp').get_config().terminal.cmd.codex")
    assert cmd == ["codex"]
    args = codex_status(ed)["open"]["args"]
    return ah.Tmux(amp_env.root, [str(ah.CODEX)] + args, env, amp_env.workspace)


@contextmanager
def codex_running(ed, amp_env, mock):
    """The real Codex (`run_codex`) for the block, ready for a prompt. A
    failure in the block shows Codex's screen; after it Codex and `mock`
    are closed, and no process of Codex may stay: Codex 0.169's TUI can
    leave a `codex app-server --managed-daemon` (a copy of itself under
    $CODEX_HOME/packages/), but with the -c overrides of :Amp open codex it
    serves itself in process."""
    tmux = run_codex(ed, amp_env, mock)
    try:
        with tmux.screen_on_failure("Codex did not start"):
            tmux.wait_screen("›", 60)
        yield tmux
    except AssertionError as e:
        raise AssertionError(f"{e}\nscreen:\n{tmux.screen()}") from None
    finally:
        tmux.close()
        mock.close()
    home = str(amp_env.root / "codex-home")
    assert wait_for(lambda: not codex_processes(home), 10, "Codex's processes to end")


def rollout_items(amp_env) -> list[dict]:
    """Codex's own record of the session (its rollout under
    $CODEX_HOME/sessions/), every item's payload in order."""
    items = []
    for path in sorted((amp_env.root / "codex-home" / "sessions").rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                items.append(json.loads(line).get("payload") or {})
            except ValueError:
                pass
    return items


def patch_outcome(amp_env, needle: str) -> str | None:
    """What Codex recorded as the result of its apply_patch call whose patch
    holds `needle`."""
    items = rollout_items(amp_env)
    calls = {i.get("call_id") for i in items
             if i.get("type") == "custom_tool_call" and i.get("name") == "apply_patch" and needle in i.get("input", "")}
    for item in items:
        if item.get("type") == "custom_tool_call_output" and item.get("call_id") in calls:
            out = item.get("output")
            return out if isinstance(out, str) else json.dumps(out)
    return None


@needs_codex
@pytest.mark.real_agent
def test_real_codex_ide_context_reaches_the_model(nvim_factory, amp_env):
    f = amp_env.workspace / "notes.txt"
    f.write_text("alpha\nbeta line\ngamma line\ndelta\n")
    ed = nvim_factory(**SETUP)
    codex_status(ed)
    ed.edit(f)
    fh.enter_visual_lines(ed)
    mock = ah.ResponsesMock([[{"type": "message", "text": "Fine."}]])
    with codex_running(ed, amp_env, mock) as tmux:
        tmux.submit("/ide")
        tmux.wait_screen("IDE context is on.", 30)
        tmux.submit("what did I select?")
        body = mock.wait_for_request("what did I select?", ah.responses_text, 60)
        text = ah.responses_text(body)
        assert "# Context from my IDE setup" in text, text[-3000:]
        assert "notes.txt" in text, text[-3000:]
        assert "beta line\ngamma line" in text, text[-3000:]
        tmux.wait_screen("Fine.", 60)


def codex_processes(codex_home: str) -> list[str]:
    """Command lines of running processes started from `codex_home`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if codex_home in cmdline or f"CODEX_HOME={codex_home}".encode() in environ:
            found.append(cmdline)
    return found


def patch_of(body: str) -> str:
    return f"*** Begin Patch\n{body}\n*** End Patch\n"


@needs_codex
@pytest.mark.real_agent
def test_real_codex_patch_accepted_with_a_tweak_then_rejected_with_q(nvim_factory, amp_env):
    f = amp_env.workspace / "story.txt"
    f.write_text("once\nupon\na time\n")
    ed = nvim_factory(**SETUP)
    codex_status(ed)
    ed.edit(f)
    mock = ah.ResponsesMock([
        [{"type": "apply_patch", "patch": patch_of("*** Update File: story.txt\n@@\n once\n-upon\n+UPON")}],
        [{"type": "message", "text": "Edited."}],
        [{"type": "apply_patch", "patch": patch_of("*** Update File: story.txt\n@@\n-once\n+twice")}],
        [{"type": "message", "text": "Understood."}],
    ])
    with codex_running(ed, amp_env, mock) as tmux:
        assert codex_processes(str(amp_env.root / "codex-home")), "the check below sees a running Codex"
        tmux.submit("capitalize upon")
        with tmux.screen_on_failure("no proposal arrived"):
            wait_proposals(ed, 1, 60)
        win = open_review(ed, "story.txt (proposed by Codex)", pick="story.txt", arg="story.txt")
        buf = ed.lua("return vim.api.nvim_win_get_buf(...)", win)
        assert ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", buf) == ["once", "UPON", "a time"]
        ed.lua("vim.api.nvim_buf_set_lines(..., 2, 3, false, { 'a good time' })", buf)
        ed.nvim.command("write")
        # Codex writes the file, with the user's tweak (our patch).
        tmux.wait_written(f, "once\nUPON\na good time\n", 30, "Codex to write the tweak")
        wait_for(lambda: ed.buf_lines(f) == ["once", "UPON", "a good time"], 10, "the buffer to reload")
        tmux.wait_screen("Edited.", 60)
        # Codex records the patch as applied.
        out = wait_for(lambda: patch_outcome(amp_env, "+UPON"), 10, "Codex's record of the patch")
        assert "Success. Updated the following files:\nM story.txt" in out, out
        assert "blocked" not in out.lower(), out

        tmux.submit("now change once")
        wait_proposals(ed, 1, 60)
        open_review(ed, "story.txt (proposed by Codex)", pick="story.txt", arg="story.txt")
        ed.nvim.command("quit")
        wait_for(lambda: not proposals(ed), 10, "the review to close")
        tmux.wait_screen("Understood.", 60)
        # A rejection: the file stays, and Codex (and its model) are told why.
        out = wait_for(lambda: patch_outcome(amp_env, "+twice"), 10, "Codex's record of the rejection")
        assert out.startswith("Command blocked by PreToolUse hook: amp: the user rejected the change to story.txt"
                              " in Neovim's review; the patch was not applied"), out
        told = ah.responses_text(mock.main_requests()[-1])
        assert "the user rejected the change to story.txt in Neovim's review" in told, told[-2000:]
        assert f.read_text() == "once\nUPON\na good time\n"
