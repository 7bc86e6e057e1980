"""Agents' reads and edits keep every file exactly as Neovim itself would.

The reference is Neovim: for each file, the bytes an agent's `editFile` leaves
on disk are compared with the bytes Neovim's own `:edit`, the same change and
`:write` leave on a copy of that file, in the same Neovim with the same
options; `readFile` must answer the same text for a file whether a buffer
has it loaded or not. Test names list the case they check.
"""

import os
import shutil
import socket
import stat
import subprocess
import time

import pytest

from filewatch_helpers import Workspace, agent_write, install_probes, wait_event


@pytest.fixture
def ed(nvim_factory, env_factory):
    editor = nvim_factory(_env=env_factory("integrity ✓"))
    install_probes(editor)
    return editor


@pytest.fixture
def c(ed):
    return ed.connect()


def make(ed, rel, data: bytes):
    p = ed.env.workspace / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return p


def read(c, p):
    r = c.call("readFile", {"path": str(p)})
    assert r.get("success") is True, r
    return r["content"]


def edit(c, p, **params):
    return c.call("editFile", {"path": str(p), **params})


def open_in_nvim(ed, p):
    """`:edit {p}` as a user would (through nvim_cmd: no string building)."""
    ed.nvim.api.cmd({"cmd": "edit", "args": [str(p)]}, {})
    return ed.nvim.current.buffer.number


def neovim_reference(ed, src, change):
    """What Neovim itself writes: a copy of ``src`` opened with :edit,
    ``change(buf)`` applied through the API, then :write."""
    ref = src.with_name("ref-" + src.name)
    shutil.copyfile(src, ref)
    buf = open_in_nvim(ed, ref)
    change(buf)
    ed.nvim.api.cmd({"cmd": "write", "mods": {"silent": True}}, {})
    ed.nvim.api.cmd({"cmd": "bwipeout", "args": [str(buf)]}, {})
    data = ref.read_bytes()
    ref.unlink()
    return data


def wait_watched(ed):
    """Returns once the file watcher follows every buffer loaded so far."""
    Workspace(ed).sync()


def option(ed, p, name):
    return ed.lua("local b = ... ; return vim.bo[b][select(2, ...)]", ed.bufnr(p), name)


def modified(ed, p):
    return option(ed, p, "modified")


# Files that real projects have; each starts with an ASCII letter so a range
# edit of the first character is the same change for every encoding.
SAMPLES = {
    "utf8_bom_crlf": b"\xef\xbb\xbfclass A\r\n  x = 1\r\n",
    "utf8_bom_lf": b"\xef\xbb\xbfclass A\n  x = 1\n",
    "crlf": b"alpha\r\nbeta\r\n",
    "mixed_crlf_lf": b"alpha\r\nbeta\ngamma\r\n",
    "cr_at_end_of_file": b"alpha\nbeta\r",
    "crlf_no_final_newline": b"alpha\r\nbeta",
    "no_final_newline": b"alpha\nbeta",
    "nul_bytes": b"a\x00b\nc\x00\n",
    "very_long_line": b"x" * 300_000 + b"\nshort\n",
    "latin1": b"caf\xe9\nna\xefve\n",
    "utf16le_bom": b"\xff\xfe" + "hi there\r\nsecond\r\n".encode("utf-16le"),
    "lone_cr_lines": b"a\rb\rc\n",
}


def first_char_changed(ed, buf):
    line = ed.nvim.api.buf_get_lines(buf, 0, 1, False)[0]
    ed.nvim.api.buf_set_lines(buf, 0, 1, False, ["Z" + line[1:]])


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_range_edit_writes_what_neovims_own_write_writes(ed, c, name):
    """BOM, CRLF, mixed endings, CR at EOF, no final newline, NUL bytes, long
    lines, Latin-1, UTF-16: a range edit of the first character."""
    data = SAMPLES[name]
    p = make(ed, f"{name}.txt", data)
    expected = neovim_reference(ed, p, lambda buf: first_char_changed(ed, buf))
    text = read(c, p)
    assert not text.startswith("\ufeff"), "the BOM is not part of the text"
    r = edit(c, p, start=0, end=1, newText="Z")
    assert r.get("success") is True, r
    assert p.read_bytes() == expected, (name, p.read_bytes()[:80], expected[:80])
    # readFile now answers what the file holds (as for the same bytes unloaded).
    twin = make(ed, f"twin-{name}.txt", expected)
    assert read(c, p) == read(c, twin)
    assert read(c, p).startswith("Z" + text[1:].split("\n")[0])
    assert modified(ed, p) is False


