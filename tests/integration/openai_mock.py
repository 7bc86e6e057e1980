"""A local stand-in for an OpenAI-compatible model API (`POST
.../chat/completions`, streamed or not), for the real agents that speak it
offline (Qwen Code through `OPENAI_BASE_URL`, OpenCode through a provider
entry). It is the one stand-in of those tests: the agents are the shipping
binaries.

Each request of the main conversation (one that offers tools) takes the
next scripted turn, a list of blocks: `{"type": "text", "text": ...}` or
`{"type": "tool_use", "name": ..., "input": {...}}`; when the script is used
up, or for side requests (titles, checks), it answers a short text. Every
request body is kept in `requests`."""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler

from model_stand_in import ScriptedModel

MODEL = "m"


class OpenAIMock(ScriptedModel):
    def __init__(self, script: list[list[dict]] | None = None, side_text: str = "Done."):
        super().__init__(script)
        self.side_text = side_text
        mock = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _json(self, value, status=200):
                out = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def do_GET(self):
                # GET /v1/models: the one model.
                if self.path.split("?")[0].endswith("/models"):
                    self._json({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "test"}]})
                else:
                    self._json({})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                if not self.path.split("?")[0].endswith("/chat/completions"):
                    self._json({"error": {"message": f"not served: {self.path}"}}, 404)
                    return
                blocks = mock._next_turn(body)
                if body.get("stream"):
                    self._stream(body, blocks)
                else:
                    self._json(mock._completion(body, blocks))

            def _stream(self, body, blocks):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                base = {"id": f"chatcmpl-{int(time.time() * 1e6)}", "object": "chat.completion.chunk",
                        "created": int(time.time()), "model": body.get("model", MODEL)}

                def chunk(delta, finish=None, usage=None):
                    data = dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": finish}])
                    if usage:
                        data["usage"] = usage
                    self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()

                chunk({"role": "assistant", "content": ""})
                calls = 0
                for block in blocks:
                    if block["type"] == "text":
                        chunk({"content": block["text"]})
                    else:
                        chunk({"tool_calls": [{"index": calls, "id": block["id"], "type": "function",
                                               "function": {"name": block["name"],
                                                            "arguments": json.dumps(block["input"])}}]})
                        calls += 1
                chunk({}, "tool_calls" if calls else "stop")
                chunk({}, None, {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self.serve(Handler, "/v1")

    @staticmethod
    def _completion(body: dict, blocks: list[dict]) -> dict:
        text = "".join(b["text"] for b in blocks if b["type"] == "text")
        calls = [{"id": b["id"], "type": "function",
                  "function": {"name": b["name"], "arguments": json.dumps(b["input"])}}
                 for b in blocks if b["type"] == "tool_use"]
        message = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = calls
        return {"id": f"chatcmpl-{int(time.time() * 1e6)}", "object": "chat.completion",
                "created": int(time.time()), "model": body.get("model", MODEL),
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}

    def _next_turn(self, body: dict) -> list[dict]:
        with self.changed:
            self.requests.append(body)
            main = bool(body.get("tools"))
            turn = self.script.pop(0) if main and self.script else [{"type": "text", "text": self.side_text}]
            self.changed.notify_all()
        blocks = []
        for i, block in enumerate(turn):
            block = dict(block)
            if block["type"] == "tool_use":
                block.setdefault("id", f"call_{len(self.requests):04d}_{i}")
            blocks.append(block)
        return blocks

    def main_requests(self) -> list[dict]:
        with self.lock:
            return [r for r in self.requests if r.get("tools")]



def request_text(body: dict) -> str:
    """Every text of a chat request (its messages' contents), joined."""
    out: list[str] = []
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out.extend(part.get("text", "") for part in content if isinstance(part, dict))
    return "\n".join(out)
