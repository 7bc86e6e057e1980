"""Helpers for test_resilience.py: hand-built WebSocket frames over raw TCP,
the server's own view of its clients, and its log.

Only test_resilience.py uses this file; conftest.py stays as it is.
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import struct
import time
import urllib.parse
from pathlib import Path

from conftest import Editor

try:  # the C speed-up websockets ships with; the pure Python fallback is fine too
    from websockets.speedups import apply_mask as _apply_mask  # type: ignore
except ImportError:  # pragma: no cover
    _apply_mask = None

WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


def mask(payload: bytes, key: bytes) -> bytes:
    if _apply_mask is not None:
        return _apply_mask(payload, key)
    n = len(payload)
    if n == 0:
        return b""
    reps = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(reps, "big")).to_bytes(n, "big")


def frame(opcode: int, payload: bytes, *, fin: bool = True, masked: bool = True,
          declared_len: int | None = None) -> bytes:
    """One WebSocket frame as a client sends it (RFC 6455 §5.2).

    ``declared_len`` announces a payload length different from ``len(payload)``
    (for truncated frames); the payload is masked as far as it goes.
    """
    n = len(payload) if declared_len is None else declared_len
    head = bytes([(0x80 if fin else 0) | opcode])
    mbit = 0x80 if masked else 0
    if n < 126:
        head += bytes([mbit | n])
    elif n < 1 << 16:
        head += bytes([mbit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([mbit | 127]) + struct.pack("!Q", n)
    if masked:
        key = os.urandom(4)
        return head + key + mask(payload, key)
    return head + payload


class RawWs:
    """A WebSocket client written by hand on a plain TCP socket: no extension
    is offered, every frame is built by the test, every server frame is parsed
    here, nothing is answered automatically."""

    def __init__(self, port: int, token: str, *, timeout: float = 5.0):
        key = base64.b64encode(os.urandom(16)).decode()
        req = (f"GET /?auth={urllib.parse.quote(token, safe='')} HTTP/1.1\r\n"
               f"Host: localhost:{port}\r\n"
               "Upgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.sock.sendall(req.encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise AssertionError(f"server hung up during the handshake; got {buf!r}")
            buf += chunk
        head, self.buf = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        assert lines[0].startswith("HTTP/1.1 101"), f"upgrade refused: {head!r}"
        headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:] if ":" in l)}
        accept = base64.b64encode(hashlib.sha1(key.encode() + WS_GUID).digest()).decode()
        assert headers.get("sec-websocket-accept") == accept, headers
        assert "sec-websocket-extensions" not in headers, headers

    # -- sending ---------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_frame(self, opcode: int, payload: bytes, **kw) -> None:
        self.sock.sendall(frame(opcode, payload, **kw))

    def send_text(self, text: str) -> None:
        self.send_frame(OP_TEXT, text.encode("utf-8"))

    # -- receiving -------------------------------------------------------
    def _fill(self, need: int, deadline: float) -> None:
        while len(self.buf) < need:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no complete server frame within the deadline ({len(self.buf)} bytes buffered)")
            self.sock.settimeout(remaining)
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise EOFError("server closed the TCP connection")
            self.buf += chunk

    def recv_frame(self, timeout: float = 5.0) -> tuple[bool, int, bytes]:
        """(fin, opcode, payload) of the next server frame (server frames are never masked)."""
        deadline = time.monotonic() + timeout
        self._fill(2, deadline)
        b0, b1 = self.buf[0], self.buf[1]
        assert not b1 & 0x80, "server sent a masked frame"
        n, off = b1 & 0x7F, 2
        if n == 126:
            self._fill(4, deadline)
            n, off = struct.unpack("!H", self.buf[2:4])[0], 4
        elif n == 127:
            self._fill(10, deadline)
            n, off = struct.unpack("!Q", self.buf[2:10])[0], 10
        self._fill(off + n, deadline)
        payload, self.buf = self.buf[off:off + n], self.buf[off + n:]
        return bool(b0 & 0x80), b0 & 0x0F, payload

    def read_until_close(self, timeout: float = 5.0) -> tuple[str, int | None, str | None, list]:
        """Reads until the server's close frame or EOF.

        Returns (how, code, reason, frames before): how is "close" (a close frame
        arrived), "eof" (the TCP connection ended without one) or "reset".
        """
        deadline = time.monotonic() + timeout
        frames = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"server neither closed nor hung up within {timeout} s; frames {frames!r}")
            try:
                fin, op, payload = self.recv_frame(remaining)
            except EOFError:
                return "eof", None, None, frames
            except ConnectionResetError:
                return "reset", None, None, frames
            if op == OP_CLOSE:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                return "close", code, payload[2:].decode("utf-8", "replace"), frames
            frames.append((op, payload))

    def server_hung_up(self, timeout: float) -> bool:
        """True if the TCP connection ends (EOF or reset) within ``timeout``; frames are discarded."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.sock.settimeout(max(0.01, deadline - time.monotonic()))
                if not self.sock.recv(1 << 20):
                    return True
            except socket.timeout:
                return False
            except (ConnectionResetError, BrokenPipeError):
                return True
        return False

    def abort(self) -> None:
        """Closes the socket the way a killed process does: a RST if bytes are unread."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.close()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


# --------------------------------------------------------------------------
# the server's view
# --------------------------------------------------------------------------


def server_clients(ed: Editor) -> int:
    """Connected, admitted clients according to the native status()."""
    return ed.lua("return require('amp').status().clients")


def wait_clients(ed: Editor, count: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        got = server_clients(ed)
        if got == count:
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"server has {got} clients, expected {count} within {timeout} s; "
                                 f"log tail:\n{log_tail(ed)}")
        time.sleep(0.05)


def amp_log(ed: Editor) -> str:
    """The amp.log of this editor's environment (every editor of one env shares it)."""
    found = sorted(ed.env.root.rglob("amp.log"))
    return "\n".join(p.read_text("utf-8", errors="replace") for p in found)


def log_tail(ed: Editor, n: int = 40) -> str:
    return "\n".join(amp_log(ed).splitlines()[-n:])


def temp_siblings(target: Path) -> list[str]:
    """Temp files of atomic writes (``.<name>.amp-<pid>-<hex>.tmp``) beside ``target``."""
    prefix = f".{target.name}.amp-"
    return sorted(n for n in os.listdir(target.parent) if n.startswith(prefix) and n.endswith(".tmp"))