@pytest.mark.parametrize("loaded", [False, True], ids=["unloaded", "loaded"])
@pytest.mark.parametrize("name", sorted(SAMPLES) + ["empty"])
def test_full_content_equal_to_read_file_is_a_byte_for_byte_noop(ed, c, name, loaded):
    data = SAMPLES.get(name, b"")
    p = make(ed, f"noop-{name}.txt", data)
    mtime = os.stat(p).st_mtime_ns
    if loaded:
        open_in_nvim(ed, p)
    text = read(c, p)
    r = edit(c, p, fullContent=text)
    assert r.get("success") is True, r
    assert r.get("appliedChanges") is False, r
    assert p.read_bytes() == data
    assert os.stat(p).st_mtime_ns == mtime, "nothing to change: nothing written"


@pytest.mark.parametrize("name", sorted(SAMPLES) + ["empty"])
def test_read_file_answers_the_same_loaded_or_not(ed, c, name):
    p = make(ed, f"same-{name}.txt", SAMPLES.get(name, b""))
    unloaded = read(c, p)
    open_in_nvim(ed, p)
    assert read(c, p) == unloaded


def test_empty_file_reads_empty_and_gains_no_newline(ed, c):
    p = make(ed, "empty.txt", b"")
    assert read(c, p) == ""
    open_in_nvim(ed, p)
    assert read(c, p) == "", "a loaded empty file is not one newline"
    r = edit(c, p, fullContent="")
    assert r.get("success") is True and r.get("appliedChanges") is False, r
    assert p.read_bytes() == b""
    r = edit(c, p, fullContent="first\n")
    assert r.get("success") is True, r
    assert p.read_bytes() == b"first\n"
    r = edit(c, p, fullContent="")
    assert r.get("success") is True, r
    assert p.read_bytes() == b"", "emptied by the agent: an empty file, as :w writes it"


def test_fileformats_unix_keeps_a_crlf_files_other_lines(ed, c):
    """With 'fileformats' unix a CRLF file is read with CRs in its lines:
    a one-line edit changes that line only."""
    ed.nvim.api.set_option_value("fileformats", "unix", {})
    p = make(ed, "ffs-unix.txt", b"one\r\ntwo\r\nthree\r\n")
    text = read(c, p)
    assert text == "one\r\ntwo\r\nthree\r\n"
    r = edit(c, p, fullContent=text.replace("two", "TWO"))
    assert r.get("success") is True, r
    assert p.read_bytes() == b"one\r\nTWO\r\nthree\r\n"


def test_latin1_buffer_is_written_in_latin1_or_refused(ed, c):
    p = make(ed, "latin.txt", b"caf\xe9\n")
    open_in_nvim(ed, p)
    assert option(ed, p, "fileencoding") == "latin1"
    assert read(c, p) == "café\n"
    r = edit(c, p, fullContent="café crème\n")
    assert r.get("success") is True, r
    assert p.read_bytes() == b"caf\xe9 cr\xe8me\n", "edited in the file's own encoding"
    # "€" has no Latin-1 byte: refused, nothing changed, never transcoded.
    r = edit(c, p, fullContent="5 €\n")
    assert r.get("success") is False, r
    assert "Latin-1" in r["message"] and "€" in r["message"], r
    assert p.read_bytes() == b"caf\xe9 cr\xe8me\n"
    assert ed.buf_lines(p) == ["café crème"]
    assert modified(ed, p) is False


def test_readonly_buffer_is_refused_with_how_to_allow_it(ed, c):
    p = make(ed, "ro.txt", b"keep\n")
    open_in_nvim(ed, p)
    ed.nvim.api.set_option_value("readonly", True, {"buf": ed.bufnr(p)})
    r = edit(c, p, fullContent="changed\n")
    assert r.get("success") is False, r
    assert "readonly" in r["message"] and "noreadonly" in r["message"], r
    assert p.read_bytes() == b"keep\n"
    assert ed.buf_lines(p) == ["keep"]


