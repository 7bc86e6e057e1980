"""Resilience: bad input, faults, load and data safety, against a real headless
Neovim and real WebSocket / raw TCP clients.

Every test is bounded (PER_TEST_LIMIT, tighter than the harness's default) and
checks that OTHER clients keep being served after each misbehaviour.
Figures (flood order, load wall time, reads during saves) are printed: run
with ``-s`` to see them, or read them in the captured output of a failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import struct
import threading
import time
import urllib.parse

import pytest
from websockets.asyncio.client import connect as aconnect

from conftest import (lockfile_names_ok, tighter_time_bound, open_client, port_accepts, read_lockfiles,
                      wait_for)
from resilience_helpers import (OP_BINARY, OP_CLOSE, OP_CONT, OP_PING, OP_TEXT, RawWs, frame, log_tail, server_clients,
                                temp_siblings, wait_clients)

PER_TEST_LIMIT = 30.0
LIMIT = 65536  # server.max_frame_bytes for the bad-input tests


@pytest.fixture(autouse=True)
def _resilience_time_bound(_bounded_test_time):
    """Each test here must finish well under PER_TEST_LIMIT seconds."""
    with tighter_time_bound(PER_TEST_LIMIT, "resilience test"):
        yield


# --------------------------------------------------------------------------
# shared pieces
# --------------------------------------------------------------------------


@pytest.fixture
def srv(nvim_factory):
    return nvim_factory(server={"max_frame_bytes": LIMIT})


@pytest.fixture
def bystander(srv):
    c = srv.connect()
    c.ping("bystander ready")
    return c


def others_still_served(ed, bystander, what: str) -> None:
    """The bystander's ping is answered promptly and a new client gets in and is served."""
    t = time.monotonic()
    bystander.ping(f"after {what}", timeout=5)
    took = time.monotonic() - t
    assert took < 1.0, f"bystander ping took {took:.3f} s after {what}"
    fresh = ed.connect()
    fresh.ping(f"fresh client after {what}", timeout=5)
    fresh.close()
    assert ed.proc.poll() is None, f"nvim died after {what}: {ed.stderr()}"


def error_of(resp: dict) -> dict:
    err = resp.get("error")
    assert isinstance(err, dict), f"expected an error response, got {resp!r}"
    assert isinstance(err.get("code"), int), resp
    assert isinstance(err.get("message"), str) and err["message"], resp
    return err


def raw_client(ed) -> RawWs:
    lock = ed.lock
    return RawWs(lock["port"], lock["authToken"])


def raw_ping(rw: RawWs, id: str, timeout: float = 5.0) -> dict:
    """Sends a ping over the hand-made client and waits for its answer."""
    rw.send_text(json.dumps({"clientRequest": {"id": id, "ping": {"message": id}}}))
    deadline = time.monotonic() + timeout
    while True:
        _, op, payload = rw.recv_frame(max(0.01, deadline - time.monotonic()))
        if op != OP_TEXT:
            continue
        msg = json.loads(payload)
        inner = msg.get("serverResponse")
        if isinstance(inner, dict) and inner.get("id") == id:
            assert inner.get("ping") == {"message": id}, inner
            return inner


def texts_of(frames: list) -> list[str]:
    return [p.decode("utf-8", "replace") for op, p in frames if op == OP_TEXT]


def big_pair() -> tuple[str, str]:
    """Two ~2 MB texts of different lengths that share most lines."""
    a_lines = [f"{i:06d} " + "abcdefghij" * 9 for i in range(20_000)]
    b_lines = [(f"{i:06d} CHANGED " + "0123456789" * 8) if i % 50 == 0 else line
               for i, line in enumerate(a_lines)]
    b_lines += [f"{i:06d} appended by B " + "xyz" * 20 for i in range(1_000)]
    return "\n".join(a_lines) + "\n", "\n".join(b_lines) + "\n"


