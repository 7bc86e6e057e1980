"""readFile and editFile against real buffers and real files."""

import base64
import hashlib
import json
import os
import shutil
import socket
import stat
import struct
import subprocess
import time

import pytest

from conftest import REPO


@pytest.fixture
def ed(nvim_factory, env_factory):
    env = env_factory("proj ✓ é")
    return nvim_factory(_env=env)


@pytest.fixture
def c(ed):
    return ed.connect()


def make(ed, rel, data: bytes, mode=None):
    p = ed.env.workspace / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    if mode is not None:
        os.chmod(p, mode)
    return p


def ok_read(result, content):
    assert result.get("success") is True, result
    assert result.get("content") == content, result
    assert result.get("encoding") == "utf-8", result


def ok_edit(result):
    assert result.get("success") is True, result
    assert result.get("appliedChanges") is True, result
    assert isinstance(result.get("message"), str), result


def failed(result):
    assert result.get("success") is False, result
    assert isinstance(result.get("message"), str) and result["message"], result


# ---------------------------------------------------------------- readFile


def test_read_from_disk(ed, c):
    p = make(ed, "dé mo ✓ file.txt", "line1\nlïne2 😀\n".encode())
    ok_read(c.call("readFile", {"path": str(p)}), "line1\nlïne2 😀\n")


def test_read_quick_reference_dialect(ed, c):
    p = make(ed, "qr.txt", b"# Amp\n")
    resp = c.request_qr("readFile", {"path": str(p)})
    assert "error" not in resp, resp
    ok_read(resp["result"], "# Amp\n")


def test_read_exact_bytes_without_final_newline(ed, c):
    p = make(ed, "nonl.txt", b"no newline at end")
    ok_read(c.call("readFile", {"path": str(p)}), "no newline at end")


def test_read_relative_path_resolves_against_workspace(ed, c):
    make(ed, "sub dir/rel é.txt", b"relative\n")
    ok_read(c.call("readFile", {"path": "sub dir/rel é.txt"}), "relative\n")


def test_read_returns_unsaved_buffer_text(ed, c):
    p = make(ed, "unsaved.txt", b"on disk\n")
    ed.edit(p)
    ed.nvim.current.buffer[:] = ["alpha", "beta ✓"]
    ok_read(c.call("readFile", {"path": str(p)}), "alpha\nbeta ✓\n")
    # reading does not save
    assert p.read_bytes() == b"on disk\n"
    assert ed.nvim.current.buffer.options["modified"] is True


def test_read_buffer_open_in_background(ed, c):
    p = make(ed, "bg.txt", b"disk\n")
    ed.edit(p)
    ed.nvim.current.buffer[:] = ["buffer text"]
    ed.nvim.command("set hidden")
    ed.nvim.command("enew")  # p stays loaded (hidden) with its unsaved change
    ok_read(c.call("readFile", {"path": str(p)}), "buffer text\n")


def test_read_crlf_buffer_gives_crlf(ed, c):
    p = make(ed, "dos ✓.txt", b"a\r\nb\r\n")
    ed.edit(p)
    assert ed.nvim.current.buffer.options["fileformat"] == "dos"
    ed.nvim.current.buffer[1] = "c"
    ok_read(c.call("readFile", {"path": str(p)}), "a\r\nc\r\n")


def test_read_missing_file(ed, c):
    failed(c.call("readFile", {"path": str(ed.env.workspace / "nope ✗.txt")}))


def test_unloaded_files_are_read_while_neovim_waits_at_a_hit_enter_prompt(ed, c):
    """At a hit-enter prompt Neovim runs no scheduled callbacks: a file no
    buffer has loaded is read from disk without waiting for it; a loaded
    buffer's text comes once the prompt is dismissed."""
    on_disk = make(ed, "not-loaded.txt", "from disk\n".encode())
    opened = make(ed, "opened.txt", b"saved\n")
    ed.edit(opened)
    ed.nvim.current.buffer[:] = ["unsaved"]
    ed.nvim.ui_attach(80, 24, rgb=True)  # a UI, so messages can ask for Enter
    try:
        ed.nvim.command("set cmdheight=1")
        ed.nvim.command('echo "one\\ntwo\\nthree"', async_=True)  # it waits for Enter: do not wait for it
        deadline = time.monotonic() + 5
        while ed.nvim.api.get_mode()["mode"] != "r":  # nvim_get_mode answers even now
            assert time.monotonic() < deadline, "no hit-enter prompt"
            time.sleep(0.02)
        ok_read(c.call("readFile", {"path": str(on_disk)}, timeout=2), "from disk\n")
        waiting = c.send_request("readFile", {"path": str(opened)})
        with pytest.raises(TimeoutError):
            c.recv_response(waiting, timeout=0.5)
        assert ed.nvim.api.get_mode()["mode"] == "r"
        ed.nvim.input("<CR>")  # the user dismisses the prompt
        ok_read(c.recv_response(waiting, timeout=5)["readFile"], "unsaved\n")
    finally:
        ed.nvim.ui_detach()