def test_file_without_write_permission_is_refused(ed, c):
    """0444 (even as root, where :e sets 'readonly' for such a file)."""
    p = make(ed, "mode444.txt", b"keep\n")
    os.chmod(p, 0o444)
    r = edit(c, p, fullContent="changed\n")
    assert r.get("success") is False, r
    assert "read-only" in r["message"] and "chmod" in r["message"], r
    assert p.read_bytes() == b"keep\n"
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o444


def test_hard_link_is_kept_and_unsaved_work_stays_with_its_file(ed, c):
    a = make(ed, "link-a.txt", b"one\ntwo\n")
    b = a.with_name("link-b.txt")
    os.link(a, b)
    ino = os.stat(a).st_ino
    # The other name is open with unsaved changes.
    open_in_nvim(ed, b)
    ed.nvim.current.buffer[0] = "ONE (unsaved)"
    assert read(c, a) == "ONE (unsaved)\ntwo\n", "the same file: the unsaved text is its text"
    r = edit(c, a, start=0, end=3, newText="1")
    assert r.get("success") is True, r
    assert os.stat(a).st_ino == ino and os.stat(b).st_ino == ino, "the link is kept"
    assert os.stat(a).st_nlink == 2
    assert a.read_bytes() == b.read_bytes() == b"1 (unsaved)\ntwo\n"
    assert modified(ed, b) is False
    assert ed.bufnr(a) == -1, "no second buffer for the same file"


def test_symlink_is_written_through_and_read_with_unsaved_text(ed, c):
    target = make(ed, "real.txt", b"one\ntwo\n")
    link = target.with_name("alias.txt")
    link.symlink_to(target.name)
    open_in_nvim(ed, link)
    ed.nvim.current.buffer[1] = "TWO (unsaved)"
    assert read(c, target) == "one\nTWO (unsaved)\n", "the target's path finds the link's buffer"
    r = edit(c, target, start=0, end=3, newText="1")
    assert r.get("success") is True, r
    assert link.is_symlink() and os.readlink(link) == target.name
    assert target.read_bytes() == b"1\nTWO (unsaved)\n"


def test_owner_mode_and_xattrs_are_kept(ed, c):
    p = make(ed, "owned.txt", b"one\n")
    os.chmod(p, 0o640)
    if os.geteuid() == 0:
        os.chown(p, 65534, 65534)
    try:
        os.setxattr(p, "user.amp-test", b"kept")
        has_xattr = True
    except OSError:
        has_xattr = False
    before = os.stat(p)
    r = edit(c, p, fullContent="two\n")
    assert r.get("success") is True, r
    after = os.stat(p)
    assert p.read_bytes() == b"two\n"
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)
    assert stat.S_IMODE(after.st_mode) == 0o640
    if has_xattr:
        assert os.getxattr(p, "user.amp-test") == b"kept"


def test_u_of_an_agent_edit_marks_the_buffer_modified_and_redo_unmodified(ed, c):
    p = make(ed, "undo.txt", b"one\ntwo\n")
    open_in_nvim(ed, p)
    r = edit(c, p, fullContent="one\nTWO\n")
    assert r.get("success") is True, r
    assert modified(ed, p) is False
    ed.nvim.command("undo")
    assert ed.buf_lines(p) == ["one", "two"]
    assert modified(ed, p) is True, "the buffer differs from the disk after `u`"
    ed.nvim.command("redo")
    assert modified(ed, p) is False, "back at the text on disk"


@pytest.mark.parametrize("loaded", [False, True], ids=["unloaded", "loaded"])
@pytest.mark.parametrize("how", ["full", "range"])
def test_text_put_into_an_empty_file_is_written_as_neovims_own_write(ed, c, loaded, how):
    """Neovim's :e of an empty file, the same change and :w write "x\n"
    (an empty file has no final newline an agent could have taken away)."""
    p = make(ed, f"into-empty-{how}.txt", b"")
    expected = neovim_reference(ed, p, lambda buf: ed.nvim.api.buf_set_lines(buf, 0, -1, False, ["x"]))
    assert expected == b"x\n"
    if loaded:
        open_in_nvim(ed, p)
    r = edit(c, p, fullContent="x") if how == "full" else edit(c, p, start=0, end=0, newText="x")
    assert r.get("success") is True, r
    assert p.read_bytes() == expected
    assert read(c, p) == "x\n"
    assert modified(ed, p) is False


