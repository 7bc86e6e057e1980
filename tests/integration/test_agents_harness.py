"""The offline harness of the real agents on its own (no Neovim): the
pinned Gemini CLI answers from its replayed responses under a PTY. (Claude
Code's harness is exercised by test_claude.py.)"""

import time

import pytest

import agents_helpers as ah


@pytest.mark.skipif(not ah.gemini_available(), reason="needs tests/fixtures/agents (npm ci), node and tmux")
def test_gemini_cli_runs_offline_from_fake_responses(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    env = ah.gemini_home(tmp_path / "home", ide=False)
    responses = ah.gemini_fake_responses(tmp_path / "fake.jsonl", [[{"text": "Hello from the fake model."}]] * 3)
    tmux = ah.Tmux(tmp_path, ah.gemini_argv(responses), env, project)
    try:
        tmux.wait_screen("Type your message", 60)
        time.sleep(1.0)
        tmux.submit("say hello")
        tmux.wait_screen("Hello from the fake model.", 60)
    finally:
        tmux.close()
