"""Raw WebSocket clients for latency measurements: many read on one epoll
thread (Poller), or one blocking client for big requests (RawClient)."""

from __future__ import annotations

import contextlib
import os
import select
import socket
import struct
import threading
import time
from typing import Any, Callable

from harness import upgrade_request


def raw_upgrade(port: int, token: str, rcvbuf: int | None = None, timeout: float = 5) -> tuple[socket.socket, bytes]:
    """Opens a WebSocket by hand; returns the socket and bytes read past the headers."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(timeout)
    s.connect(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(upgrade_request(port, token))
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise RuntimeError("server closed during the handshake")
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    if not head.startswith(b"HTTP/1.1 101"):
        raise RuntimeError(f"upgrade refused: {head[:200]!r}")
    return s, rest


class Poller(threading.Thread):
    """Reads many raw WebSocket connections on one thread; records every frame
    with its arrival time (perf_counter right after the completing recv)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.ep = select.epoll()
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.conns: dict[int, dict] = {}
        self.frames: list[list[tuple[float, int, bytes]]] = []  # per client: (t, opcode, payload)
        self.wake_r, self.wake_w = os.pipe()
        self.ep.register(self.wake_r, select.EPOLLIN)
        self.running = True
        self.start()

    def add(self, port: int, token: str) -> int:
        s, rest = raw_upgrade(port, token)
        s.setblocking(False)
        with self.lock:
            idx = len(self.frames)
            self.frames.append([])
            self.conns[s.fileno()] = {"sock": s, "buf": bytearray(rest), "idx": idx, "closed": False}
            self._parse(self.conns[s.fileno()], time.perf_counter())
        self.ep.register(s.fileno(), select.EPOLLIN)
        return idx

    def count(self, idx: int) -> int:
        with self.lock:
            return len(self.frames[idx])

    def wait_for(self, pred: Callable[[], Any], timeout: float) -> Any:
        with self.cond:
            return self.cond.wait_for(pred, timeout)

    def run(self) -> None:
        while self.running:
            events = self.ep.poll(0.5)
            for fd, ev in events:
                if fd == self.wake_r:
                    return
                conn = self.conns.get(fd)
                if conn is None or conn["closed"]:
                    continue
                try:
                    data = conn["sock"].recv(1 << 20)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                t = time.perf_counter()
                with self.cond:
                    if not data:
                        conn["closed"] = True
                        with contextlib.suppress(Exception):
                            self.ep.unregister(fd)
                    else:
                        conn["buf"] += data
                        self._parse(conn, t)
                    self.cond.notify_all()

    def _parse(self, conn: dict, t: float) -> None:
        buf = conn["buf"]
        while len(buf) >= 2:
            b0, b1 = buf[0], buf[1]
            n = b1 & 0x7F
            off = 2
            if n == 126:
                if len(buf) < 4:
                    return
                n = struct.unpack(">H", buf[2:4])[0]
                off = 4
            elif n == 127:
                if len(buf) < 10:
                    return
                n = struct.unpack(">Q", buf[2:10])[0]
                off = 10
            if b1 & 0x80:  # servers never mask
                off += 4
            if len(buf) < off + n:
                return
            payload = bytes(buf[off:off + n])
            del buf[:off + n]
            opcode = b0 & 0x0F
            if opcode == 0x9:  # ping -> pong (masked with a zero key)
                with contextlib.suppress(OSError):
                    conn["sock"].send(bytes([0x8A, 0x80 | len(payload)]) + b"\0\0\0\0" + payload)
                continue
            self.frames[conn["idx"]].append((t, opcode, payload))

    def stop(self) -> None:
        self.running = False
        with contextlib.suppress(OSError):
            os.write(self.wake_w, b"x")
        self.join(timeout=2)
        for conn in self.conns.values():
            with contextlib.suppress(OSError):
                conn["sock"].close()


try:
    from websockets.speedups import apply_mask  # C implementation shipped with websockets
except ImportError:  # pragma: no cover
    def apply_mask(data: bytes, mask: bytes) -> bytes:
        n = len(data)
        key = (mask * (n // 4 + 1))[:n]
        return (int.from_bytes(data, "little") ^ int.from_bytes(key, "little")).to_bytes(n, "little")


class RawClient:
    """A blocking raw WebSocket client for big requests: the request frame is
    built (and masked) before the clock starts, and the response's arrival is
    the moment its last byte was read, before any JSON parsing."""

    def __init__(self, port: int, token: str):
        self.sock, rest = raw_upgrade(port, token)
        self.sock.settimeout(60)
        self.buf = bytearray(rest)
        self.first = 0.0  # arrival of the first bytes after the last request was sent
        self._t = 0.0  # arrival of the bytes last read

    @staticmethod
    def frame(payload: bytes) -> bytes:
        n = len(payload)
        if n < 126:
            head = bytes([0x81, 0x80 | n])
        elif n < 65536:
            head = bytes([0x81, 0x80 | 126]) + struct.pack(">H", n)
        else:
            head = bytes([0x81, 0x80 | 127]) + struct.pack(">Q", n)
        key = os.urandom(4)
        return head + key + apply_mask(payload, key)

    def request(self, frame: bytes) -> tuple[float, float, bytes]:
        """Sends a prepared frame; returns (t_sent_start, t_response_complete, payload)."""
        t0 = time.perf_counter()
        self.sock.sendall(frame)
        self.first = 0.0
        message: bytearray | None = None  # a text message still arriving in fragments
        while True:
            while True:
                got = self._next()
                if got is None:
                    break
                op, fin, payload, t = got
                if op == 0x1:
                    message = bytearray(payload)
                elif op == 0x0 and message is not None:
                    message += payload
                else:
                    continue
                if fin:
                    whole, message = bytes(message), None
                    if whole.startswith(b'{"serverResponse"'):
                        return t0, t, whole
            chunk = self.sock.recv(1 << 22)
            if not chunk:
                raise RuntimeError("server closed the connection")
            self._t = time.perf_counter()
            if not self.first:
                self.first = self._t
            self.buf += chunk

    def _next(self) -> tuple[int, bool, bytes, float] | None:
        buf = self.buf
        if len(buf) < 2:
            return None
        b0, n, off = buf[0], buf[1] & 0x7F, 2
        if n == 126:
            if len(buf) < 4:
                return None
            n, off = struct.unpack(">H", buf[2:4])[0], 4
        elif n == 127:
            if len(buf) < 10:
                return None
            n, off = struct.unpack(">Q", buf[2:10])[0], 10
        if len(buf) < off + n:
            return None
        payload = bytes(buf[off:off + n])
        del buf[:off + n]
        op = b0 & 0x0F
        if op == 0x9:
            self.sock.sendall(bytes([0x8A, 0x80 | len(payload)]) + b"\0\0\0\0" + payload)
        return op, bool(b0 & 0x80), payload, self._t

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


SELECTION = b'"selectionDidChange"'


def first_selection_after(poller: Poller, idx: int, start: int) -> float | None:
    for t, op, payload in poller.frames[idx][start:]:
        if op == 0x1 and SELECTION in payload:
            return t
    return None
