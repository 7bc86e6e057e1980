"""The real terminal agents, offline: a small stand-in for the Anthropic
Messages API and Claude Code run interactively under a PTY (tmux).

The API mock is the one stand-in of these tests (there is no network); the
agent itself is the shipping binary, pinned in tests/fixtures/agents.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import openai_mock
from conftest import wait_for
from model_stand_in import ScriptedModel, StandInHandler, texts_of, with_tool_ids

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ROOT / "tests" / "fixtures" / "agents" / "node_modules"
CLAUDE = AGENTS / "@anthropic-ai" / "claude-code-linux-x64" / "claude"
GEMINI = AGENTS / "@google" / "gemini-cli" / "bundle" / "gemini.js"

# A dummy key: Claude asks once whether to use a key from the environment;
# .claude.json approves it by its last 20 characters.
API_KEY = "sk-ant-api03-amp-nvim-test-offline-key-0123456789abcdefghij"


def claude_available() -> bool:
    return CLAUDE.is_file() and os.access(CLAUDE, os.X_OK) and shutil.which("tmux") is not None


class AnthropicMock(ScriptedModel):
    """`POST /v1/messages` with SSE streaming. Each request of the main
    conversation (the one that carries tools) takes the next scripted turn:
    a list of content blocks (`{"type": "text", "text": ...}` or
    `{"type": "tool_use", "name": ..., "input": {...}}`); when the script is
    used up, or for side requests (titles, summaries), it answers a short
    text. Every request body is kept in `requests`."""

    what = "the API mock"

    def __init__(self, script: list[list[dict]] | None = None):
        super().__init__(script)
        mock = self

        class Handler(StandInHandler):
            def do_HEAD(self):
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self):
                self.send_json({})

            def do_POST(self):
                body = self.read_json()
                path = self.path.split("?")[0]
                if not path.endswith("/v1/messages"):
                    # count_tokens and anything else: a harmless answer.
                    self.send_json({"input_tokens": 10})
                    return
                blocks = mock._next_turn(body)
                if body.get("stream"):
                    self._stream(body, blocks)
                else:
                    self._whole(body, blocks)

            def _message(self, body, blocks):
                stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
                return {
                    "id": f"msg_{int(time.time() * 1e6)}",
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model", "claude-test"),
                    "content": blocks,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 10},
                }

            def _whole(self, body, blocks):
                self.send_json(self._message(body, blocks))

            def _stream(self, body, blocks):
                self.start_event_stream()
                message = self._message(body, [])
                message["stop_reason"] = None

                def event(name, data):
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()

                event("message_start", {"type": "message_start", "message": message})
                for i, block in enumerate(blocks):
                    if block["type"] == "text":
                        event("content_block_start", {"type": "content_block_start", "index": i,
                                                      "content_block": {"type": "text", "text": ""}})
                        event("content_block_delta", {"type": "content_block_delta", "index": i,
                                                      "delta": {"type": "text_delta", "text": block["text"]}})
                    else:
                        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                        event("content_block_start", {"type": "content_block_start", "index": i, "content_block": start})
                        event("content_block_delta", {"type": "content_block_delta", "index": i,
                                                      "delta": {"type": "input_json_delta",
                                                                "partial_json": json.dumps(block["input"])}})
                    event("content_block_stop", {"type": "content_block_stop", "index": i})
                stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
                event("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                        "usage": {"output_tokens": 10}})
                event("message_stop", {"type": "message_stop"})
                self.close_connection = True

        self.serve(Handler)

    def _next_turn(self, body: dict) -> list[dict]:
        turn, n = self.take_turn(body, [{"type": "text", "text": "Done."}])
        return with_tool_ids(turn, "toolu", n)



def request_text(body: dict) -> str:
    """Every text of a request (system, messages, tool results), joined."""
    keys = ("text", "content", "system")
    return "\n".join(texts_of(body.get("system"), keys) + texts_of(body.get("messages"), keys))


def claude_home(home: Path, project: Path) -> dict[str, str]:
    """A HOME for Claude Code with onboarding done, the dummy key approved
    and `project` trusted; returns the environment to run it with."""
    home.mkdir(parents=True, exist_ok=True)
    state = {
        "hasCompletedOnboarding": True,
        "lastOnboardingVersion": "2.1.330",
        "numStartups": 5,
        "theme": "dark",
        "autoUpdates": False,
        "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
        "projects": {
            str(project): {
                "hasTrustDialogAccepted": True,
                "hasCompletedProjectOnboarding": True,
                "allowedTools": [],
            }
        },
    }
    (home / ".claude.json").write_text(json.dumps(state))
    (home / ".claude").mkdir(exist_ok=True)
    return {
        "HOME": str(home),
        "ANTHROPIC_API_KEY": API_KEY,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "TERM": "xterm-256color",
    }


# Environment variables by which CLIs (and the libraries they draw with)
# decide they run under CI, not in a terminal.
CI_MARKERS = ("CI", "CONTINUOUS_INTEGRATION", "GITHUB_ACTIONS", "BUILD_NUMBER", "RUN_ID")


class Tmux:
    """One program in a private tmux server (its own socket under `tmp`), so
    the test never touches anyone else's tmux."""

    def __init__(self, tmp: Path, argv: list[str], env: dict[str, str], cwd: Path,
                 width: int = 160, height: int = 50):
        self.socket = str(tmp / "tmux.sock")
        # The agent runs as a person runs it, in a terminal: a CI marker from
        # the test runner's environment turns the CLIs' interactive UI off
        # (Gemini CLI then draws nothing).
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX") and k not in CI_MARKERS}
        full_env.update(env)
        # The program's environment goes through `env` so the tmux server's own
        # environment does not matter.
        unset = [arg for name in CI_MARKERS for arg in ("-u", name)]
        command = ["env"] + unset + [f"{k}={v}" for k, v in env.items()] + argv
        subprocess.run(["tmux", "-S", self.socket, "-f", "/dev/null", "new-session", "-d", "-s", "agent",
                        "-x", str(width), "-y", str(height), "-c", str(cwd), "--"] + command,
                       check=True, env=full_env)
        # The pane's program leads its own process group; the agent's children
        # (Gemini CLI relaunches itself under a second node) are in it, and
        # they outlive tmux's SIGHUP: close() ends the group.
        shown = subprocess.run(["tmux", "-S", self.socket, "display-message", "-p", "-t", "agent", "#{pane_pid}"],
                               capture_output=True, text=True)
        self.pane_pid = int(shown.stdout.strip() or 0)

    def keys(self, *keys: str, literal: bool = False):
        args = ["tmux", "-S", self.socket, "send-keys", "-t", "agent"]
        if literal:
            args.append("-l")
        subprocess.run(args + list(keys), check=True)

    def submit(self, text: str):
        """Types `text` and presses Enter apart from it (keys that come
        together count as a paste, Enter included)."""
        self.keys(text, literal=True)
        time.sleep(0.5)
        self.keys("Enter")

    def answer_dialog(self, question: str, timeout: float = 60.0):
        """Waits for a dialog showing `question` and takes its default
        choice (Enter), again while it stays (a key pressed while the dialog
        is still being drawn can be lost)."""
        self.wait_screen(question, timeout)
        for _ in range(5):
            time.sleep(0.5)
            self.keys("Enter")
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                if question not in self.screen():
                    return
                time.sleep(0.2)
        raise AssertionError(f"the dialog {question!r} stayed:\n{self.screen()}")

    def screen(self) -> str:
        done = subprocess.run(["tmux", "-S", self.socket, "capture-pane", "-p", "-t", "agent"],
                              capture_output=True, text=True)
        return done.stdout

    def wait_screen(self, needle: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if needle in text:
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} never appeared on the agent's screen:\n{text}")
            time.sleep(0.2)

    @contextmanager
    def screen_on_failure(self, what: str):
        """An AssertionError in the block is raised again as `what` with
        the agent's screen (what the agent was doing instead)."""
        try:
            yield
        except AssertionError:
            raise AssertionError(f"{what}; screen:\n" + self.screen())

    def wait_written(self, path: Path, text: str, timeout: float, what: str):
        """Waits for the agent to write `text` to `path`; on timeout, the
        file as it is and the agent's screen."""
        try:
            wait_for(lambda: path.read_text() == text, timeout, what)
        except AssertionError:
            raise AssertionError(f"file: {path.read_text()!r}; screen:\n" + self.screen())

    def close(self):
        import signal
        group = self.pane_pid
        if group > 0:
            try:
                os.killpg(group, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                group = 0
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True)
        if group > 0:
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                try:
                    os.killpg(group, 0)
                except ProcessLookupError:
                    return
                time.sleep(0.05)
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass


# Gemini CLI -----------------------------------------------------------------

def gemini_available() -> bool:
    return GEMINI.is_file() and shutil.which("node") is not None and shutil.which("tmux") is not None


def gemini_home(home: Path, ide: bool = True) -> dict[str, str]:
    """A HOME for Gemini CLI: API-key auth with a dummy key, the IDE
    integration on, the workspace trusted; returns the environment."""
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    settings = {"ide": {"enabled": ide, "hasSeenNudge": True},
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
                "privacy": {"usageStatisticsEnabled": False}}
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    return {
        "HOME": str(home),
        "GEMINI_API_KEY": "gemini-dummy-offline-key",
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "TERM": "xterm-256color",
    }


def gemini_fake_responses(path: Path, turns: list[list[dict]]) -> Path:
    """The JSONL that `--fake-responses-non-strict` replays: one streamed
    model turn per line, each a list of parts (`{"text": ...}` or
    `{"functionCall": {"name": ..., "args": {...}}}`)."""
    lines = []
    for parts in turns:
        chunk = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
                 "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 10, "totalTokenCount": 20}}
        lines.append(json.dumps({"method": "generateContentStream", "response": [chunk]}))
    path.write_text("\n".join(lines) + "\n")
    return path


def gemini_argv(responses: Path) -> list[str]:
    return ["node", str(GEMINI), "--fake-responses-non-strict", str(responses)]


