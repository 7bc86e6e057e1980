"""Frame size, binary frames and client count limits; other clients survive."""

import json
import time

import pytest
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from conftest import wait_for

SMALL = 4096


@pytest.fixture
def small(nvim_factory):
    return nvim_factory(server={"max_frame_bytes": SMALL})


def _ping_text(size: int, id: str = "big") -> str:
    """A ping request whose serialized size is exactly ``size`` bytes."""
    base = json.dumps({"clientRequest": {"id": id, "ping": {"message": ""}}})
    return json.dumps({"clientRequest": {"id": id, "ping": {"message": "a" * (size - len(base))}}})


def test_message_under_limit_works(small):
    c = small.connect()
    text = _ping_text(SMALL - 100)
    assert len(text.encode()) == SMALL - 100
    c.send_text(text)
    resp = c.recv_response("big")
    assert resp["ping"] == json.loads(text)["clientRequest"]["ping"]


@pytest.mark.parametrize("compression", [None, "deflate"])
def test_oversized_message_closes_1009_others_unaffected(small, compression):
    bystander = small.connect()
    bystander.ping("before")
    c = small.connect(compression=compression)
    c.ping("ok first")
    c.send_text(_ping_text(SMALL * 4))
    code, _, frames = c.wait_closed(timeout=5)
    assert code == 1009, (code, frames)
    assert not any('"big"' in f for f in frames if isinstance(f, str)), "oversized request was answered"
    bystander.ping("after")
    small.connect().ping("new client after")


def test_oversized_fragmented_message_closes_1009(small):
    """The limit applies to the whole message, not to each frame."""
    c = small.connect(compression=None)
    c.ping("ok first")
    text = _ping_text(SMALL * 3)
    chunks = [text[i:i + 1000] for i in range(0, len(text), 1000)]
    try:
        c.ws.send(iter(chunks))
    except ConnectionClosed:
        pass
    code, _, frames = c.wait_closed(timeout=5)
    assert code == 1009, (code, frames)


def test_default_limit_allows_large_messages(nvim_factory, tmp_path):
    """Defaults are 64 MiB: a 2 MiB edit goes through."""
    ed = nvim_factory()
    c = ed.connect()
    p = ed.env.workspace / "big.txt"
    p.write_text("x\n")
    big = ("0123456789abcdef" * 64 + "\n") * 2000  # ~2 MiB
    r = c.call("editFile", {"path": str(p), "fullContent": big}, timeout=30)
    assert r.get("success") is True, r
    assert p.read_text() == big


def test_binary_frame_closes_1003_others_unaffected(editor):
    bystander = editor.connect()
    bystander.ping("before")
    c = editor.connect()
    c.ping("ok first")
    c.ws.send(json.dumps({"clientRequest": {"id": "bin", "ping": {"message": "b"}}}).encode())
    code, _, frames = c.wait_closed(timeout=5)
    assert code == 1003, (code, frames)
    bystander.ping("after")
    editor.connect().ping("new client after")


def test_errors_on_one_client_do_not_affect_another(editor):
    a = editor.connect()
    b = editor.connect()
    a.send_text("{garbage")
    assert a.recv_response(None)["error"]["code"] == -32700
    b.ping("b fine")
    a.ping("a fine")


def _extra_refused(ed) -> None:
    """The client above the limit is refused at the handshake or closed with 1013."""
    try:
        extra = ed.connect()
    except InvalidHandshake:
        return  # refused
    code, _, frames = extra.wait_closed(timeout=5)
    assert code == 1013, (code, frames)


def test_max_clients(nvim_factory):
    ed = nvim_factory(server={"max_clients": 2})
    a = ed.connect()
    b = ed.connect()
    a.ping("a")
    b.ping("b")
    _extra_refused(ed)
    a.ping("a still")
    b.ping("b still")
    # a slot frees up when a client leaves
    b.close()
    c = _connect_when_slot_free(ed)
    a.ping("a still 2")
    c.ping("c ok")


def _connect_when_slot_free(ed, timeout=5):
    def attempt():
        try:
            c = ed.connect()
        except InvalidHandshake:
            return False
        try:
            c.ping("slot?", timeout=3)
            return c
        except (ConnectionClosed, TimeoutError):
            c.close()
            return False

    return wait_for(attempt, timeout, "a free client slot", interval=0.2)


def test_unauthenticated_clients_do_not_keep_slots(nvim_factory):
    ed = nvim_factory(server={"max_clients": 1})
    for _ in range(3):
        bad = ed.connect(token="wrong")
        assert bad.wait_closed(timeout=5)[:2] == (1000, "Authentication failed")
    _connect_when_slot_free(ed).ping("slot was free")


def test_many_requests_burst(editor):
    """A burst of 500 pipelined requests is answered completely and in any order."""
    c = editor.connect()
    n = 500
    for i in range(n):
        c.send_request("ping", {"message": f"m{i}"}, id=f"b{i}")
    deadline = time.monotonic() + 30
    for i in range(n):
        resp = c.recv_response(f"b{i}", timeout=max(1, deadline - time.monotonic()))
        assert resp["ping"] == {"message": f"m{i}"}