def test_a_loaded_file_truncated_outside_reads_and_writes_as_neovims_own_edit(ed, c):
    """After an outside write empties a loaded file, the buffer holds what
    Neovim's own :e of the empty file holds: readFile answers "" (as for the
    same file unloaded), and the user's :w writes nothing, byte for byte as
    Neovim's :e + :w of a copy."""
    p = make(ed, "truncated.txt", b"abc\ndef\n")
    open_in_nvim(ed, p)
    wait_watched(ed)
    agent_write(p, "")
    wait_event(ed, p, "reloaded")
    twin = make(ed, "truncated-twin.txt", b"")
    assert read(c, twin) == ""
    assert read(c, p) == read(c, twin)
    assert ed.lua("local b = ... return vim.api.nvim_buf_call(b, function() return vim.fn.wordcount().bytes end)",
                  ed.bufnr(p)) == 0, "the buffer is empty as :e leaves an empty file"
    expected = neovim_reference(ed, twin, lambda buf: None)
    buf = ed.bufnr(p)
    ed.nvim.api.cmd({"cmd": "buffer", "args": [str(buf)]}, {})
    ed.nvim.api.cmd({"cmd": "write", "mods": {"silent": True}}, {})
    assert p.read_bytes() == expected == b""
    # An agent's edit of it is then the same as of an empty file.
    r = edit(c, p, fullContent="x")
    assert r.get("success") is True, r
    assert p.read_bytes() == b"x\n"


def test_u_of_a_reload_marks_the_buffer_modified(ed):
    p = make(ed, "undo-reload.txt", b"one\ntwo\n")
    open_in_nvim(ed, p)
    wait_watched(ed)
    agent_write(p, "one\nTWO\n")
    wait_event(ed, p, "reloaded")
    ed.nvim.command("undo")
    assert ed.buf_lines(p) == ["one", "two"]
    assert modified(ed, p) is True
    ed.nvim.command("redo")
    assert modified(ed, p) is False


@pytest.mark.parametrize("old,new", [
    (b"one\ntwo\n", b"\xef\xbb\xbfone\r\nTWO\r\n"),
    (b"\xef\xbb\xbfone\r\ntwo\r\n", b"one\nTWO\n"),
    (b"one\ntwo\n", b"caf\xe9\nTWO\n"),
    (b"one\ntwo\n", b"one\nTWO"),
], ids=["gains_bom_and_crlf", "loses_bom_and_crlf", "becomes_latin1", "loses_final_newline"])
def test_after_a_reload_the_next_write_is_the_disk_plus_the_users_edit(ed, old, new):
    """The watcher's reload takes the file's new BOM, endings and encoding:
    the user's next :w writes what Neovim's own :e of the new file plus the
    same edit would."""
    p = make(ed, "rewritten.txt", old)
    open_in_nvim(ed, p)
    wait_watched(ed)
    tmp = p.with_name(".rewritten.tmp")
    tmp.write_bytes(new)
    os.replace(tmp, p)
    wait_event(ed, p, "reloaded")
    expected = neovim_reference(ed, p, lambda buf: ed.nvim.api.buf_set_lines(buf, 1, 2, False, ["user"]))
    buf = ed.bufnr(p)
    ed.nvim.api.buf_set_lines(buf, 1, 2, False, ["user"])
    ed.nvim.api.cmd({"cmd": "buffer", "args": [str(buf)]}, {})
    ed.nvim.api.cmd({"cmd": "write", "mods": {"silent": True}}, {})
    assert p.read_bytes() == expected


def test_disk_conflict_refuses_the_edit_and_keeps_both_texts(ed, c):
    p = make(ed, "conflict.txt", b"one\n")
    open_in_nvim(ed, p)
    wait_watched(ed)
    ed.nvim.current.buffer[0] = "mine (unsaved)"
    agent_write(p, "theirs\n")
    wait_event(ed, p, "conflict")
    r = edit(c, p, fullContent="agent\n")
    assert r.get("success") is False, r
    assert ":Amp diff" in r["message"], r
    assert p.read_bytes() == b"theirs\n"
    assert ed.buf_lines(p) == ["mine (unsaved)"]