# --------------------------------------------------------------------------
# bad input: every frame gets an answer or a clean close, others keep working
# --------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    '{"clientRequest":',
    "{]",
    "not json at all",
    "",
    '{"clientRequest": {"id": "1", "ping": {}}} trailing',
    '{"clientRequest": {"id": "1", "ping": {"message": "\\ud800"}}}',  # lone surrogate escape
])
def test_malformed_json_32700_connection_stays_open(srv, bystander, text):
    c = srv.connect()
    c.send_text(text)
    resp = c.recv_response(None, timeout=5)
    assert error_of(resp)["code"] == -32700, resp
    c.ping("same connection still open", timeout=5)
    others_still_served(srv, bystander, f"malformed JSON {text!r}")


@pytest.mark.parametrize("payload", ["[]", "3", '"x"', "null", "true", "-0.5",
                                     '[{"clientRequest": {"id": "1", "ping": {}}}]'])
def test_json_not_an_object_32600(srv, bystander, payload):
    c = srv.connect()
    c.send_text(payload)
    resp = c.recv_response(None, timeout=5)
    assert error_of(resp)["code"] == -32600, resp
    c.ping("still open", timeout=5)
    others_still_served(srv, bystander, f"non-object {payload}")


@pytest.mark.parametrize("method, params", [
    ("readFile", {"path": 3}),
    ("readFile", {"path": None}),
    ("readFile", {"path": ["a"]}),
    ("editFile", {"path": "{file}", "start": "x", "end": 1, "newText": "Z"}),
    ("editFile", {"path": "{file}", "start": 0, "end": -1, "newText": "Z"}),
    ("editFile", {"path": "{file}", "start": 0, "end": 1, "newText": 7}),
    ("editFile", {"path": "{file}", "start": 1.5, "end": 2, "newText": "Z"}),
    ("editFile", {"path": "{file}", "fullContent": 5}),
    ("editFile", {"path": "{file}", "fullContent": None}),
    ("editFile", {"path": 3, "fullContent": "Z"}),
    ("editFile", {"path": "{file}"}),
    ("openURI", {"uri": []}),
    ("getDiagnostics", {"path": 12}),
    ("ping", []),
    ("readFile", "a string"),
])
def test_wrong_field_types_32602(srv, bystander, method, params):
    target = srv.env.workspace / "untouched.txt"
    target.write_bytes(b"do not touch\n")
    if isinstance(params, dict):
        params = {k: (str(target) if v == "{file}" else v) for k, v in params.items()}
    c = srv.connect()
    resp = c.request(method, params, id="typed", timeout=5)
    assert resp["id"] == "typed", resp
    assert error_of(resp)["code"] == -32602, resp
    assert target.read_bytes() == b"do not touch\n", "a rejected request changed the file"
    assert srv.buf_lines(target) in (None, ["do not touch"]), srv.buf_lines(target)
    c.ping("still open", timeout=5)
    others_still_served(srv, bystander, f"{method} {params!r}")


@pytest.mark.parametrize("envelope", [
    {"clientRequest": {"id": "u", "fooBar": {}}},
    {"clientRequest": {"id": "u", "PING": {"message": "x"}}},
    {"clientRequest": {"id": "u", "readfile": {"path": "/etc/hostname"}}},
    {"clientRequest": {"id": "u", "__proto__": {}}},
    {"clientRequest": {"id": "u", "constructor": {}}},
    {"clientRequest": {"id": "u", "": {}}},
    {"clientRequest": {"id": "u", "method": {"nope": {}}}},
    {"clientRequest": {"id": "u", "method": "shutdown", "params": {}}},
])
def test_unknown_methods_32601(srv, bystander, envelope):
    c = srv.connect()
    c.send_json(envelope)
    resp = c.recv_response("u", timeout=5)
    assert error_of(resp)["code"] == -32601, resp
    c.ping("still open", timeout=5)
    others_still_served(srv, bystander, f"unknown method {envelope!r}")


def _ping_of_size(size: int, id: str = "big") -> str:
    base = json.dumps({"clientRequest": {"id": id, "ping": {"message": ""}}})
    text = json.dumps({"clientRequest": {"id": id, "ping": {"message": "a" * (size - len(base))}}})
    assert len(text.encode()) == size
    return text


