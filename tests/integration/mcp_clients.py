"""Clients of the MCP front-ends, shared by their tests: an MCP client
over the Claude Code transport (WebSocket, subprotocol `mcp`, the token in
a header), and a plain HTTP/1.1 client with the session's SSE stream for
MCP Streamable HTTP (Gemini CLI on loopback TCP with a bearer token,
Copilot CLI on a Unix socket with a nonce). Every header is the test's."""

import http.client
import json
import os
import socket
import time

from websockets.sync.client import connect


def text_of(reply):
    """A tools/call answer's first text, parsed when it is JSON."""
    assert "result" in reply, reply
    text = reply["result"]["content"][0]["text"]
    try:
        return json.loads(text)
    except ValueError:
        return text


class Mcp:
    """A minimal MCP client over the Claude transport."""

    def __init__(self, port, token, protocol="mcp"):
        headers = {"x-claude-code-ide-authorization": token} if token is not None else {}
        self.ws = connect(f"ws://127.0.0.1:{port}/", additional_headers=headers,
                          subprotocols=[protocol] if protocol else None, proxy=None, open_timeout=5,
                          legacy=True)
        self.next_id = 0
        self.notifications = []

    def request(self, method, params=None, timeout=10):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.ws.send(json.dumps(msg))
        deadline = time.monotonic() + timeout
        while True:
            reply = json.loads(self.ws.recv(timeout=max(deadline - time.monotonic(), 0.01)))
            if reply.get("id") == self.next_id:
                return reply
            self.notifications.append(reply)

    def notify(self, method, params=None):
        self.ws.send(json.dumps({"jsonrpc": "2.0", "method": method, "params": params or {}}))

    def tool(self, name, arguments=None):
        return text_of(self.request("tools/call", {"name": name, "arguments": arguments or {}}))

    def wait_notification(self, method, where=lambda p: True, timeout=10):
        deadline = time.monotonic() + timeout
        while True:
            for n in self.notifications:
                if n.get("method") == method and where(n.get("params")):
                    return n["params"]
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {method} notification; got {self.notifications!r}")
            try:
                self.notifications.append(json.loads(self.ws.recv(timeout=left)))
            except TimeoutError:
                pass

    def close(self):
        self.ws.close()


def handshake(client):
    init = client.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                         "clientInfo": {"name": "claude-code", "version": "test"}})
    client.notify("notifications/initialized")
    client.notify("ide_connected", {"pid": os.getpid()})
    return init


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a Unix socket (as Node's http.request with socketPath)."""

    def __init__(self, path, timeout=10):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)

    def _send_output(self, message_body=None, encode_chunked=False):
        # Head and body in one write: a server that refuses a request
        # closes without reading its body, and a body written after that
        # fails at once on a Unix socket (EPIPE) where TCP would take it.
        self._buffer.extend((b"", b""))
        msg = b"\r\n".join(self._buffer)
        del self._buffer[:]
        self.send(msg + (message_body or b""))


class Http:
    """A plain HTTP/1.1 client (http.client): every header is the test's.
    On loopback TCP (`port`) with `Authorization: Bearer`, or on a Unix
    socket (`unix`, its path) with `Authorization: Nonce` and the Host
    Node sends there (`localhost`)."""

    def __init__(self, port, token, host=None, unix=None):
        self.port, self.token, self.unix = port, token, unix
        self.scheme = "Nonce" if unix else "Bearer"
        self.host = host or ("localhost" if unix else f"127.0.0.1:{port}")
        self.session = None
        self.next_id = 0

    def send(self, method, body=None, headers=None, path="/mcp", token=..., timeout=10):
        if self.unix:
            conn = UnixHTTPConnection(self.unix, timeout=timeout)
        else:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", self.host)
        token = self.token if token is ... else token
        if token is not None:
            conn.putheader("Authorization", f"{self.scheme} {token}")
        if self.session:
            conn.putheader("Mcp-Session-Id", self.session)
        data = json.dumps(body).encode() if isinstance(body, (dict, list)) else (body or b"")
        if method == "POST":
            conn.putheader("Content-Type", "application/json")
            conn.putheader("Accept", "application/json, text/event-stream")
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        if method in ("POST", "PUT") or data:
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data or None)
        return conn, conn.getresponse()

    def status(self, *args, **kw):
        conn, resp = self.send(*args, **kw)
        resp.read()
        conn.close()
        return resp.status

    def request(self, method, params=None):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        conn, resp = self.send("POST", msg)
        body = resp.read()
        conn.close()
        assert resp.status == 200, (resp.status, body)
        if method == "initialize":
            self.session = resp.getheader("Mcp-Session-Id")
        return json.loads(body)

    def notify(self, method, params=None):
        return self.status("POST", {"jsonrpc": "2.0", "method": method, "params": params or {}})

    def initialize(self):
        init = self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                           "clientInfo": {"name": "test", "version": "0"}})
        assert self.notify("notifications/initialized") == 202
        return init

    def tool(self, name, arguments):
        return self.request("tools/call", {"name": name, "arguments": arguments})


class Events:
    """A session's SSE stream (GET /mcp), read event by event."""

    def __init__(self, client, timeout=10):
        self.conn, self.resp = client.send("GET", headers={"Accept": "text/event-stream"}, timeout=timeout)
        assert self.resp.status == 200, self.resp.status
        assert self.resp.getheader("Content-Type") == "text/event-stream"
        self.seen = []
        # Messages before this one were returned by wait() or passed over.
        self.pos = 0

    def next(self):
        data = []
        while True:
            line = self.resp.fp.readline()
            if not line:
                return None
            line = line.decode().rstrip("\n")
            if line.startswith("data: "):
                data.append(line[6:])
            elif line == "" and data:
                msg = json.loads("\n".join(data))
                self.seen.append(msg)
                return msg

    def wait(self, method, where=lambda p: True, timeout=10):
        """The next message `method` (after the last one returned) matching `where`."""
        deadline = time.monotonic() + timeout
        while True:
            for i in range(self.pos, len(self.seen)):
                msg = self.seen[i]
                if msg.get("method") == method and where(msg.get("params")):
                    self.pos = i + 1
                    return msg["params"]
            if time.monotonic() > deadline or self.next() is None:
                raise AssertionError(f"no {method}; got {self.seen!r}")

    def ended(self):
        """Whether the server ended the stream (read to its end)."""
        try:
            while self.next() is not None:
                pass
            return True
        except (TimeoutError, socket.timeout):
            return False

    def close(self):
        self.conn.close()