# Qwen Code --------------------------------------------------------------------
# Driven offline against tests/integration/openai_mock.py (OPENAI_BASE_URL).

QWEN = ROOT / "tests" / "fixtures" / "agent-qwen" / "node_modules" / "@qwen-code" / "qwen-code" / "cli-entry.js"
# Its `qwen` command (a Node script).
QWEN_BIN = ROOT / "tests" / "fixtures" / "agent-qwen" / "node_modules" / ".bin" / "qwen"


def qwen_available() -> bool:
    return QWEN.is_file() and shutil.which("node") is not None and shutil.which("tmux") is not None


def qwen_home(home: Path, base_url: str, ide: bool = True) -> dict[str, str]:
    """A HOME for Qwen Code: OpenAI-compatible auth against `base_url` (a
    local stand-in), the IDE integration on, no update check, no usage
    statistics, and none of the background requests that would take the
    scripted model turns (follow-up suggestions, auto-memory); returns the
    environment to run it with."""
    (home / ".qwen").mkdir(parents=True, exist_ok=True)
    settings = {"ide": {"enabled": ide, "hasSeenNudge": True},
                "security": {"auth": {"selectedType": "openai"}, "folderTrust": {"enabled": False}},
                "general": {"enableAutoUpdate": False},
                "ui": {"enableFollowupSuggestions": False, "enableUserFeedback": False},
                "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False},
                "privacy": {"usageStatisticsEnabled": False}}
    (home / ".qwen" / "settings.json").write_text(json.dumps(settings))
    return {
        "HOME": str(home),
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "qwen-dummy-offline-key",
        "OPENAI_MODEL": "m",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "TERM": "xterm-256color",
    }


def qwen_argv(*args: str) -> list[str]:
    return ["node", str(QWEN), *args]


# OpenCode ---------------------------------------------------------------------
# Driven offline against tests/integration/openai_mock.py through a provider
# entry in its config.

OPENCODE_FIXTURE = ROOT / "tests" / "fixtures" / "agent-opencode" / "node_modules"
# The platform package's binary: what opencode-ai's `opencode` runs here.
OPENCODE = OPENCODE_FIXTURE / "opencode-linux-x64" / "bin" / "opencode"


def opencode_available() -> bool:
    return OPENCODE.is_file() and os.access(OPENCODE, os.X_OK)


def opencode_config(config_home: Path, base_url: str) -> dict[str, str]:
    """OpenCode's config ($XDG_CONFIG_HOME/opencode/opencode.json): one
    OpenAI-compatible provider at `base_url` (a local stand-in) as the
    model, no update, no sharing; returns the variables that keep it
    offline (no model list fetched, no default plugins installed)."""
    (config_home / "opencode").mkdir(parents=True, exist_ok=True)
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {"local": {"npm": "@ai-sdk/openai-compatible", "name": "Local",
                               "options": {"baseURL": base_url, "apiKey": "dummy"},
                               "models": {"m": {"name": "m"}}}},
        "model": "local/m",
        "small_model": "local/m",
        "autoupdate": False,
        "share": "disabled",
    }
    (config_home / "opencode" / "opencode.json").write_text(json.dumps(config))
    return {
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "TERM": "xterm-256color",
    }


# GitHub Copilot CLI -----------------------------------------------------------

COPILOT = ROOT / "tests" / "fixtures" / "agent-copilot" / "node_modules" / "@github" / "copilot-linux-x64" / "copilot"
# The binary unpacks ~235 MB into $COPILOT_CACHE_HOME on first run: one
# cache for every test (and every run).
COPILOT_CACHE = ROOT / ".cache" / "copilot"


def copilot_available() -> bool:
    return COPILOT.is_file() and os.access(COPILOT, os.X_OK) and shutil.which("tmux") is not None


