"""One suite of limits and abuse, run against every front-end (Amp, Claude
Code, Gemini CLI, Qwen Code, the MCP server, GitHub Copilot CLI): the
same serving layer must give each the same outcome. Each test is
parametrized over the agents; a front-end's own client speaks its own
transport (WebSocket with the token in the query or in a header, MCP over
HTTP with a bearer token on loopback TCP, or with a nonce on a private
Unix socket), and the outcome is compared in that transport's terms (a
close code, an HTTP status, a dropped socket).

The limits (server.* options and the constants of src/serve/, listed in
:help amp-limits): one admission policy (loopback Host with our port, no
Origin, the token), handshake slots, a message cap (server.max_frame_bytes),
64 KiB of request headers, one in-flight byte budget
(server.max_inflight_bytes) that makes clients wait rather than fail,
back-pressure, a client that does not read is dropped, requests waiting
for the user hold no place."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import wait_for
from mcp_clients import Events, Http, Mcp, handshake
from review_helpers import proposals, wait_proposals

AGENTS = ["amp", "claude", "gemini", "qwen", "mcp", "copilot"]
# The front-ends over MCP Streamable HTTP (the IDE-companion front-end's
# flavors and the MCP server with a bearer token on loopback TCP, Copilot
# CLI's with a nonce on a Unix socket); the others speak WebSocket.
HTTP = ("gemini", "qwen", "mcp", "copilot")
NAMES = {"amp": "Amp", "claude": "Claude", "gemini": "Gemini", "qwen": "Qwen", "mcp": "MCP", "copilot": "Copilot"}
CLAUDE_HEADER = "x-claude-code-ide-authorization"


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_bytes(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


# ---------------------------------------------------------------- the front-ends


class Front:
    """One front-end of a running Neovim, seen by its own clients."""

    def __init__(self, ed, agent: str):
        self.ed, self.agent = ed, agent
        status = wait_for(lambda: (self.status().get("port") or self.status().get("socket")) and self.status(), 10,
                          f"the {agent} server")
        # Copilot's server is a Unix socket: no port.
        self.port, self.socket = status.get("port"), status.get("socket")
        file = status["discovery_file"]
        wait_for(lambda: os.path.exists(file), 10, f"the {agent} discovery file")
        with open(file) as f:
            found = json.load(f)
        if agent == "copilot":
            scheme, self.token = found["headers"]["Authorization"].split(" ", 1)
            assert scheme == "Nonce"
        else:
            self.token = found["authToken"]

    def dial(self, timeout: float = 5) -> socket.socket:
        """A new connection to the front-end's listener."""
        if self.socket:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(timeout)
            s.connect(self.socket)
            return s
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout)

    def default_host(self) -> str:
        """The Host the real client sends: Node's http.request over a Unix
        socket sends `localhost`."""
        return "localhost" if self.socket else f"127.0.0.1:{self.port}"

    def status(self) -> dict:
        return self.ed.lua("return require('amp').status().agents[...]", self.agent) or {}

    # -- a client that is admitted, and one request it makes

    def connect(self):
        if self.agent == "amp":
            return self.ed.connect()
        if self.agent == "claude":
            c = Mcp(self.port, self.token)
            handshake(c)
            return c
        c = Http(self.port, self.token, unix=self.socket)
        c.initialize()
        return c

    def ping(self, client) -> None:
        """A cheap request, answered."""
        if self.agent == "amp":
            client.ping("still there")
        elif self.agent == "claude":
            assert "result" in client.request("tools/list"), "tools/list not answered"
        else:
            assert client.request("tools/list")["result"]["tools"]

    # -- raw requests, every byte the test's

    def raw_request(self, *, token: str | None = "__valid__", host: str | None = None,
                    origin: str | None = None, extra: list[tuple[str, str]] = (), body: bytes = b"") -> bytes:
        """The bytes of one request (a WebSocket upgrade, or an HTTP POST)."""
        token = self.token if token == "__valid__" else token
        host = host or self.default_host()
        headers = [("Host", host)]
        if self.agent in ("amp", "claude"):
            target = "/"
            if self.agent == "amp" and token is not None:
                target = f"/?auth={token}"
            headers += [("Upgrade", "websocket"), ("Connection", "Upgrade"),
                        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), ("Sec-WebSocket-Version", "13")]
            if self.agent == "claude":
                headers.append(("Sec-WebSocket-Protocol", "mcp"))
                if token is not None:
                    headers.append((CLAUDE_HEADER, token))
            line = f"GET {target} HTTP/1.1"
        else:
            line = "POST /mcp HTTP/1.1"
            if token is not None:
                scheme = "Nonce" if self.agent == "copilot" else "Bearer"
                headers.append(("Authorization", f"{scheme} {token}"))
            if not body:
                body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                   "params": {"protocolVersion": "2025-06-18"}}).encode()
            headers += [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        if origin:
            headers.append(("Origin", origin))
        headers += list(extra)
        head = line + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
        return head.encode() + body

    def outcome(self, data: bytes, timeout: float = 5) -> tuple[str, int, bool]:
        """Sends `data` on a new connection. The outcome: ("http", status)
        for an HTTP answer, ("close", code) for an upgrade followed by a
        close frame, ("open", 101) for an upgrade that stays open, or
        ("dropped", 0) when the server hangs up without a word; and whether
        the server then closed the socket by itself."""
        sock = self.dial(timeout)
        try:
            try:
                sock.sendall(data)
            except (BrokenPipeError, ConnectionResetError):
                return ("dropped", 0, True)
            buf = read_until(sock, b"\r\n\r\n", timeout)
            if b"\r\n\r\n" not in buf:
                return ("dropped", 0, True)
            status = int(buf.split(b" ", 2)[1])
            if status != 101:
                return ("http", status, server_closes(sock, timeout))
            code = read_close_code(sock, buf.split(b"\r\n\r\n", 1)[1], 1.0)
            if code is None:
                return ("open", 101, False)
            return ("close", code, server_closes(sock, timeout))
        finally:
            sock.close()


def read_until(sock: socket.socket, marker: bytes, timeout: float) -> bytes:
    buf = b""
    deadline = time.monotonic() + timeout
    while marker not in buf and time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except (socket.timeout, ConnectionResetError):
            break
        if not chunk:
            break
        buf += chunk
    return buf


def read_close_code(sock: socket.socket, buf: bytes, timeout: float) -> int | None:
    """The code of the first close frame the server sends within `timeout`
    (server frames are not masked); None without one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        while len(buf) >= 2:
            opcode, size = buf[0] & 0x0F, buf[1] & 0x7F
            start = 2
            if size == 126:
                size, start = int.from_bytes(buf[2:4], "big"), 4
            elif size == 127:
                size, start = int.from_bytes(buf[2:10], "big"), 10
            if len(buf) < start + size:
                break
            payload, buf = buf[start:start + size], buf[start + size:]
            if opcode == 0x8:
                return int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        buf += chunk
    return None


def server_closes(sock: socket.socket, timeout: float) -> bool:
    """Whether the server closes the connection (EOF) within `timeout`,
    whatever else it sends first."""
    deadline = time.monotonic() + timeout
    sock.settimeout(0.2)
    while time.monotonic() < deadline:
        try:
            if not sock.recv(65536):
                return True
        except socket.timeout:
            continue
        except ConnectionResetError:
            return True
    return False


def setup_for(agent: str, tmp, **extra) -> dict:
    agents = {a: a == agent for a in AGENTS}
    opts = {"agents": agents, "_wait": agent == "amp", "_extra_env": {"TMPDIR": str(tmp)}}
    opts.update(extra)
    return opts


@pytest.fixture
def front_factory(nvim_factory, amp_env):
    tmp = amp_env.root / "tmp"
    tmp.mkdir(exist_ok=True)

    def make(agent: str, **extra) -> Front:
        ed = nvim_factory(**setup_for(agent, tmp, **extra))
        return Front(ed, agent)

    return make


# ---------------------------------------------------------------- who may talk


@pytest.mark.parametrize("agent", AGENTS)
def test_a_wrong_or_missing_token_is_refused_and_its_connection_closed(front_factory, agent):
    front = front_factory(agent)
    for token in (None, "wrong-" + front.token[6:], front.token + "x", ""):
        kind, code, closed = front.outcome(front.raw_request(token=token))
        if agent in HTTP:
            assert (kind, code) == ("http", 401), (token, kind, code)
        else:
            # Amp's CLI explains only a close after the upgrade (1000); Claude: 1008.
            assert (kind, code) == ("close", 1000 if agent == "amp" else 1008), (token, kind, code)
        assert closed, f"the server kept the refused connection open ({token!r})"
    front.ping(front.connect())


@pytest.mark.parametrize("agent", AGENTS)
def test_a_foreign_host_or_an_origin_is_forbidden(front_factory, agent):
    front = front_factory(agent)
    # A Unix socket (Copilot's) has no port: its Host is a loopback name
    # with any port or none (Node sends "localhost"), so the two cases that
    # differ from an admitted Host only by the port are admitted there,
    # and said so below; every other name and every Origin is refused the
    # same way.
    port = front.port or 80
    refused = [("evil.test", None), (f"evil.test:{port}", None), (f"localhost.evil.test:{port}", None),
               (None, "http://evil.test"), (None, f"http://127.0.0.1:{port}"), (None, "null")]
    by_port = [f"127.0.0.1:{port + 1}", "127.0.0.1"]
    if front.port:
        refused += [(host, None) for host in by_port]
    for host, origin in refused:
        kind, code, closed = front.outcome(front.raw_request(host=host, origin=origin))
        assert (kind, code) == ("http", 403), (host, origin, kind, code)
        assert closed, (host, origin)
    admitted = ("http", 200) if agent in HTTP else ("open", 101)
    hosts = [f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", f"LOCALHOST:{port}"]
    if not front.port:
        hosts += by_port + ["localhost", "[::1]"]
    for host in hosts:
        kind, code, _ = front.outcome(front.raw_request(host=host))
        assert (kind, code) == admitted, (host, kind, code)
    front.ping(front.connect())


FLOOD_SCRIPT = r"""
import socket, sys, time
where, count, data = sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3])
socks = []
for _ in range(count):
    try:
        if where.startswith("/"):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(2)
            s.connect(where)
        else:
            s = socket.create_connection(("127.0.0.1", int(where)), timeout=2)
        s.sendall(data)
        socks.append(s)
    except OSError:
        time.sleep(0.002)
