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

from model_stand_in import ScriptedModel, StandInHandler, with_tool_ids

MODEL = "m"


class OpenAIMock(ScriptedModel):
    def __init__(self, script: list[list[dict]] | None = None, side_text: str = "Done."):
        super().__init__(script)
        self.side_text = side_text
        mock = self

        class Handler(StandInHandler):
            def do_GET(self):
                # GET /v1/models: the one model.
                if self.path.split("?")[0].endswith("/models"):
                    self.send_json({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "test"}]})
                else:
                    self.send_json({})

            def do_POST(self):
                body = self.read_json()
                if not self.path.split("?")[0].endswith("/chat/completions"):
                    self.send_json({"error": {"message": f"not served: {self.path}"}}, 404)
                    return
                blocks = mock._next_turn(body)
                if body.get("stream"):
                    self._stream(body, blocks)
                else:
                    self.send_json(mock._completion(body, blocks))

            def _stream(self, body, blocks):
                self.start_event_stream()
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
        turn, n = self.take_turn(body, [{"type": "text", "text": self.side_text}])
        return with_tool_ids(turn, "call", n)



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
