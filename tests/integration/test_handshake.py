"""Binding, authentication, Origin and Host checks on the WebSocket handshake."""

import pytest

from conftest import listening_addresses, open_client, raw_handshake


def test_binds_loopback_only(editor):
    port = editor.lock["port"]
    addrs = listening_addresses(port)
    assert addrs, f"no LISTEN socket found for port {port}"
    assert set(addrs) == {"127.0.0.1"}, addrs


def test_correct_token_works_localhost_and_127(editor):
    lock = editor.lock
    for host in ("localhost", "127.0.0.1"):
        c = open_client(lock["port"], lock["authToken"], host=host)
        try:
            c.ping(f"hello via {host}")
        finally:
            c.close()


def test_correct_token_without_compression(editor):
    lock = editor.lock
    c = open_client(lock["port"], lock["authToken"], compression=None)
    try:
        c.ping("plain")
    finally:
        c.close()


def _assert_auth_failed(client):
    code, reason, frames = client.wait_closed(timeout=5)
    assert (code, reason) == (1000, "Authentication failed")
    # nothing leaks to an unauthenticated client (notifications carry file paths)
    assert frames == []


def test_missing_token_closed_1000(editor):
    _assert_auth_failed(editor.connect(token=None))


def test_empty_token_closed_1000(editor):
    _assert_auth_failed(editor.connect(token=""))


@pytest.mark.parametrize("mutation", ["flip_last", "prefix", "suffix", "other"])
def test_wrong_token_closed_1000(editor, mutation):
    token = editor.lock["authToken"]
    wrong = {
        "flip_last": token[:-1] + ("A" if token[-1] != "A" else "B"),
        "prefix": token[:-1],
        "suffix": token + "x",
        "other": "z" * len(token),
    }[mutation]
    _assert_auth_failed(editor.connect(token=wrong))


def test_wrong_token_handshake_is_101(editor):
    """The upgrade completes (the CLI only shows its auth message on close 1000)."""
    port = editor.lock["port"]
    hs = raw_handshake(port, token="not-the-token")
    assert hs.status == 101, hs.status_line


def test_bad_client_does_not_disturb_good_client(editor):
    good = editor.connect()
    good.ping("before")
    _assert_auth_failed(editor.connect(token="nope"))
    good.ping("after")


@pytest.mark.parametrize("origin", ["http://evil.test", "https://localhost", "null",
                                    "vscode-webview://abc"])
def test_origin_header_refused_403(editor, origin):
    lock = editor.lock
    hs = raw_handshake(lock["port"], token=lock["authToken"], origin=origin)
    assert hs.status == 403, hs.status_line


def test_allowed_origin_accepted(nvim_factory):
    ed = nvim_factory(server={"allowed_origins": ["http://ok.test"]})
    lock = ed.lock
    hs = raw_handshake(lock["port"], token=lock["authToken"], origin="http://ok.test")
    assert hs.status == 101, hs.status_line
    hs = raw_handshake(lock["port"], token=lock["authToken"], origin="http://evil.test")
    assert hs.status == 403, hs.status_line
    c = ed.connect(origin="http://ok.test")
    c.ping("from an allowed origin")


@pytest.mark.parametrize("host", [
    "localhost:{port}", "127.0.0.1:{port}", "[::1]:{port}", "LOCALHOST:{port}",
])
def test_loopback_host_accepted(editor, host):
    lock = editor.lock
    hs = raw_handshake(lock["port"], token=lock["authToken"], host=host.format(port=lock["port"]))
    assert hs.status == 101, (host, hs.status_line)


@pytest.mark.parametrize("host", [
    "evil.test", "evil.test:{port}", "localhost.evil.test:{port}", "127.0.0.1.nip.io:{port}",
    "192.0.2.1:{port}", "[::2]:{port}", "0.0.0.0:{port}", "localhost@evil.test",
    # One policy for every front-end: a loopback name with the port the
    # client connected to (what every real client sends), never another
    # port or none (a request relayed from elsewhere).
    "localhost", "127.0.0.1", "[::1]", "localhost:1", "127.0.0.1:{other}",
])
def test_foreign_host_refused_403(editor, host):
    lock = editor.lock
    host = host.format(port=lock["port"], other=lock["port"] + 1)
    hs = raw_handshake(lock["port"], token=lock["authToken"], host=host)
    assert hs.status == 403, (host, hs.status_line)


def test_refused_handshakes_leave_server_working(editor):
    lock = editor.lock
    good = editor.connect()
    for _ in range(3):
        assert raw_handshake(lock["port"], token=lock["authToken"], origin="http://x.test").status == 403
        assert raw_handshake(lock["port"], token=lock["authToken"], host="evil.test").status == 403
    good.ping("still here")
    editor.connect().ping("new client")
