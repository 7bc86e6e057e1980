"""A tap gateway for the tests, written from the Provider Interface v2
specification (../shared/seeds/tap-provider-interface.txt): the WebSocket
server Copilot CLI sessions share on ws://localhost:9400, here on a free
loopback port, with the parts an external provider meets:

- auth: pairing (`{type: auth, mode: pair}` -> `auth.pairing`; the 6-digit
  code is shown in the Copilot "timeline" (`Gateway.timeline`), never sent
  to the provider; `auth.confirm` -> `sessions` with a `token`, or
  AUTH_FAILED and close; 5 attempts a minute), then `{type: auth, token}`
  for reconnects (valid for the gateway's lifetime, lost on restart);
- the session registry: `sessions` after auth, `sessions.updated` when one
  starts or ends, `session.lifecycle: shutdown.pending` (deadline) to the
  providers bound to a session that ends, waiting for `shutdown.ready`;
- `hello` (protocolVersion 2 or UNSUPPORTED_VERSION and close; a session
  that exists or INVALID_SESSION; name+instance unique or
  DUPLICATE_INSTANCE unless a valid reconnectToken takes the identity
  over) -> `hello.ack` with providerId and a reconnectToken valid 30 s
  (the same providerId when it is used);
- tool.call / tool.result / tool.cancel with one terminal state per call;
  calls in flight at a disconnect fail with DISCONNECTED, never replayed;
- payload limits: 5 MB for tool.result, 2 MB for every other message
  (PAYLOAD_TOO_LARGE).

The gateway runs its own asyncio loop in a thread; the test drives it with
plain calls (`call`, `cancel`, `end_session`, `drop_connections`,
`restart`)."""

from __future__ import annotations

import asyncio
import hmac
import itertools
import json
import secrets
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

PROTOCOL_VERSION = 2
MAX_RESULT_BYTES = 5_000_000
MAX_OTHER_BYTES = 2_000_000
RECONNECT_TTL = 30.0
PAIRING_PER_MINUTE = 5
SHUTDOWN_DEADLINE_MS = 2000


@dataclass
class Session:
    id: str
    cwd: str
    label: str = ""
    foreground: bool = False

    def shown(self) -> dict:
        return {"id": self.id, "label": self.label, "cwd": self.cwd, "foreground": self.foreground}


@dataclass
class Provider:
    """One connection of a provider."""
    ws: object
    conn: int
    state: str = "AwaitAuth"  # AwaitAuth, AwaitPairing, AwaitHello, Bound, Unbound
    code: str | None = None
    name: str = ""
    instance: str = ""
    session: str | None = None
    provider_id: str = ""
    tools: list = field(default_factory=list)
    hello: dict | None = None
    calls: dict = field(default_factory=dict)  # call id -> Future


