"""What every model-API stand-in of the real-agent tests shares (Anthropic's
Messages API for Claude Code, OpenAI's chat completions for Qwen Code,
OpenCode and Copilot CLI, OpenAI's Responses API for Codex): the script of
turns, the log of request bodies and waiting on it, and the local HTTP
server. Each API's own shapes stay in its stand-in."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ScriptedModel:
    """The script, the request log and the server of one stand-in; the
    subclass gives its request handler to `serve` and its name to `what`."""

    what = "the model stand-in"

    def __init__(self, script: list[list[dict]] | None = None):
        self.script = list(script or [])
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)

    def serve(self, handler: type[BaseHTTPRequestHandler], path: str = "") -> None:
        """Serves `handler` on a free loopback port; `url` ends in `path`."""
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}{path}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait_for(self, predicate, timeout: float = 60.0):
        """Waits until `predicate(requests)` is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                value = predicate(list(self.requests))
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self.what} never saw what was expected ({len(self.requests)} requests)")
                self.changed.wait(min(left, 0.5))

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def texts_of(value, keys: tuple[str, ...]) -> list[str]:
    """Every string found under `keys` in a request's JSON, in order."""
    out: list[str] = []

    def walk(v):
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, list):
            for item in v:
                walk(item)
        elif isinstance(v, dict):
            for k, item in v.items():
                if k in keys:
                    walk(item)

    walk(value)
    return out