print(len(socks), flush=True)
sys.stdin.read()  # hold every socket until told
"""


@pytest.mark.parametrize("as_other_user", [False, True], ids=["same-user", "other-user"])
@pytest.mark.parametrize("agent", AGENTS)
def test_token_less_connections_hold_a_bounded_number_of_descriptors(front_factory, agent, as_other_user):
    """600 connections without a token, each sending a whole request and
    never closing, from this user or from another one: the editor's
    descriptors stay bounded (the handshake slots), its own :w and the real
    client keep working."""
    # The flood runs in a system Python that any user can run (the test's
    # own may live under a private home).
    python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    if as_other_user and (os.geteuid() != 0 or python == sys.executable):
        pytest.skip("needs root and /usr/bin/python3 to run the flood as another user")
    front = front_factory(agent)
    ed = front.ed
    baseline = open_fds(ed.pid)
    target = ed.env.workspace / "saved.txt"
    target.write_text("before\n")
    ed.edit(target)
    peak = {"fds": 0}
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            peak["fds"] = max(peak["fds"], open_fds(ed.pid))
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    data = front.raw_request(token=None)
    # (Another user cannot even reach a Unix socket in our private
    # directory: its connections fail, and nothing is held.)
    flood = subprocess.Popen([python, "-c", FLOOD_SCRIPT, front.socket or str(front.port), "600", data.hex()],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             user=65534 if as_other_user else None)
    try:
        opened = int(flood.stdout.readline())
        ed.nvim.current.buffer[:] = ["after"]
        ed.nvim.command("write")
        assert target.read_text() == "after\n"
        client = front.connect()
        front.ping(client)
    finally:
        flood.stdin.close()
        flood.wait(timeout=10)
        stop.set()
        watcher.join(timeout=5)
    print(f"\n{agent}: {opened} token-less connections; nvim fds {baseline} -> peak {peak['fds']}")
    # The handshake slots (16, 4 x 16 for a moment) and a few in passing.
    assert peak["fds"] - baseline < 150, f"descriptors grew from {baseline} to {peak['fds']}"


# ---------------------------------------------------------------- sizes


def sized_request(agent: str, size: int) -> bytes:
    """A valid request of exactly `size` bytes (padding in an extra field)."""
    if agent == "amp":
        base = {"clientRequest": {"id": "big", "ping": {"message": ""}}}
        pad = size - len(json.dumps(base))
        base["clientRequest"]["ping"]["message"] = "a" * pad
    else:
        base = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"pad": ""}}
        pad = size - len(json.dumps(base))
        base["params"]["pad"] = "a" * pad
    text = json.dumps(base).encode()
    assert len(text) == size
    return text


LIMIT = 4096


@pytest.mark.parametrize("agent", AGENTS)
def test_a_message_at_the_size_limit_is_answered_and_one_byte_more_refused(front_factory, agent):
    front = front_factory(agent, server={"max_frame_bytes": LIMIT})
    at, over = sized_request(agent, LIMIT), sized_request(agent, LIMIT + 1)
    if agent in HTTP:
        c = front.connect()
        headers = {"Mcp-Session-Id": c.session}
        conn, resp = c.send("POST", at, headers=headers)
        assert resp.status == 200 and json.loads(resp.read())["result"]["tools"]
        conn.close()
        assert c.status("POST", over) == 413
        # A chunked body (no Content-Length, as Copilot CLI sends) is cut where it arrives.
        raw = front.raw_request(extra=[("Mcp-Session-Id", c.session), ("Transfer-Encoding", "chunked")])
        head = raw.split(b"\r\n\r\n")[0].replace(b"Content-Length", b"X-Ignored")
        chunked = head + b"\r\n\r\n" + f"{len(over):x}\r\n".encode() + over + b"\r\n0\r\n\r\n"
        kind, code, closed = front.outcome(chunked)
        assert (kind, code, closed) == ("http", 413, True)
    else:
        c = front.connect()
        c.ws.send(at.decode()) if agent == "claude" else c.send_text(at.decode())
        if agent == "amp":
            sent = json.loads(at)["clientRequest"]["ping"]["message"]
            assert c.recv_response("big")["ping"]["message"] == sent
        else:
            reply = json.loads(c.ws.recv(timeout=5))
            while reply.get("id") != 7:
                reply = json.loads(c.ws.recv(timeout=5))
            assert reply["result"]["tools"]
        other = front.connect()
        if agent == "amp":
            other.send_text(over.decode())
            code, _, _ = other.wait_closed(timeout=5)
        else:
            other.ws.send(over.decode())
            with pytest.raises(Exception):
                while True:
                    other.ws.recv(timeout=5)
            code = other.ws.close_code
        assert code == 1009, code
        front.ping(c)


@pytest.mark.parametrize("agent", AGENTS)
def test_request_headers_up_to_64_kib(front_factory, agent):
    front = front_factory(agent)
    base = front.raw_request(extra=[("X-Pad", "")])
    head_size = len(base.split(b"\r\n\r\n")[0]) + 4
    body = base.split(b"\r\n\r\n", 1)[1]

    def with_head_of(size: int) -> bytes:
        return front.raw_request(extra=[("X-Pad", "p" * (size - head_size))])

    assert len(with_head_of(64 * 1024)) - len(body) == 64 * 1024
    kind, code, _ = front.outcome(with_head_of(64 * 1024))
    assert (kind, code) == (("http", 200) if agent in HTTP else ("open", 101)), (kind, code)
    kind, code, closed = front.outcome(with_head_of(64 * 1024 + 1))
    # HTTP says why (431); the WebSocket upgrade is dropped unanswered.
    assert (kind, code) == (("http", 431) if agent in HTTP else ("dropped", 0)), (kind, code)
    assert closed
    front.ping(front.connect())


# ---------------------------------------------------------------- floods and back-pressure


@pytest.mark.parametrize("agent", AGENTS)
def test_pipelined_requests_are_all_answered_in_order(front_factory, agent):
    front = front_factory(agent)
    n = 300 if agent not in HTTP else 60
    if agent == "amp":
        c = front.connect()
        for i in range(n):
            c.send_json({"clientRequest": {"id": f"p{i}", "ping": {"message": str(i)}}})
        for i in range(n):
            assert c.recv_response(f"p{i}")["ping"]["message"] == str(i)
    elif agent == "claude":
        c = front.connect()
        for i in range(n):
            c.ws.send(json.dumps({"jsonrpc": "2.0", "id": 1000 + i, "method": "tools/list"}))
        seen = set()
        while len(seen) < n:
            reply = json.loads(c.ws.recv(timeout=10))
            if "id" in reply:
                assert "result" in reply, reply
                seen.add(reply["id"])
        assert seen == set(range(1000, 1000 + n))
    else:
        c = front.connect()
        one = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
        raw = front.raw_request(body=one, extra=[("Mcp-Session-Id", c.session)])
        sock = front.dial(timeout=10)
        sock.sendall(raw * n)
        buf = b""
        while buf.count(b"HTTP/1.1 200") < n:
            chunk = sock.recv(1 << 20)
            assert chunk, f"closed after {buf.count(b'HTTP/1.1 200')} answers"
            buf += chunk
        sock.close()
    front.ping(front.connect())


@pytest.mark.parametrize("agent", AGENTS)
def test_the_byte_budget_makes_clients_wait_never_fail(front_factory, agent):
    """With max_inflight_bytes at 1 MiB, 3 clients x 6 requests of 300 KiB
    at once (each takes 600 KiB of the budget): every one is answered, none
    is refused as busy."""
    front = front_factory(agent, server={"max_inflight_bytes": 1024 * 1024})
    size = 300 * 1024

    def run(_):
        c = front.connect()
        if agent == "amp":
            ids = []
            for i in range(6):
                text = sized_request("amp", size).decode().replace('"big"', f'"r{i}"')
                c.send_text(text)
                ids.append(f"r{i}")
            return all(c.recv_response(i)["ping"]["message"].startswith("aaa") for i in ids)
        if agent == "claude":
            for i in range(6):
                c.ws.send(sized_request("claude", size).decode().replace('"id": 7', f'"id": {i}'))
            got = {}
            while len(got) < 6:
                reply = json.loads(c.ws.recv(timeout=20))
                if "id" in reply:
                    got[reply["id"]] = reply
            return all("result" in r for r in got.values())
        statuses = []
        for _ in range(6):
            conn, resp = c.send("POST", sized_request(agent, size), headers={"Mcp-Session-Id": c.session})
            statuses.append(resp.status)
            resp.read()
            conn.close()
        return statuses == [200] * 6

    with ThreadPoolExecutor(3) as pool:
        assert all(pool.map(run, range(3)))


@pytest.mark.parametrize("agent", AGENTS)
def test_a_client_that_never_reads_is_dropped_and_memory_stays_bounded(front_factory, agent):
    front = front_factory(agent, server={"send_queue": 8})
    ed = front.ed
    before = rss_bytes(ed.pid)
    held_before = unix_connections(ed.pid, front.socket) if front.socket else 0
    sock = front.dial()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    if agent in HTTP:
        c = front.connect()
        one = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
        raw = front.raw_request(body=one, extra=[("Mcp-Session-Id", c.session)])
        sock.settimeout(5)
        try:
            sock.sendall(raw * 5000)
        except OSError:
            pass
        deadline = 25  # WRITE_TIMEOUT (15 s) and a margin
    else:
        import base64
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall(front.raw_request(extra=[]).replace(b"dGhlIHNhbXBsZSBub25jZQ==", key.encode()))
        assert b" 101 " in read_until(sock, b"\r\n\r\n", 5)
        # Masked client frames, each answered with a large message, never read.
        if agent == "amp":
            msg = json.dumps({"clientRequest": {"id": "x", "ping": {"message": "m" * 60000}}}).encode()
        else:
            msg = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
        frame = ws_frame(msg)
        # Until the server stops reading (its back-pressure) or drops us.
        sock.settimeout(5)
        try:
            for _ in range(2000):
                sock.sendall(frame)
        except OSError:
            pass
        deadline = 25
    if front.socket:
        # A Unix socket's peer is not in /proc: the editor's connections on
        # its socket are counted instead (this test makes no other one).
        def holds():
            return unix_connections(ed.pid, front.socket) > held_before
    else:
        peer = sock.getsockname()[1]

        def holds():
            return holds_connection(ed.pid, front.port, peer)
    assert holds(), "the connection was not made"
    wait_for(lambda: not holds(), deadline, "the editor to drop the client that reads nothing")
    # Dropped with a reset: nothing the client did not read is kept queued.
    assert server_closes(sock, 5)
    sock.close()
    grown = rss_bytes(ed.pid) - before
    assert grown < 64 * 1024 * 1024, f"RSS grew by {grown / 1e6:.0f} MB"
    front.ping(front.connect())


def socket_inodes(pid: int) -> set[str]:
    """The inodes of the sockets `pid` holds (from /proc)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def unix_connections(pid: int, path: str) -> int:
    """How many connected sockets on the Unix socket `path` `pid` holds
    (the accepted ones carry the listener's path in /proc/net/unix)."""
    inodes = socket_inodes(pid)
    n = 0
    with open("/proc/net/unix") as f:
        next(f)
        for line in f:
            fields = line.split()
            # Num RefCount Protocol Flags Type St Inode Path; St 03: connected.
            if len(fields) >= 8 and fields[7] == path and fields[5] == "03" and fields[6] in inodes:
                n += 1
    return n