def test_frame_one_byte_over_limit_closes_1009(srv, bystander):
    c = srv.connect(compression=None)
    c.ping("first", timeout=5)
    c.send_text(_ping_of_size(LIMIT + 1))
    code, reason, frames = c.wait_closed(timeout=5)
    assert code == 1009, (code, reason, frames, log_tail(srv))
    assert not any('"big"' in f for f in frames if isinstance(f, str)), "oversized request was answered"
    wait_clients(srv, 1)
    others_still_served(srv, bystander, "a frame over max_frame_bytes")


def test_frame_announcing_a_terabyte_closes_1009_at_once(srv, bystander):
    """The length in the header alone is enough: nothing is allocated or awaited."""
    rw = raw_client(srv)
    raw_ping(rw, "raw-first")
    t = time.monotonic()
    rw.send_raw(frame(OP_TEXT, b'{"clientRequest"', declared_len=1 << 40))
    how, code, reason, frames = rw.read_until_close(timeout=5)
    took = time.monotonic() - t
    rw.close()
    assert (how, code) == ("close", 1009), (how, code, reason, texts_of(frames), log_tail(srv))
    assert took < 2.0, f"closing took {took:.2f} s"
    wait_clients(srv, 1)
    others_still_served(srv, bystander, "a frame announcing 1 TiB")


def test_binary_frame_closes_1003(srv, bystander):
    rw = raw_client(srv)
    raw_ping(rw, "raw-first")
    rw.send_frame(OP_BINARY, json.dumps({"clientRequest": {"id": "bin", "ping": {}}}).encode())
    how, code, reason, frames = rw.read_until_close(timeout=5)
    rw.close()
    assert (how, code) == ("close", 1003), (how, code, reason, texts_of(frames), log_tail(srv))
    assert not any('"bin"' in t for t in texts_of(frames)), "binary request was answered"
    wait_clients(srv, 1)
    others_still_served(srv, bystander, "a binary frame")


@pytest.mark.parametrize("hangup", ["fin", "reset"])
def test_truncated_frame_then_hangup(srv, bystander, hangup):
    """Header announcing 1000 bytes, 10 sent, then the socket is closed."""
    rw = raw_client(srv)
    raw_ping(rw, "raw-first")
    assert server_clients(srv) == 2
    payload = json.dumps({"clientRequest": {"id": "cut", "ping": {"message": "m" * 960}}}).encode()
    payload = payload[:1000].ljust(1000, b" ")
    whole = frame(OP_TEXT, payload)
    assert len(whole) == 2 + 2 + 4 + 1000
    rw.send_raw(whole[:8 + 10])  # header, mask key and the first 10 payload bytes
    time.sleep(0.1)
    if hangup == "reset":
        rw.abort()
    else:  # a clean FIN: no unread bytes left behind, so no RST
        rw.sock.shutdown(socket.SHUT_WR)
        assert rw.server_hung_up(5), "server kept a half-closed, half-framed connection open"
        rw.close()
    wait_clients(srv, 1)  # the half-read connection is released
    others_still_served(srv, bystander, f"a truncated frame and a {hangup}")


def test_truncated_frame_then_silence(nvim_factory):
    """A client stuck in the middle of a frame delays nobody and is dropped by the keepalive."""
    ed = nvim_factory(server={"ping_interval_ms": 200})
    by = ed.connect()
    by.ping("ready")
    rw = raw_client(ed)
    raw_ping(rw, "raw-first")
    whole = frame(OP_TEXT, b'{"clientRequest": {"id": "stuck", "ping": {}}}'.ljust(1000, b" "))
    rw.send_raw(whole[:8 + 10])
    latencies = []
    t_end = time.monotonic() + 1.5
    while time.monotonic() < t_end:
        t = time.monotonic()
        by.ping("while one client is stuck", timeout=5)
        latencies.append(time.monotonic() - t)
        time.sleep(0.05)
    assert max(latencies) < 1.0, latencies
    others_still_served(ed, by, "a truncated frame left hanging")
    # keepalive: 2 * 200 ms + 5 s of silence, then the connection is dropped
    how, code, reason, frames = rw.read_until_close(timeout=10)
    rw.close()
    assert how in ("close", "eof", "reset"), (how, code, reason)
    assert not any('"stuck"' in t for t in texts_of(frames)), "the half request was answered"
    wait_clients(ed, 1)
    by.ping("bystander outlived the stuck client", timeout=5)
    print(f"\nstuck client dropped ({how}, code {code}); bystander max ping {max(latencies) * 1000:.1f} ms")