class Gateway:
    def __init__(self, port: int = 0):
        self.port = port
        self.sessions: dict[str, Session] = {}
        self.timeline: list[str] = []  # what the Copilot sessions show the user
        self.received: list[tuple[int, dict]] = []  # every provider message, parsed
        self.errors_sent: list[tuple[int, str]] = []
        self.late_results: list[dict] = []  # results after a call's terminal state
        self.connections = 0
        self._reset_state()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server = None
        self._run(self._start())

    def _reset_state(self) -> None:
        self.tokens: set[str] = set()
        # token -> (identity, providerId, valid until: None while its connection lasts)
        self.reconnect: dict[str, tuple[tuple[str, str], str, float | None]] = {}
        self.providers: dict[int, Provider] = {}
        self.pairing_attempts: list[float] = []
        self.shutdown_ready: list[str] = []
        self._ids = itertools.count(1)

    # --- driving it from the test thread -------------------------------------

    def _run(self, coro, timeout: float = 20):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def add_session(self, id: str, cwd: str, label: str = "", foreground: bool = False) -> None:
        self._run(self._add_session(Session(id, str(cwd), label or id, foreground)))

    def end_session(self, id: str) -> None:
        """The Copilot session ends: its providers get shutdown.pending and
        have the deadline to answer shutdown.ready."""
        self._run(self._end_session(id))

    def bound(self, session: str | None = None) -> list[Provider]:
        return [p for p in list(self.providers.values())
                if p.state == "Bound" and (session is None or p.session == session)]

    def wait_bound(self, session: str | None = None, timeout: float = 20) -> Provider:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.bound(session)
            if found:
                return found[0]
            time.sleep(0.05)
        raise AssertionError(f"no provider bound to {session!r} within {timeout} s; received: "
                             f"{[m.get('type') for _, m in self.received]}")

    def last_code(self) -> str:
        return self.timeline[-1].rsplit(" ", 1)[1]

    def call(self, tool: str, args: dict | None = None, session: str | None = None,
             provider: Provider | None = None, size: int | None = None) -> tuple[str, Future]:
        """Copilot calls `tool`: the call's id and a future of its terminal
        result. `size`: the tool.call message is padded (an unknown field,
        which receivers ignore) to exactly this many bytes."""
        provider = provider or self.wait_bound(session)
        return self._run(self._call(provider, tool, args or {}, size))

    def call_sync(self, tool: str, args: dict | None = None, timeout: float = 20, **kw) -> dict:
        _, fut = self.call(tool, args, **kw)
        return fut.result(timeout)

    def cancel(self, call_id: str, reason: str = "interrupted") -> None:
        self._run(self._cancel(call_id, reason))

    def send_raw(self, provider: Provider, text: str) -> None:
        self._run(provider.ws.send(text))

    def pause_reading(self, provider: Provider) -> None:
        """The gateway stops reading what `provider` sends (it still writes)."""
        self._loop.call_soon_threadsafe(provider.ws.transport.pause_reading)

    def drop_connections(self) -> None:
        """Every provider connection drops (the network, not the gateway):
        tokens and reconnect tokens stay valid."""
        self._run(self._drop())

    def restart(self) -> None:
        """The gateway process crashes and a new one starts on the same port:
        every token, binding and reconnect token is lost; sessions re-register."""
        sessions = list(self.sessions.values())
        self._run(self._stop())
        self._reset_state()
        self.sessions = {}
        self._run(self._start())
        for s in sessions:
            self.add_session(s.id, s.cwd, s.label, s.foreground)

    def stop(self) -> None:
        try:
            self._run(self._stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)

    def messages(self, type_: str) -> list[dict]:
        return [m for _, m in self.received if m.get("type") == type_]

    # --- the gateway ----------------------------------------------------------

    async def _start(self) -> None:
        self._server = await serve(self._handler, "127.0.0.1", self.port, max_size=MAX_RESULT_BYTES,
                                   ping_interval=None)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        if self._server is not None:
            for p in list(self.providers.values()):
                p.ws.transport.abort()
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _drop(self) -> None:
        for p in list(self.providers.values()):
            p.ws.transport.abort()

    async def _send(self, p: Provider, msg: dict) -> None:
        try:
            await p.ws.send(json.dumps(msg))
        except ConnectionClosed:
            pass

    async def _error(self, p: Provider, code: str, message: str, reply_to: str = "", close: bool = False) -> None:
        self.errors_sent.append((p.conn, code))
        msg = {"type": "error", "code": code, "message": message, "replyTo": reply_to}
        if p.provider_id:
            msg["providerId"] = p.provider_id
        if p.session:
            msg["sessionId"] = p.session
        await self._send(p, msg)
        if close:
            await p.ws.close(1008, code)

    def _session_list(self, token: str | None = None, type_: str = "sessions") -> dict:
        msg = {"type": type_, "active": [s.shown() for s in self.sessions.values()]}
        if token:
            msg["token"] = token
        return msg

    async def _broadcast_sessions(self) -> None:
        for p in list(self.providers.values()):
            if p.state not in ("AwaitAuth", "AwaitPairing"):
                await self._send(p, self._session_list(type_="sessions.updated"))

    async def _add_session(self, s: Session) -> None:
        self.sessions[s.id] = s
        await self._broadcast_sessions()

    async def _end_session(self, id: str) -> None:
        bound = [p for p in self.providers.values() if p.session == id and p.state == "Bound"]
        for p in bound:
            await self._send(p, {"type": "session.lifecycle", "sessionId": id, "state": "shutdown.pending",
                                 "deadline": SHUTDOWN_DEADLINE_MS})
        deadline = time.monotonic() + SHUTDOWN_DEADLINE_MS / 1000
        while time.monotonic() < deadline and not all(
                any(m.get("type") == "shutdown.ready" and m.get("sessionId") == id and c == p.conn
                    for c, m in self.received) for p in bound):
            await asyncio.sleep(0.02)
        for p in bound:
            p.state, p.session = "Unbound", None
            self._fail_calls(p, "DISCONNECTED", "the session ended")
        self.sessions.pop(id, None)
        await self._broadcast_sessions()

    def _fail_calls(self, p: Provider, code: str, why: str) -> None:
        for cid, fut in list(p.calls.items()):
            if not fut.done():
                fut.set_result({"type": "tool.result", "id": cid, "error": why, "errorCode": code})
        p.calls.clear()

    async def _call(self, p: Provider, tool: str, args: dict, size: int | None) -> tuple[str, Future]:
        cid = f"call-{secrets.token_hex(8)}"
        fut: Future = Future()
        p.calls[cid] = fut
        msg = {"type": "tool.call", "id": cid, "sessionId": p.session, "tool": tool, "args": args}
        if size is not None:
            msg["pad"] = ""
            msg["pad"] = "x" * (size - len(json.dumps(msg).encode()))
            assert len(json.dumps(msg).encode()) == size
        await self._send(p, msg)
        return cid, fut

    async def _cancel(self, cid: str, reason: str) -> None:
        for p in self.providers.values():
            if cid in p.calls:
                p.calls[cid].cancel_sent = True  # the next result must be CANCELLED
                await self._send(p, {"type": "tool.cancel", "id": cid, "sessionId": p.session, "reason": reason})

    async def _handler(self, ws) -> None:
        self.connections += 1
        p = Provider(ws=ws, conn=self.connections)
        self.providers[p.conn] = p
        try:
            async for raw in ws:
                await self._message(p, raw)
        except ConnectionClosed:
            pass
        finally:
            self.providers.pop(p.conn, None)
            token = getattr(p, "reconnect_token", None)
            if token in self.reconnect:  # valid for 30 s from now
                identity, pid, _ = self.reconnect[token]
                self.reconnect[token] = (identity, pid, time.monotonic() + RECONNECT_TTL)
            # In-flight calls fail; the identity may come back with its reconnectToken.
            self._fail_calls(p, "DISCONNECTED", "the provider disconnected")

    async def _message(self, p: Provider, raw) -> None:
        size = len(raw.encode() if isinstance(raw, str) else raw)
        try:
            msg = json.loads(raw)
        except ValueError:
            await self._error(p, "INVALID_JSON", "not JSON")
            return
        if not isinstance(msg, dict):
            await self._error(p, "INVALID_JSON", "not an object")
            return
        self.received.append((p.conn, msg))
        kind = msg.get("type")
        if kind != "tool.result" and size > MAX_OTHER_BYTES:
            await self._error(p, "PAYLOAD_TOO_LARGE", f"{size} bytes", kind or "")
            return
        if p.state == "AwaitAuth":
            if kind != "auth":
                await self._error(p, "UNAUTHORIZED", "authenticate first", kind or "", close=True)
            elif msg.get("mode") == "pair":
                now = time.monotonic()
                self.pairing_attempts = [t for t in self.pairing_attempts if now - t < 60]
                if len(self.pairing_attempts) >= PAIRING_PER_MINUTE:
                    await self._error(p, "RATE_LIMITED", "too many pairing attempts", "auth", close=True)
                    return
                self.pairing_attempts.append(now)
                p.code = f"{secrets.randbelow(1_000_000):06d}"
                p.state = "AwaitPairing"
                self.timeline.append(f"tap: Provider requesting access. Pairing code: {p.code}")
                await self._send(p, {"type": "auth.pairing",
                                     "prompt": "Enter the pairing code shown in your Copilot session"})
            elif isinstance(msg.get("token"), str) and any(
                    hmac.compare_digest(msg["token"], t) for t in self.tokens):
                p.state = "AwaitHello"
                await self._send(p, self._session_list())
            else:
                await self._error(p, "AUTH_FAILED", "unknown token", "auth", close=True)
            return
        if p.state == "AwaitPairing":
            code = msg.get("code")
            if kind == "auth.confirm" and isinstance(code, str) and hmac.compare_digest(code, p.code or ""):
                token = f"ext-tok-{secrets.token_hex(16)}"
                self.tokens.add(token)
                p.state = "AwaitHello"
                await self._send(p, self._session_list(token))
            else:
                await self._error(p, "AUTH_FAILED", "wrong pairing code", kind or "", close=True)
            return
        if kind == "hello":
            await self._hello(p, msg)
        elif kind == "tool.result":
            self._result(p, msg)
        elif kind in ("goodbye", "shutdown.ready", "tool.progress"):
            pass
        elif p.state != "Bound":
            await self._error(p, "UNAUTHORIZED", f"{kind} before hello", kind or "")
        else:
            await self._error(p, "UNKNOWN_TYPE", f"{kind}", kind or "")

    async def _hello(self, p: Provider, msg: dict) -> None:
        if msg.get("protocolVersion") != PROTOCOL_VERSION:
            await self._error(p, "UNSUPPORTED_VERSION", "this gateway speaks protocol 2", "hello", close=True)
            return
        session = msg.get("session")
        if session not in self.sessions:
            p.state = "Unbound"
            await self._error(p, "INVALID_SESSION", f"Session {session} does not exist", "hello")
            return
        identity = (str(msg.get("name")), str(msg.get("instance", "")))
        now = time.monotonic()
        token = msg.get("reconnectToken")
        known = self.reconnect.get(token) if isinstance(token, str) else None
        valid = known is not None and known[0] == identity and (known[2] is None or now < known[2])
        holders = [o for o in self.providers.values() if o is not p and (o.name, o.instance) == identity]
        if holders and not valid:
            await self._error(p, "DUPLICATE_INSTANCE", f"{identity} is connected", "hello")
            return
        for o in holders:  # the reconnect takes the identity over
            o.ws.transport.abort()
        if valid:
            del self.reconnect[token]
        # A rebind: the old binding's calls are cancelled first.
        self._fail_calls(p, "CANCELLED", "rebind")
        p.name, p.instance, p.session, p.tools, p.hello = identity[0], identity[1], session, msg.get("tools", []), msg
        p.provider_id = known[1] if valid else f"p-{next(self._ids)}-{secrets.token_hex(2)}"
        new_token = f"tok-{secrets.token_hex(12)}"
        self.reconnect[new_token] = (identity, p.provider_id, None)
        p.reconnect_token = new_token
        p.state = "Bound"
        await self._send(p, {"type": "hello.ack", "protocolVersion": PROTOCOL_VERSION, "providerId": p.provider_id,
                             "reconnectToken": new_token, "persistDir": f"/tmp/providers/{identity[0]}/"})

    def _result(self, p: Provider, msg: dict) -> None:
        fut = p.calls.get(msg.get("id"))
        if fut is None or fut.done():
            self.late_results.append(msg)
            return
        if getattr(fut, "cancel_sent", False) and msg.get("errorCode") != "CANCELLED":
            self.late_results.append(msg)
            return
        del p.calls[msg["id"]]
        fut.set_result(msg)