# ------------------------------------------------- big answers, in fragments

# Every byte that JSON must escape, quotes, backslashes, tabs, CRs inside a
# line, and 2-, 3- and 4-byte characters, on lines of varying length.
BIG_LINE = 'x = "é→😀\\t" \\ \x01\x1f\r\t {i} ' 


def big_unsaved_buffer(ed, approx_bytes):
    """A loaded buffer with unsaved text of about `approx_bytes`; returns its
    path and the text readFile must answer."""
    p = make(ed, "big.txt", b"on disk\n")
    ed.edit(p)
    lines = [(BIG_LINE.format(i=i) * (1 + i % 5)) for i in range(approx_bytes // 120)]
    ed.nvim.current.buffer[:] = lines
    assert ed.lua("return vim.bo.modified")
    return p, "\n".join(lines) + "\n"


def raw_read_file_frames(port, token, path):
    """readFile over a hand-made WebSocket connection; returns the frames
    (opcode, fin, payload) of the response message, in order."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    try:
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall((f"GET /?auth={token} HTTP/1.1\r\nHost: localhost:{port}\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += sock.recv(65536)
        head, buf = buf.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head
        payload = json.dumps({"clientRequest": {"id": "big", "readFile": {"path": str(path)}}}).encode()
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        sock.sendall(bytes([0x81, 0x80 | 126]) + struct.pack(">H", len(payload)) + mask + masked)
        frames, in_response = [], False
        while True:
            while len(buf) >= 2:
                b0, n, off = buf[0], buf[1] & 0x7F, 2
                if n == 126:
                    n, off = struct.unpack(">H", buf[2:4])[0], 4
                elif n == 127:
                    n, off = struct.unpack(">Q", buf[2:10])[0], 10
                if len(buf) < off + n:
                    break
                frame, buf = (b0 & 0x0F, bool(b0 & 0x80), buf[off:off + n]), buf[off + n:]
                if frame[0] == 0x1:
                    in_response = frame[2].startswith(b'{"serverResponse"')
                if in_response and frame[0] in (0x0, 0x1):
                    frames.append(frame)
                    if frame[1]:
                        return frames
            chunk = sock.recv(1 << 20)
            assert chunk, "the server closed the connection"
            buf += chunk
    finally:
        sock.close()


def test_big_read_is_one_message_in_fragments_cut_between_characters(ed, c):
    p, text = big_unsaved_buffer(ed, 3 * 1024 * 1024)
    ok_read(c.call("readFile", {"path": str(p)}, timeout=20), text)  # a library client
    lock = ed.lock
    frames = raw_read_file_frames(lock["port"], lock["authToken"], p)
    assert len(frames) > 10, "a 3 MB answer should arrive in fragments"
    assert frames[0][0] == 0x1 and all(op == 0x0 for op, _, _ in frames[1:]), [f[:2] for f in frames[:3]]
    assert [fin for _, fin, _ in frames] == [False] * (len(frames) - 1) + [True]
    for _, _, payload in frames:
        payload.decode("utf-8")  # each fragment is whole characters
    body = json.loads(b"".join(f[2] for f in frames))
    ok_read(body["serverResponse"]["readFile"], text)
    # the connection goes on serving
    c.ping()


def test_small_answers_stay_single_frames(ed):
    p = make(ed, "small.txt", ("é→😀 " * 1000).encode())
    lock = ed.lock
    frames = raw_read_file_frames(lock["port"], lock["authToken"], p)
    assert [(op, fin) for op, fin, _ in frames] == [(0x1, True)]


def test_big_read_with_a_node_ws_client(ed):
    """The `ws` library (Node agents such as the Amp CLI) gets the whole text."""
    client = REPO / "tests" / "fixtures" / "ws-client"
    if not (client / "node_modules" / "ws").exists():
        pytest.fail("tests/fixtures/ws-client/node_modules is missing: run `npm ci --prefix tests/fixtures/ws-client`",
                    pytrace=False)
    node = shutil.which("node")
    assert node, "node is required"
    p, text = big_unsaved_buffer(ed, 5 * 1024 * 1024)
    lock = ed.lock
    out = subprocess.run([node, str(client / "read-file.mjs"), str(lock["port"]), lock["authToken"], str(p)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    want = text.encode("utf-8")
    assert got == {"binary": False, "success": True, "bytes": len(want), "sha256": hashlib.sha256(want).hexdigest()}


# ---------------------------------------------------------------- editFile


def _undo_in(ed, path):
    bufnr = ed.bufnr(path)
    assert bufnr > 0, f"no buffer for {path}"
    ed.nvim.command(f"buffer {bufnr}")
    ed.nvim.command("undo")
    return ed.nvim.current.buffer[:]


def test_edit_full_content_file_not_open(ed, c):
    p = make(ed, "dé mo.txt", b"one\ntwo\nthree\n")
    new = "ONE\ntwo\nTHREE ✓\n"
    ok_edit(c.call("editFile", {"path": str(p), "fullContent": new}))
    assert p.read_bytes() == new.encode()
    assert ed.buf_lines(p) == ["ONE", "two", "THREE ✓"]
    # ONE undo step restores the previous text
    assert _undo_in(ed, p) == ["one", "two", "three"]


def test_edit_full_content_open_buffer_with_unsaved_changes(ed, c):
    p = make(ed, "open ✓.txt", b"a\n")
    ed.edit(p)
    ed.nvim.current.buffer[:] = ["x", "y", "z"]
    ok_edit(c.call("editFile", {"path": str(p), "fullContent": "new1\ny\nnew3\n"}))
    assert ed.buf_lines(p) == ["new1", "y", "new3"]
    assert p.read_bytes() == b"new1\ny\nnew3\n"
    assert _undo_in(ed, p) == ["x", "y", "z"]


def test_edit_range_on_disk_file_byte_offsets(ed, c):
    p = make(ed, "range é.txt", "hello wörld\n".encode())
    # "hello " is 6 bytes, "wörld" is 6 bytes
    ok_edit(c.call("editFile", {"path": str(p), "start": 6, "end": 12, "newText": "thére"}))
    assert p.read_bytes() == "hello thére\n".encode()
    assert ed.buf_lines(p) == ["hello thére"]
    assert _undo_in(ed, p) == ["hello wörld"]


def test_edit_range_uses_unsaved_buffer_text(ed, c):
    p = make(ed, "buf range.txt", b"zzz\n")
    ed.edit(p)
    ed.nvim.current.buffer[:] = ["abc é", "def"]
    # current text "abc é\ndef\n": é is bytes 4..6
    ok_edit(c.call("editFile", {"path": str(p), "start": 4, "end": 6, "newText": "E\nnew"}))
    assert ed.buf_lines(p) == ["abc E", "new", "def"]
    assert p.read_bytes() == b"abc E\nnew\ndef\n"
    assert _undo_in(ed, p) == ["abc é", "def"]


def test_edit_range_quick_reference_dialect(ed, c):
    p = make(ed, "qr edit.txt", b"first\nsecond\nthird\n")
    # replace "st\nsec" (bytes 3..9) with "-"
    resp = c.request_qr("editFile", {"path": str(p), "start": 3, "end": 9, "newText": "-"})
    assert "error" not in resp, resp
    ok_edit(resp["result"])
    assert p.read_bytes() == b"fir-ond\nthird\n"
    assert ed.buf_lines(p) == ["fir-ond", "third"]


def test_edit_range_append_at_end(ed, c):
    p = make(ed, "append.txt", b"abc\n")
    ok_edit(c.call("editFile", {"path": str(p), "start": 4, "end": 4, "newText": "d\n"}))
    assert p.read_bytes() == b"abc\nd\n"
    assert ed.buf_lines(p) == ["abc", "d"]


def test_edit_relative_path(ed, c):
    p = make(ed, "sub dir/rel ✓.txt", b"old\n")
    ok_edit(c.call("editFile", {"path": "sub dir/rel ✓.txt", "fullContent": "new\n"}))
    assert p.read_bytes() == b"new\n"


def test_edit_keeps_file_mode(ed, c):
    p = make(ed, "run me.sh", b"#!/bin/sh\necho hi\n", mode=0o755)
    ok_edit(c.call("editFile", {"path": str(p), "fullContent": "#!/bin/sh\necho bye\n"}))
    assert p.read_bytes() == b"#!/bin/sh\necho bye\n"
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o755
    ok_edit(c.call("editFile", {"path": str(p), "start": 15, "end": 18, "newText": "ciao"}))
    assert p.read_bytes() == b"#!/bin/sh\necho ciao\n"
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o755


def test_edit_keeps_private_mode(ed, c):
    p = make(ed, "secret.txt", b"s\n", mode=0o600)
    ok_edit(c.call("editFile", {"path": str(p), "fullContent": "t\n"}))
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600


def test_edit_full_content_keeps_crlf(ed, c):
    p = make(ed, "dos full.txt", b"a\r\nb\r\n")
    ok_edit(c.call("editFile", {"path": str(p), "fullContent": "a\r\nc\r\n"}))
    assert p.read_bytes() == b"a\r\nc\r\n"
    assert ed.buf_lines(p) == ["a", "c"]
    assert ed.lua("return vim.bo[...].fileformat", ed.bufnr(p)) == "dos"


def test_edit_range_keeps_crlf(ed, c):
    p = make(ed, "dos range.txt", b"a\r\nb\r\n")
    ed.edit(p)
    ok_read(c.call("readFile", {"path": str(p)}), "a\r\nb\r\n")
    ok_edit(c.call("editFile", {"path": str(p), "start": 3, "end": 4, "newText": "BB"}))
    assert p.read_bytes() == b"a\r\nBB\r\n"
    assert ed.buf_lines(p) == ["a", "BB"]
    assert _undo_in(ed, p) == ["a", "b"]


def test_edit_writes_atomically(ed, c):
    d = ed.env.workspace / "atomic dir"
    p = make(ed, "atomic dir/f ✓.txt", b"v1\n")
    make(ed, "atomic dir/neighbour.txt", b"n\n")
    before = sorted(os.listdir(d))
    ino = os.stat(p).st_ino
    with open(p, "rb") as old:
        ok_edit(c.call("editFile", {"path": str(p), "fullContent": "v2\n"}))
        # replaced by rename: an open reader still sees the complete old file
        assert old.read() == b"v1\n"
    assert p.read_bytes() == b"v2\n"
    assert os.stat(p).st_ino != ino
    assert sorted(os.listdir(d)) == before  # no temp file left behind


def test_edit_then_read_roundtrip(ed, c):
    p = make(ed, "round ✓.txt", b"x\n")
    ok_edit(c.call("editFile", {"path": str(p), "fullContent": "é→😀\nsecond\n"}))
    ok_read(c.call("readFile", {"path": str(p)}), "é→😀\nsecond\n")


@pytest.mark.parametrize("start,end", [(3, 1), (0, 100), (50, 60), (5, 3)])
def test_edit_out_of_range_changes_nothing_disk(ed, c, start, end):
    p = make(ed, "oor ✓.txt", b"abcdef\n")
    failed(c.call("editFile", {"path": str(p), "start": start, "end": end, "newText": "X"}))
    assert p.read_bytes() == b"abcdef\n"
    lines = ed.buf_lines(p)
    assert lines in (None, ["abcdef"])
    assert ed.lua("local b = ... ; return b > 0 and vim.bo[b].modified or false", ed.bufnr(p)) is False


@pytest.mark.parametrize("start,end", [(3, 1), (0, 100)])
def test_edit_out_of_range_changes_nothing_buffer(ed, c, start, end):
    p = make(ed, "oor buf.txt", b"disk\n")
    ed.edit(p)
    ed.nvim.current.buffer[:] = ["unsaved", "text"]
    tick = ed.nvim.eval("b:changedtick")
    failed(c.call("editFile", {"path": str(p), "start": start, "end": end, "newText": "X"}))
    assert ed.nvim.current.buffer[:] == ["unsaved", "text"]
    assert ed.nvim.eval("b:changedtick") == tick
    assert ed.nvim.current.buffer.options["modified"] is True
    assert p.read_bytes() == b"disk\n"


@pytest.mark.parametrize("params", [
    {"fullContent": "created?\n"},
    {"start": 0, "end": 0, "newText": "created?\n"},
])
def test_edit_missing_file_fails_and_creates_nothing(ed, c, params):
    p = ed.env.workspace / "missing ✗.txt"
    failed(c.call("editFile", {"path": str(p), **params}))
    assert not p.exists()
    assert sorted(os.listdir(ed.env.workspace)) == []