@pytest.mark.parametrize("payload", [
    b"\xff\xfe",
    b'{"clientRequest": {"id": "u8", "ping": {"message": "\xff"}}}',
    b"\xc0\xaf",  # overlong '/'
    b"\xed\xa0\x80",  # a UTF-16 surrogate encoded in UTF-8
    b'{"clientRequest": {"id": "u8", "ping": {"message": "ok \xe2\x82"}}}',  # cut sequence
])
def test_invalid_utf8_text_frame_closes_1007(srv, bystander, payload):
    rw = raw_client(srv)
    raw_ping(rw, "raw-first")
    rw.send_frame(OP_TEXT, payload)  # masked, as clients must
    how, code, reason, frames = rw.read_until_close(timeout=5)
    rw.close()
    assert (how, code) == ("close", 1007), (how, code, reason, texts_of(frames), log_tail(srv))
    assert not any('"u8"' in t for t in texts_of(frames)), "an invalid UTF-8 request was answered"
    wait_clients(srv, 1)
    others_still_served(srv, bystander, f"invalid UTF-8 {payload[:20]!r}")


PROTOCOL_VIOLATIONS = {
    "unmasked client frame": frame(OP_TEXT, b'{"clientRequest": {"id": "pv", "ping": {}}}', masked=False),
    "continuation without a start": frame(OP_CONT, b'{"clientRequest": {"id": "pv", "ping": {}}}'),
    "reserved opcode 0x3": frame(0x3, b"abc"),
    "RSV1 without an extension": bytes([0xC1]) + frame(OP_TEXT, b"{}")[1:],
    "control frame over 125 bytes": frame(OP_PING, b"x" * 200),
    "fragmented control frame": frame(OP_PING, b"x", fin=False),
    "new text frame inside a fragmented message": frame(OP_TEXT, b'{"a":', fin=False) + frame(OP_TEXT, b"1}"),
    "close frame with a 1-byte body": frame(OP_CLOSE, b"\x03"),
    "close frame with code 999": frame(OP_CLOSE, struct.pack("!H", 999)),
}


@pytest.mark.parametrize("violation", list(PROTOCOL_VIOLATIONS))
def test_protocol_violation_closes_1002(srv, bystander, violation):
    """RFC 6455 §7.1.7: fail the connection, with a Close frame (1002) since it is established."""
    rw = raw_client(srv)
    raw_ping(rw, "raw-first")
    rw.send_raw(PROTOCOL_VIOLATIONS[violation])
    how, code, reason, frames = rw.read_until_close(timeout=5)
    rw.close()
    wait_clients(srv, 1)
    others_still_served(srv, bystander, violation)
    assert not any('"pv"' in t for t in texts_of(frames)), "a request in a broken frame was answered"
    assert (how, code) == ("close", 1002), (
        f"{violation}: expected a Close frame 1002, got {how} {code} {reason!r}; log:\n{log_tail(srv, 4)}")


@pytest.mark.parametrize("body", [
    pytest.param(struct.pack("!H", 1000) + b"bye", id="1000-bye"),
    pytest.param(struct.pack("!H", 1001), id="1001"),
    pytest.param(b"", id="no-body"),
])
def test_client_close_handshake_is_answered(srv, bystander, body):
    """RFC 6455 §5.5.1: a Close frame must be answered with a Close frame (else the
    client sees 1006, an abnormal closure, for every normal disconnect)."""
    rw = raw_client(srv)
    raw_ping(rw, "raw-first")
    rw.send_frame(OP_CLOSE, body)
    how, code, reason, frames = rw.read_until_close(timeout=5)
    rw.close()
    wait_clients(srv, 1)
    others_still_served(srv, bystander, f"a client close {body!r}")
    expected = struct.unpack("!H", body[:2])[0] if body else None
    assert how == "close", f"the server hung up ({how}) without answering the client's Close {body!r}"
    if expected is not None:
        assert code == expected, (code, reason)