def ws_frame(payload: bytes) -> bytes:
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = bytes([0x81, 0x80 | n])
    elif n < 1 << 16:
        head = bytes([0x81, 0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([0x81, 0x80 | 127]) + n.to_bytes(8, "big")
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def holds_connection(pid: int, port: int, peer: int) -> bool:
    """Whether `pid` holds a socket of the connection 127.0.0.1:`port` <-
    127.0.0.1:`peer` (from /proc)."""
    inodes = socket_inodes(pid)
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            local, remote = fields[1], fields[2]
            if int(local.split(":")[1], 16) == port and int(remote.split(":")[1], 16) == peer:
                if fields[9] in inodes:
                    return True
    return False


@pytest.mark.parametrize("agent", AGENTS)
def test_stalled_requests_hold_no_place_and_are_dropped(front_factory, agent):
    """20 connections that stop in the middle of a request (WebSocket: an
    unfinished upgrade; HTTP: a body that never finishes): the real client
    is served at once meanwhile, and the stalled ones are dropped."""
    front = front_factory(agent)
    client = front.connect()
    stalled = []
    for _ in range(20):
        s = front.dial()
        data = front.raw_request()
        if agent in HTTP:
            body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
            data = front.raw_request(body=body, extra=[("Mcp-Session-Id", client.session)])
            data = data.replace(f"Content-Length: {len(body)}".encode(), b"Content-Length: 100000")
        else:
            data = data[: len(data) // 2]
        s.sendall(data)
        stalled.append(s)
    started = time.monotonic()
    for _ in range(5):
        front.ping(client)
    assert time.monotonic() - started < 3, "the real client waited for the stalled ones"
    front.ping(front.connect())
    # Dropped by their deadlines: 2 s for a handshake, 10 s for a body.
    within = 6 if agent not in HTTP else 14
    assert all(server_closes(s, within) for s in stalled), "a stalled connection was kept"
    for s in stalled:
        s.close()


# ---------------------------------------------------------------- requests that wait for the user


def propose(front: Front, client, path, text: str, name: str):
    """Sends a proposal that waits for the user; returns how to read its answer."""
    if front.agent == "amp":
        return client.send_request("editFile", {"path": str(path), "fullContent": text})
    if front.agent == "claude":
        client.next_id += 1
        client.ws.send(json.dumps({"jsonrpc": "2.0", "id": client.next_id, "method": "tools/call", "params": {
            "name": "openDiff", "arguments": {"old_file_path": str(path), "new_file_path": str(path),
                                              "new_file_contents": text, "tab_name": name}}}))
        return client.next_id
    if front.agent == "copilot":
        # open_diff answers only when the user decides: sent on a
        # connection of its own, read later (or never).
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "open_diff", "arguments": {"original_file_path": str(path), "new_file_contents": text,
                                               "tab_name": name}}}).encode()
        sock = front.dial(timeout=10)
        sock.sendall(front.raw_request(body=body, extra=[("Mcp-Session-Id", client.session)]))
        return sock
    if front.agent == "mcp":
        # propose_edit answers with the user's decision: it waits, on a
        # connection of its own.
        body = {"jsonrpc": "2.0", "id": name, "method": "tools/call",
                "params": {"name": "propose_edit", "arguments": {"path": str(path), "newText": text}}}
        answer = {}

        def wait():
            try:
                conn, resp = client.send("POST", body, timeout=60)
                answer["reply"] = json.loads(resp.read())
                conn.close()
            except OSError as e:
                answer["error"] = e

        # One at a time: connections opened all at once would compete for
        # the handshake slots (server.max_pending_handshakes).
        before = len(proposals(front.ed))
        threading.Thread(target=wait, daemon=True).start()
        wait_for(lambda: len(proposals(front.ed)) > before or answer, 10, "the proposal to arrive")
        return answer
    return client.tool("openDiff", {"filePath": str(path), "newContent": text})