def copilot_env(home: Path, model_url: str, model: str = openai_mock.MODEL) -> dict[str, str]:
    """The environment of an offline Copilot CLI: its own HOME (config,
    sessions, ~/.copilot/ide), the shared cache, and the model API at
    `model_url` (tests/integration/openai_mock.py)."""
    home.mkdir(parents=True, exist_ok=True)
    COPILOT_CACHE.mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(home),
        "COPILOT_CACHE_HOME": str(COPILOT_CACHE),
        "COPILOT_OFFLINE": "true",
        "COPILOT_PROVIDER_BASE_URL": model_url,
        "COPILOT_PROVIDER_API_KEY": "copilot-dummy-offline-key",
        "COPILOT_MODEL": model,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "TERM": "xterm-256color",
    }


# Codex CLI -------------------------------------------------------------------

CODEX = ROOT / "tests" / "fixtures" / "agent-codex" / "node_modules" / ".bin" / "codex"
# A model of Codex's own catalog: only such a model is offered apply_patch
# (an unknown name gets no apply_patch tool), and gpt-5.5 gets it as a tool
# of its own (the newer gpt-6 models reach it through a JavaScript `exec`).
CODEX_MODEL = "gpt-5.5"


def codex_available() -> bool:
    return CODEX.exists() and shutil.which("node") is not None and shutil.which("tmux") is not None


class ResponsesMock(ScriptedModel):
    """`POST /v1/responses` of the OpenAI Responses API, streamed (SSE), as
    Codex CLI calls it through a provider entry. Each request of the
    conversation takes the next scripted turn: a list of output items
    (`{"type": "message", "text": ...}` or `{"type": "apply_patch",
    "patch": ...}`, the latter sent as the `custom_tool_call` Codex's
    freeform apply_patch tool expects); when the script is used up it
    answers a short message. Side requests (the thread's title, asked as structured
    output) get a title. Every request body is kept in `requests`."""

    what = "the Responses mock"

    def __init__(self, script: list[list[dict]] | None = None):
        super().__init__(script)
        mock = self

        class Handler(StandInHandler):
            def do_GET(self):
                # /v1/models and friends: an empty list.
                self.send_json({"object": "list", "data": [], "models": []})

            def do_POST(self):
                body = self.read_json()
                if not self.path.split("?")[0].endswith("/responses"):
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                items = mock._next_turn(body)
                self.start_event_stream()
                rid = f"resp_{len(mock.requests)}"

                def event(data):
                    self.wfile.write(f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()

                event({"type": "response.created", "response": {"id": rid}})
                for item in items:
                    event({"type": "response.output_item.done", "item": item})
                usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 10,
                         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 20}
                event({"type": "response.completed", "response": {"id": rid, "usage": usage}})
                self.close_connection = True

        self.serve(Handler, "/v1")

    def is_main(self, body: dict) -> bool:
        # Side requests (the thread's title) ask for structured output.
        return not (body.get("text") or {}).get("format")

    def _next_turn(self, body: dict) -> list[dict]:
        # Once the script is used up, a short message; a side request, a title.
        otherwise = "Done." if self.is_main(body) else json.dumps({"title": "Offline test"})
        turn, n = self.take_turn(body, [{"type": "message", "text": otherwise}])
        items = []
        for i, step in enumerate(turn):
            if step["type"] == "apply_patch":
                items.append({"type": "custom_tool_call", "id": f"ctc_{n}_{i}", "status": "completed",
                              "call_id": f"call_{n}_{i}", "name": "apply_patch", "input": step["patch"]})
            else:
                items.append({"type": "message", "role": "assistant", "id": f"msg_{n}_{i}", "status": "completed",
                              "content": [{"type": "output_text", "text": step["text"], "annotations": []}]})
        return items



def responses_text(body: dict) -> str:
    """Every text of a Responses request (instructions, input items), joined."""
    keys = ("text", "content", "instructions", "input", "output")
    return "\n".join(texts_of(body.get("instructions"), keys) + texts_of(body.get("input"), keys))


def codex_home(home: Path, mock_url: str, project: Path) -> dict[str, str]:
    """A CODEX_HOME with a mock provider (the Responses API at `mock_url`)
    and `project` trusted; returns the environment to run Codex with. The
    user's own ~/.codex is never read."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'''model = "{CODEX_MODEL}"
model_provider = "mock"
check_for_update_on_startup = false

[model_providers.mock]
name = "mock"
base_url = "{mock_url}"
wire_api = "responses"
env_key = "MOCK_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[projects."{project}"]
trust_level = "trusted"

# The upgrade offer was seen: no "Meet GPT-6 Sol" dialog at start.
[notice.model_migrations]
"{CODEX_MODEL}" = "gpt-6-sol"
''')
    return {
        "CODEX_HOME": str(home),
        "MOCK_API_KEY": "mock-offline-key",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "TERM": "xterm-256color",
    }