def test_request_flood_all_answered_others_stay_fast(editor):
    by = editor.connect()
    by.ping("ready")
    flood = editor.connect(compression=None)
    n = 5000
    ids = [f"flood-{i}" for i in range(n)]
    latencies: list[tuple[float, float]] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def probe():
        i = 0
        while not stop.is_set():
            t = time.monotonic()
            try:
                by.ping(f"probe {i}", timeout=5)
            except BaseException as e:  # reported by the main thread
                errors.append(e)
                return
            latencies.append((t, time.monotonic() - t))
            i += 1
            time.sleep(0.005)

    th = threading.Thread(target=probe, name="bystander-probe", daemon=True)
    th.start()
    t0 = time.monotonic()
    for id in ids:  # nothing is read while sending
        flood.send_json({"clientRequest": {"id": id, "ping": {"message": id}}})
    t_sent = time.monotonic()
    got = []
    while len(got) < n:
        msg = flood.recv_message(timeout=10)
        if "serverResponse" in msg:
            got.append(msg["serverResponse"])
    t_done = time.monotonic()
    time.sleep(0.05)
    stop.set()
    th.join(10)
    assert not errors, f"bystander failed during the flood: {errors[0]!r}"
    got_ids = [r["id"] for r in got]
    assert len(set(got_ids)) == n, f"{n - len(set(got_ids))} duplicate answers"
    assert set(got_ids) == set(ids), f"missing: {sorted(set(ids) - set(got_ids))[:10]}"
    bad = [r for r in got if r.get("ping") != {"message": r["id"]}]
    assert not bad, bad[:5]
    during = [lat for t, lat in latencies if t0 <= t <= t_done]
    assert len(during) >= 3, f"only {len(during)} bystander pings overlapped the flood"
    worst = max(lat for _, lat in latencies)
    assert worst < 1.0, f"bystander ping took {worst:.3f} s during the flood"
    in_order = got_ids == ids
    inversions = sum(1 for a, b in zip(got_ids, got_ids[1:]) if int(a[6:]) > int(b[6:]))
    flood.ping("after the flood", timeout=5)
    print(f"\nflood: {n} pings sent in {t_sent - t0:.3f} s, all answered after {t_done - t0:.3f} s; "
          f"in order: {in_order} ({inversions} inversions); bystander pings during flood: "
          f"{len(during)}, worst {worst * 1000:.1f} ms")


# --------------------------------------------------------------------------
# faults
# --------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["whole-frame-then-reset", "half-frame-then-reset", "whole-frame-then-fin",
                                 "reset-while-saving"])