def http_answer(sock: socket.socket, timeout: float = 10) -> tuple[int, bytes]:
    """The status and body of the HTTP answer read from `sock`."""
    buf = read_until(sock, b"\r\n\r\n", timeout)
    head, _, body = buf.partition(b"\r\n\r\n")
    length = int(next(line.split(b":", 1)[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")))
    deadline = time.monotonic() + timeout
    while len(body) < length and time.monotonic() < deadline:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(head.split(b" ", 2)[1]), body


@pytest.mark.parametrize("agent", AGENTS)
def test_proposals_waiting_for_the_user_leave_the_connection_answering(front_factory, agent):
    """One client proposes 32 edits that wait for the user (the review
    limit), then asks something else: it is answered at once; the 33rd
    proposal is refused with the reason. (Claude's connection used to go
    deaf after 16 waiting openDiffs.)"""
    extra = {"review": {"edit_file": True}} if agent == "amp" else {}
    front = front_factory(agent, **extra)
    ed = front.ed
    client = front.connect()
    events = Events(client) if agent in HTTP else None
    paths = []
    for i in range(33):
        p = ed.env.workspace / f"f{i}.txt"
        p.write_text(f"old {i}\n")
        paths.append(p)
    pending = [propose(front, client, paths[i], f"new {i}\n", f"tab {i}") for i in range(32)]
    wait_proposals(ed, 32, timeout=20)
    started = time.monotonic()
    front.ping(client)
    assert time.monotonic() - started < 2, "the connection waited for the user"
    # The 33rd: refused, with the reason.
    if agent == "amp":
        reply = client.recv_response(propose(front, client, paths[32], "new\n", "tab 32"), timeout=10)
        assert reply["editFile"]["success"] is False and "32 reviews wait" in reply["editFile"]["message"], reply
    elif agent == "claude":
        rid = propose(front, client, paths[32], "new\n", "tab 32")
        reply = json.loads(client.ws.recv(timeout=10))
        while reply.get("id") != rid:
            reply = json.loads(client.ws.recv(timeout=10))
        assert "32 reviews wait" in json.dumps(reply), reply
    elif agent == "copilot":
        # An error: Copilot then asks the user in its own dialog.
        status, body = http_answer(propose(front, client, paths[32], "new\n", "tab 32"))
        reply = json.loads(body)
        assert status == 200 and "32 reviews wait" in reply["error"]["message"], reply
    elif agent == "mcp":
        answer = propose(front, client, paths[32], "new\n", "tab 32")
        reply = wait_for(lambda: answer.get("reply"), 10, "the 33rd proposal's answer")
        assert reply["result"]["isError"] is True, reply
        assert "32 reviews wait" in reply["result"]["content"][0]["text"], reply
    else:
        propose(front, client, paths[32], "new\n", "tab 32")
        rejected = events.wait("ide/diffRejected", lambda p: p["filePath"] == str(paths[32]))
        assert rejected["filePath"] == str(paths[32])
    assert len(pending) == 32
    assert [p.read_text() for p in paths] == [f"old {i}\n" for i in range(33)], "a file was written"


# ---------------------------------------------------------------- the registry


@pytest.mark.parametrize("agent", AGENTS)
def test_every_agent_is_registered_by_name_in_events_and_the_statusline(front_factory, agent):
    front = front_factory(agent)
    ed = front.ed
    ed.lua("""
        _G.seen = {}
        vim.api.nvim_create_autocmd('User', { pattern = { 'AmpClientConnected', 'AmpClientDisconnected' },
          callback = function(ev) table.insert(_G.seen, { ev.match, ev.data.agent, ev.data.name }) end })
    """)
    name = NAMES[agent]
    client = front.connect()
    stream = Events(client) if agent in HTTP else None
    wait_for(lambda: ed.lua("return require('amp').statusline()") == f"amp: 1 agent ({name})", 5,
             "the statusline to name the agent")
    assert front.status()["clients"] == 1
    assert ed.lua("return _G.seen") == [["AmpClientConnected", agent, name]]
    if stream:
        stream.close()
    else:
        client.close()
    wait_for(lambda: ed.lua("return require('amp').statusline()") == "amp", 6, "the agent to be gone")
    assert ed.lua("return _G.seen")[-1] == ["AmpClientDisconnected", agent, name]
    assert front.status()["clients"] == 0


@pytest.mark.parametrize("agent", AGENTS)
def test_a_disabled_agent_binds_nothing_writes_nothing_and_is_reported_off(nvim_factory, amp_env, agent):
    tmp = amp_env.root / "tmp"
    tmp.mkdir(exist_ok=True)
    on = {a: a != agent for a in AGENTS}
    ed = nvim_factory(agents=on, _wait=agent != "amp", _extra_env={"TMPDIR": str(tmp)})
    status = wait_for(lambda: ed.lua("return require('amp').status()"), 5, "the status")

    def where(a: dict):
        """Where an agent listens: its port, or its Unix socket (Copilot)."""
        return a.get("port") or a.get("socket")
    wait_for(lambda: all(where(ed.lua("return require('amp').status()")["agents"][a]) for a in AGENTS
                         if a != agent), 10, "the other agents")
    status = ed.lua("return require('amp').status()")
    assert status["agents"][agent] == {"enabled": False}, status["agents"][agent]
    dirs = {"amp": amp_env.lockfile_dir, "claude": amp_env.home / ".claude" / "ide",
            "gemini": tmp / "gemini" / "ide", "qwen": amp_env.home / ".qwen" / "ide",
            "mcp": amp_env.data_home / "amp" / "mcp", "copilot": amp_env.home / ".copilot" / "ide"}
    assert not dirs[agent].exists() or not any(dirs[agent].iterdir()), list(dirs[agent].iterdir())
    if agent == "amp":
        assert status.get("port") in (None, ) and status.get("lockfile") in (None, ), status
    ed.nvim.command("Amp status")
    line = ed.messages().splitlines()[-1]
    assert f"{agent} on :" not in line, line
    for other in AGENTS:
        if other != agent:
            port = status["agents"][other].get("port")
            shown = f":{port}" if port else status["agents"][other]["socket"]
            assert f"{other} on {shown}" in line, line
    # Nothing listens for it: every port the editor holds is another
    # agent's, and so is every Unix socket of ours (Copilot's).
    ports = {status["agents"][a]["port"] for a in AGENTS if a != agent and status["agents"][a].get("port")}
    assert listening_ports(ed.pid) == ports, (listening_ports(ed.pid), ports)
    sockets = {status["agents"][a]["socket"] for a in AGENTS if a != agent and status["agents"][a].get("socket")}
    ours = {p for p in listening_unix_paths(ed.pid) if "/amp-nvim-" in p}
    assert ours == sockets, (ours, sockets)


def listening_ports(pid: int) -> set[int]:
    """The TCP ports `pid` listens on (from /proc)."""
    inodes = socket_inodes(pid)
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                    ports.add(int(fields[1].split(":")[1], 16))
    return ports


def listening_unix_paths(pid: int) -> set[str]:
    """The paths of the Unix sockets `pid` listens on (from /proc)."""
    inodes = socket_inodes(pid)
    paths = set()
    with open("/proc/net/unix") as f:
        next(f)
        for line in f:
            fields = line.split()
            # Flags 00010000: __SO_ACCEPTCON, a listening socket.
            if len(fields) >= 8 and fields[3] == "00010000" and fields[6] in inodes:
                paths.add(fields[7])
    return paths