def test_writable_file_in_an_unwritable_directory_is_written_in_place(ed, c):
    """As :w does (no temp file or backup can go beside it); the directory is
    made immutable, which even root cannot add entries to."""
    d = ed.env.workspace / "locked dir"
    p = make(ed, "locked dir/f.txt", b"one\n")
    ino = os.stat(p).st_ino
    if subprocess.run(["chattr", "+i", str(d)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here (needs root on ext2/3/4)")
    try:
        assert not os.access(d, os.W_OK)
        r = edit(c, p, fullContent="two\n")
        assert r.get("success") is True, r
        assert p.read_bytes() == b"two\n"
        assert os.stat(p).st_ino == ino, "written in place"
        assert sorted(os.listdir(d)) == ["f.txt"]
    finally:
        subprocess.run(["chattr", "-i", str(d)], check=True)


@pytest.mark.parametrize("kind", ["fifo", "socket", "device"])
def test_special_files_are_refused_at_once(ed, c, kind):
    """FIFOs, sockets and devices: refused before anything opens them (a FIFO
    would block, /dev/zero never ends)."""
    if kind == "fifo":
        p = ed.env.workspace / "pipe"
        os.mkfifo(p)
    elif kind == "socket":
        p = ed.env.workspace / "sock"
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(p))
    else:
        p = "/dev/zero"
    for method, params in [("readFile", {}), ("editFile", {"fullContent": "x"})]:
        t0 = time.monotonic()
        r = c.call(method, {"path": str(p), **params}, timeout=5)
        assert time.monotonic() - t0 < 2
        assert r.get("success") is False, r
        assert "only regular files" in r["message"], r
    assert ed.lua("return 1 + 1") == 2


def test_files_over_the_size_limit_are_refused_with_the_limit_named(nvim_factory, env_factory):
    ed = nvim_factory(_env=env_factory("limits"), edits={"max_file_bytes": 1000})
    c = ed.connect()
    big = make(ed, "big.txt", b"x" * 1001)
    for r in [c.call("readFile", {"path": str(big)}),
              c.call("editFile", {"path": str(big), "fullContent": "small\n"})]:
        assert r.get("success") is False, r
        assert "max_file_bytes" in r["message"] and "1000" in r["message"], r
    small = make(ed, "small.txt", b"x\n")
    r = c.call("editFile", {"path": str(small), "fullContent": "y" * 2000})
    assert r.get("success") is False and "max_file_bytes" in r["message"], r
    assert small.read_bytes() == b"x\n"
    # a loaded buffer over the limit is not read either
    open_in_nvim(ed, small)
    ed.nvim.current.buffer[:] = ["z" * 2000]
    r = c.call("readFile", {"path": str(small)})
    assert r.get("success") is False and "max_file_bytes" in r["message"], r


FORMATTER = """
vim.g.amp_test_events = {}
vim.api.nvim_create_autocmd("BufWritePre", { callback = function(ev)
  local events = vim.g.amp_test_events
  table.insert(events, "pre")
  vim.g.amp_test_events = events
  vim.api.nvim_buf_set_lines(ev.buf, 0, 1, false, { "formatted" })
end })
vim.api.nvim_create_autocmd("BufWritePost", { pattern = "*.txt", callback = function()
  local events = vim.g.amp_test_events
  table.insert(events, "post")
  vim.g.amp_test_events = events
end })
"""


@pytest.mark.parametrize("mode,pre,post", [("post", False, True), ("all", True, True), ("none", False, False)])
def test_write_autocmds_option(nvim_factory, env_factory, mode, pre, post):
    """edits.write_autocmds: "post" (default) runs BufWritePost (matched by the
    file's own name) but no formatter; "all" both; "none" neither."""
    ed = nvim_factory(_env=env_factory(f"autocmds-{mode}"), edits={"write_autocmds": mode})
    ed.lua(FORMATTER)
    c = ed.connect()
    p = make(ed, "hooked.txt", b"one\ntwo\n")
    r = c.call("editFile", {"path": str(p), "fullContent": "one\nTWO\n"})
    assert r.get("success") is True, r
    events = ed.lua("return vim.g.amp_test_events")
    assert ("pre" in events) is pre, events
    assert ("post" in events) is post, events
    assert p.read_bytes() == (b"formatted\nTWO\n" if pre else b"one\nTWO\n")