def test_client_killed_mid_edit(editor, how):
    ed = editor
    by = ed.connect()
    by.ping("ready")
    p = ed.env.workspace / "victim.txt"
    old = "".join(f"old line {i:06d} {'o' * 60}\n" for i in range(15_000))  # ~1 MB
    new = "".join(f"new line {i:06d} {'n' * 80}\n" for i in range(22_000))  # ~2 MB
    p.write_text(old)
    rw = raw_client(ed)
    raw_ping(rw, "raw-first")
    req = json.dumps({"clientRequest": {"id": "kill", "editFile": {"path": str(p), "fullContent": new}}})
    data = frame(OP_TEXT, req.encode())
    ino = os.stat(p).st_ino
    if how.startswith("half"):
        rw.send_raw(data[: len(data) // 2])
    else:
        rw.send_raw(data)
    if how == "reset-while-saving":
        # the server has the request and is writing the file when the client dies
        wait_for(lambda: temp_siblings(p) or os.stat(p).st_ino != ino, 10, "the save to start", interval=0)
    if how.endswith("reset") or how == "reset-while-saving":
        rw.abort()
    else:  # a clean FIN right after the request
        rw.sock.shutdown(socket.SHUT_WR)
        rw.server_hung_up(5)
        rw.close()
    wait_clients(ed, 1, timeout=10)
    # Whatever happens to the request, the file is only ever the old or the new text.
    observed = set()
    t_end = time.monotonic() + 1.5
    while time.monotonic() < t_end:
        disk = p.read_text()
        assert disk in (old, new), f"file is neither old nor new: {len(disk)} bytes"
        observed.add("new" if disk == new else "old")
        time.sleep(0.01)
    disk = p.read_text()
    assert disk in (old, new)
    if how.startswith("half"):
        assert disk == old, "an incomplete request changed the file"
    if how == "reset-while-saving":
        assert disk == new, "a save in progress was abandoned when its client died"
    assert temp_siblings(p) == [], "a temp file was left behind"
    lines = ed.buf_lines(p)
    if lines is not None:
        assert lines == disk.splitlines(), "buffer and disk disagree after the client died"
        assert ed.nvim.eval(f"getbufvar({ed.bufnr(p)}, '&modified')") == 0
    others_still_served(ed, by, f"a client killed mid-edit ({how})")
    print(f"\nclient killed mid-edit ({how}): file ended {'new' if disk == new else 'old'}; "
          f"observed {sorted(observed)}; buffer loaded: {lines is not None}")


def test_sigkill_leaves_lockfile_next_start_replaces_it(nvim_factory, amp_env):
    a = nvim_factory()
    pa, la = a.wait_lockfile()
    a.connect().ping("alive")
    os.kill(a.pid, signal.SIGKILL)
    assert a.proc.wait(timeout=5) == -signal.SIGKILL
    # nothing ran at exit: the lockfile is still there, unchanged, and the port is dead
    assert pa.exists(), "lockfile vanished although nvim was killed"
    assert json.loads(pa.read_text()) == la
    assert not port_accepts(la["port"])
    b = nvim_factory()  # same XDG_DATA_HOME
    pb, lb = b.wait_lockfile()
    assert lb["pid"] == b.pid and lb["authToken"] != la["authToken"]
    wait_for(lambda: all(d.get("pid") != a.pid for d in read_lockfiles(amp_env.lockfile_dir).values()),
             5, "the dead nvim's lockfile to be removed")
    assert (not pa.exists()) or pa == pb, "stale lockfile kept"
    assert list(read_lockfiles(amp_env.lockfile_dir)) == [pb]
    assert lockfile_names_ok(amp_env.lockfile_dir) == []
    b.connect().ping("the new nvim answers")
    print(f"\nkilled pid {a.pid} port {la['port']}; new pid {b.pid} port {lb['port']}")


def test_two_instances_in_one_folder(nvim_factory, amp_env):
    a = nvim_factory()
    b = nvim_factory()
    pa, la = a.wait_lockfile()
    pb, lb = b.wait_lockfile()
    assert pa != pb and la["port"] != lb["port"], (la, lb)
    assert la["authToken"] != lb["authToken"]
    assert la["workspaceFolders"] == lb["workspaceFolders"] == [str(amp_env.workspace)]
    assert set(read_lockfiles(amp_env.lockfile_dir)) == {pa, pb}
    ca, cb = a.connect(), b.connect()
    ca.ping("a")
    cb.ping("b")
    for port, token in ((lb["port"], la["authToken"]), (la["port"], lb["authToken"])):
        x = open_client(port, token)
        code, reason, frames = x.wait_closed(timeout=5)
        x.close()
        assert (code, reason) == (1000, "Authentication failed"), (port, code, reason, frames)
        assert not any("serverResponse" in f or "pluginMetadata" in f for f in frames if isinstance(f, str)), frames
    ca.ping("a still")
    cb.ping("b still")
    assert server_clients(a) == 1 and server_clients(b) == 1


# --------------------------------------------------------------------------
# load
# --------------------------------------------------------------------------


def test_load_50_clients_x_1000_pings(nvim_factory):
    clients, per_client = 50, 1000
    ed = nvim_factory(server={"max_clients": 64})
    lock = ed.lock
    url = f"ws://localhost:{lock['port']}/?auth={urllib.parse.quote(lock['authToken'], safe='')}"

    async def one(c: int) -> list[dict]:
        async with aconnect(url, compression=None, proxy=None, ping_interval=None,
                            max_size=None, open_timeout=10, close_timeout=2) as ws:
            ids = [f"c{c}-{i}" for i in range(per_client)]
            got: list[dict] = []

            async def sender():
                for id in ids:
                    await ws.send(json.dumps({"clientRequest": {"id": id, "ping": {"message": id}}}))

            async def receiver():
                while len(got) < per_client:
                    msg = json.loads(await asyncio.wait_for(ws.recv(), 20))
                    if "serverResponse" in msg:
                        got.append(msg["serverResponse"])

            await asyncio.gather(sender(), receiver())
            return got

    async def run():
        return await asyncio.wait_for(asyncio.gather(*(one(c) for c in range(clients))), 25)

    t0 = time.monotonic()
    results = asyncio.run(run())
    wall = time.monotonic() - t0
    total = 0
    for c, got in enumerate(results):
        ids = [r["id"] for r in got]
        want = {f"c{c}-{i}" for i in range(per_client)}
        assert len(ids) == per_client and len(set(ids)) == per_client, f"client {c}: duplicates"
        assert set(ids) == want, f"client {c}: lost {sorted(want - set(ids))[:5]}, foreign {sorted(set(ids) - want)[:5]}"
        assert all(r.get("ping") == {"message": r["id"]} for r in got), f"client {c}: wrong echo"
        total += len(ids)
    assert total == clients * per_client
    print(f"\nload: {clients} clients x {per_client} pings = {total} requests in {wall:.2f} s "
          f"({total / wall:,.0f} req/s)")
    assert wall < 25, f"load took {wall:.1f} s"
    wait_clients(ed, 0)
    ed.connect().ping("after the load")


# --------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------


def test_edit_with_unsaved_user_change_elsewhere(editor):
    ed = editor
    c = ed.connect()
    p = ed.env.workspace / "shared é.txt"
    p.write_text("".join(f"line {i} é\n" for i in range(10)))
    ed.edit(p)
    ed.nvim.current.buffer[7] = "USER unsaved ✓"
    assert ed.nvim.eval("&modified") == 1
    content = c.call("readFile", {"path": str(p)})["content"]
    assert "USER unsaved ✓\n" in content and "line 7 é" not in content, content

    # a range edit computed (in bytes) against readFile's current text
    raw = content.encode()
    start = raw.index("line 2 é".encode())
    end = start + len("line 2 é".encode())
    r = c.call("editFile", {"path": str(p), "start": start, "end": end, "newText": "AGENT ✓"})
    assert r.get("success") is True, r
    expected = content.replace("line 2 é", "AGENT ✓")
    assert ed.buf_lines(p) == expected.splitlines(), ed.buf_lines(p)
    assert "USER unsaved ✓" in ed.buf_lines(p), "the user's unsaved change was lost"
    assert p.read_text() == expected, "disk differs from the buffer after a range edit"
    assert ed.nvim.eval(f"getbufvar({ed.bufnr(p)}, '&modified')") == 0

    # the user types again; a fullContent edit based on readFile
    ed.nvim.current.buffer[8] = "USER again ✓"
    content = c.call("readFile", {"path": str(p)})["content"]
    assert "USER again ✓\n" in content, content
    full = content.replace("line 5 é", "FULL ✓")
    r = c.call("editFile", {"path": str(p), "fullContent": full})
    assert r.get("success") is True, r
    assert ed.buf_lines(p) == full.splitlines()
    assert p.read_text() == full, "disk differs from the buffer after a fullContent edit"
    assert ed.nvim.eval(f"getbufvar({ed.bufnr(p)}, '&modified')") == 0


def test_save_is_atomic_reader_sees_old_or_new(editor):
    ed = editor
    A, B = big_pair()
    a_bytes, b_bytes = A.encode(), B.encode()
    p = ed.env.workspace / "atomic.txt"
    p.write_bytes(a_bytes)
    c = ed.connect(compression=None)
    stop = threading.Event()
    stats = {"reads": 0, "A": 0, "B": 0}
    bad: list[str] = []

    def reader():
        while not stop.is_set():
            try:
                data = p.read_bytes()
            except FileNotFoundError:
                bad.append("target missing")
                continue
            stats["reads"] += 1
            if data == a_bytes:
                stats["A"] += 1
            elif data == b_bytes:
                stats["B"] += 1
            else:
                common = next((i for i, (x, y) in enumerate(zip(data, b_bytes)) if x != y), min(len(data), len(b_bytes)))
                bad.append(f"{len(data)} bytes (A {len(a_bytes)}, B {len(b_bytes)}), differs from B at {common}")

    th = threading.Thread(target=reader, name="disk-reader", daemon=True)
    th.start()
    edits, t0 = 0, time.monotonic()
    try:
        while (edits < 16 or stats["reads"] < 200) and time.monotonic() - t0 < 15:
            text = B if edits % 2 == 0 else A
            r = c.call("editFile", {"path": str(p), "fullContent": text}, timeout=20)
            assert r.get("success") is True, r
            edits += 1
    finally:
        stop.set()
        th.join(10)
    took = time.monotonic() - t0
    assert not bad, f"{len(bad)} bad reads of {stats['reads']}: {bad[:5]}"
    assert stats["reads"] >= 200, stats
    assert edits >= 16, edits
    assert stats["A"] > 0 and stats["B"] > 0, stats
    assert temp_siblings(p) == [], "temp files left after successful saves"
    print(f"\natomic saves: {edits} edits of ~2 MB in {took:.2f} s ({took / edits * 1000:.0f} ms each); "
          f"{stats['reads']} disk reads, A {stats['A']}, B {stats['B']}, bad 0")


@pytest.mark.parametrize("moment", ["temp-file-appears", "right-after-send", "after-40ms"])
def test_sigkill_during_save_leaves_old_or_new(nvim_factory, moment):
    A, B = big_pair()
    a_bytes, b_bytes = A.encode(), B.encode()
    killed_during_write = None
    for attempt in range(5):
        ed = nvim_factory()
        p = ed.env.workspace / f"precious-{attempt}.txt"
        p.write_bytes(a_bytes)
        ino = os.stat(p).st_ino
        c = ed.connect(compression=None)
        c.ping("ready")
        c.send_request("editFile", {"path": str(p), "fullContent": B})
        if moment == "temp-file-appears":
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if temp_siblings(p):
                    os.kill(ed.pid, signal.SIGKILL)
                    killed_during_write = True
                    break
                if os.stat(p).st_ino != ino:  # the save finished before we saw it
                    killed_during_write = False
                    break
            else:
                raise AssertionError(f"no save started within 10 s; log:\n{log_tail(ed)}")
            if not killed_during_write:
                os.kill(ed.pid, signal.SIGKILL)
        elif moment == "right-after-send":
            os.kill(ed.pid, signal.SIGKILL)
        else:
            time.sleep(0.04)
            os.kill(ed.pid, signal.SIGKILL)
        assert ed.proc.wait(timeout=5) == -signal.SIGKILL
        data = p.read_bytes()
        assert data in (a_bytes, b_bytes), (f"after SIGKILL ({moment}) the file is neither old nor new: "
                                            f"{len(data)} bytes")
        assert p.is_file() and not p.is_symlink()
        leftovers = temp_siblings(p)
        others = sorted(set(os.listdir(p.parent)) - set(leftovers) - {p.name})
        assert others == [f"precious-{i}.txt" for i in range(attempt)], f"unexpected files beside it: {others}"
        print(f"\nSIGKILL {moment} (attempt {attempt}): file is {'new' if data == b_bytes else 'old'}; "
              f"temp files left beside it: {leftovers}")
        if leftovers:
            # The next save to the file, by another Neovim, removes the dead writer's temp file.
            later = nvim_factory()
            r = later.connect().call("editFile", {"path": str(p), "fullContent": A}, timeout=20)
            assert r.get("success") is True, r
            assert p.read_bytes() == a_bytes
            assert temp_siblings(p) == [], "the temp file of a killed Neovim was left behind"
            # the killed Neovim's swap file for the buffer it loaded is reported, not fatal
            assert "has a swap file" in later.messages(), later.messages()
        if moment != "temp-file-appears" or killed_during_write:
            break
    if moment == "temp-file-appears":
        assert killed_during_write, "never managed to kill nvim while a temp file existed (timing)"
