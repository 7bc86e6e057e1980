"""The official MCP TypeScript SDK's client (tests/fixtures/agent-mcp,
driver.mjs) driving Neovim's MCP server: over the stdio entry point that
an agent's configuration names (`require('amp').mcp_server_config()`),
or over Streamable HTTP with the bearer token. One JSON object a line
each way; requests run concurrently."""

from __future__ import annotations

import itertools
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "agent-mcp"
DRIVER = FIXTURE / "driver.mjs"


def sdk_available() -> bool:
    return shutil.which("node") is not None and (FIXTURE / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir()


class SdkClient:
    """One SDK client process. `connected` is its first line: the server's
    info, or {"event": "error", ...} when it could not connect."""

    def __init__(self, spec: dict, timeout: float = 30):
        self.proc = subprocess.Popen(["node", str(DRIVER), json.dumps(spec)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(FIXTURE))
        self.lines: queue.Queue = queue.Queue()
        self.answers: dict = {}
        self.notifications: list = []
        self.stderr_text: list[str] = []
        self.ids = itertools.count(1)
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        self.connected = self._next_event(timeout)

    def _read(self):
        for line in self.proc.stdout:
            msg = json.loads(line)
            if msg.get("event") == "notification":
                self.notifications.append(msg)
            elif msg.get("event") == "stderr":
                self.stderr_text.append(msg["text"])
            elif "id" in msg and "event" not in msg:
                with self.lock:
                    self.answers[msg["id"]] = msg
            else:
                self.lines.put(msg)
        self.lines.put({"event": "exited"})

    def _next_event(self, timeout):
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("the SDK client said nothing; stderr: " + self.proc.stderr.read()[-2000:])

    def send(self, op: str, **fields) -> int:
        rid = next(self.ids)
        self.proc.stdin.write(json.dumps({"id": rid, "op": op, **fields}) + "\n")
        self.proc.stdin.flush()
        return rid

    def answer(self, rid: int, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if rid in self.answers:
                    return self.answers.pop(rid)
            time.sleep(0.02)
        raise AssertionError(f"no answer to request {rid}; stderr: {''.join(self.stderr_text)[-2000:]}")

    def pending(self, rid: int) -> bool:
        with self.lock:
            return rid not in self.answers

    def request(self, op: str, timeout: float = 30, **fields) -> dict:
        reply = self.answer(self.send(op, **fields), timeout)
        assert "result" in reply, reply
        return reply["result"]

    def tool(self, name: str, arguments: dict | None = None, timeout: float = 30) -> dict:
        """The tool's result: {"content": [...], "isError"?: bool}."""
        return self.request("callTool", timeout=timeout, name=name, arguments=arguments or {})

    def text(self, name: str, arguments: dict | None = None) -> str:
        result = self.tool(name, arguments)
        assert not result.get("isError"), result
        return result["content"][0]["text"]

    def json(self, name: str, arguments: dict | None = None):
        return json.loads(self.text(name, arguments))

    def refusal(self, name: str, arguments: dict | None = None) -> str:
        result = self.tool(name, arguments)
        assert result.get("isError") is True, result
        text = result["content"][0]["text"]
        assert "\n" not in text, f"one line: {text!r}"
        return text

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def stdio_spec(ed, cwd, env: dict | None = None, name: str = "sdk-test-client") -> dict:
    """What an agent's MCP configuration holds, as this Neovim gives it,
    started in `cwd` with only the SDK's default variables (HOME, PATH, ...)
    and `env`: the entry must find its Neovim without the rest."""
    entry = ed.lua("return require('amp').mcp_server_config()")
    spec_env = {"HOME": ed.environ["HOME"], "PATH": os.environ.get("PATH", "")}
    spec_env.update(env or {})
    return {"transport": "stdio", "command": entry["command"], "args": entry["args"], "cwd": str(cwd),
            "env": spec_env, "name": name}


def http_spec(ed, name: str = "sdk-http-client") -> dict:
    status = ed.lua("return require('amp').status().agents.mcp")
    disc = json.loads(Path(status["discovery_file"]).read_text())
    return {"transport": "http", "url": status["url"], "token": disc["authToken"], "name": name}
