"""What every model-API stand-in of the real-agent tests shares (Anthropic's
Messages API for Claude Code, OpenAI's chat completions for Qwen Code,
OpenCode and Copilot CLI, OpenAI's Responses API for Codex): the script of
turns, the log of request bodies and waiting on it, the local HTTP
server and its handlers' plumbing. Each API's own shapes stay in its
stand-in."""

from __future__ import annotations

import json
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

    def is_main(self, body: dict) -> bool:
        """Whether `body` is a request of the main conversation (it carries
        the tools; titles, summaries do not), which takes the script's turns."""
        return bool(body.get("tools"))

    def take_turn(self, body: dict, otherwise: list[dict]) -> tuple[list[dict], int]:
        """Logs `body` and gives it the script's next turn if it is of the
        main conversation, else (or once the script is used up) `otherwise`;
        with the request's number (from 1)."""
        with self.changed:
            self.requests.append(body)
            turn = self.script.pop(0) if self.is_main(body) and self.script else otherwise
            self.changed.notify_all()
            return turn, len(self.requests)

    def main_requests(self) -> list[dict]:
        with self.lock:
            return [r for r in self.requests if self.is_main(r)]

    def wait_for_request(self, needle: str, text, timeout: float = 60.0) -> dict:
        """The first request whose `text(body)` holds `needle`, once there is one."""
        return self.wait_for(lambda requests: next((r for r in requests if needle in text(r)), None), timeout)

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


class StandInHandler(BaseHTTPRequestHandler):
    """What every stand-in's request handler does alike: HTTP/1.1, no log
    lines, a request's JSON body, a JSON answer, an event stream's start."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def read_json(self):
        """The request's body as JSON ({} when empty or not JSON)."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return {}

    def send_json(self, value, status: int = 200):
        out = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def start_event_stream(self):
        """200 and the headers of a server-sent event stream that ends
        with the connection."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()


def with_tool_ids(turn: list[dict], prefix: str, n: int) -> list[dict]:
    """`turn`'s blocks, copied, each `tool_use` given an id
    (`<prefix>_<n:04d>_<i>`, `n`: the request's number) unless it has one."""
    blocks = []
    for i, block in enumerate(turn):
        block = dict(block)
        if block["type"] == "tool_use":
            block.setdefault("id", f"{prefix}_{n:04d}_{i}")
        blocks.append(block)
    return blocks


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
