"""Editor context for the agent: selectionDidChange and visibleFilesDidChange.

Real headless Neovim, real keystrokes (nvim_input), real WebSocket clients.
Positions are 0-based lines and UTF-16 columns; every expected column below is
written out as a number.
"""

from __future__ import annotations

import time

from conftest import REPO, file_uri
from context_helpers import (QUIET, connect_recorder, cursor_payload, feed, rng,
                             selection_payload, u16, visible_payload, wait_mode, wait_nvim,
                             write)

SEL = "selectionDidChange"
VIS = "visibleFilesDidChange"

L0 = "é→😀x = 1"         # é0 →1 😀2-3 x4 ' '5 =6 ' '7 1(8); 13 bytes, 9 UTF-16 units
L1 = "\tπ = 3.14 → ok"   # \t0 π1 ' '2 =3 ... →10 ' '11 o12 k13; 14 UTF-16 units
L2 = "plain ascii line"
L3 = "😀😀 end"           # 😀0-1 😀2-3 ' '4 e5 n6 d7; 8 UTF-16 units
L4 = "ab→cd"             # display columns: a0 b1 →2 c3 d4
L5 = "é😀fg"              # display columns: é0 😀1-2 f3 g4; UTF-16: é0 😀1-2 f3 g4
L6 = "xyzzy"
L7 = "last line"
LINES = [L0, L1, L2, L3, L4, L5, L6, L7]
assert (u16(L0), u16(L1), u16(L3), u16("é→😀")) == (9, 14, 8, 4)  # the numbers used below
TEXT = "\n".join(LINES) + "\n"


def open_and_connect(ed, path, lines=LINES):
    """Edits ``path``, then connects a recording client and waits for the
    connect-time state (the file visible, the cursor at 1:1)."""
    ed.edit(path)
    wait_nvim(ed, "expand('%:p')", str(path))
    rec = connect_recorder(ed)
    rec.wait_payload(VIS, visible_payload(path))
    rec.wait_payload(SEL, cursor_payload(path, 0, 0, lines[0]))
    return rec


def sels(rec, since):
    return rec.notes(since, SEL)


# ---------------------------------------------------------------- on connect


def test_connect_sends_metadata_then_visible_files_then_selection(nvim_factory):
    ed = nvim_factory()
    a = write(ed, "a.txt", TEXT)
    ed.edit(a)
    feed(ed, "3j2l")  # line 3, on the space after the two emoji
    wait_nvim(ed, "getcurpos()[1:2]", [4, 9])
    time.sleep(QUIET)  # let the editor publish the state before the client arrives

    rec = connect_recorder(ed)
    frames = rec.wait_frames(3, timeout=2.0)  # "at once"
    version = ed.lua("return require('amp').status().version")
    assert frames[0] == {"serverNotification": {"pluginMetadata": {
        "version": version, "pluginDirectory": str(REPO)}}}, frames[0]
    assert frames[1] == {"serverNotification": {VIS: visible_payload(a)}}, frames[1]
    assert frames[2] == {"serverNotification": {SEL: cursor_payload(a, 3, 4, L3)}}, frames[2]


# ------------------------------------------------------------ UTF-16 columns


def test_normal_mode_cursor_columns_are_utf16(nvim_factory):
    ed = nvim_factory()
    a = write(ed, "a.txt", TEXT)
    rec = open_and_connect(ed, a)

    m = rec.mark()
    feed(ed, "3l")  # é → 😀 x
    rec.wait_payload(SEL, cursor_payload(a, 0, 4, L0), since=m)
    m = rec.mark()
    feed(ed, "$")
    rec.wait_payload(SEL, cursor_payload(a, 0, 8, L0), since=m)
    m = rec.mark()
    feed(ed, "j0ll")  # tab, π, space
    rec.wait_payload(SEL, cursor_payload(a, 1, 2, L1), since=m)
    m = rec.mark()
    feed(ed, "2j$")
    rec.wait_payload(SEL, cursor_payload(a, 3, 7, L3), since=m)
    m = rec.mark()
    feed(ed, "0l")  # the second emoji starts at UTF-16 column 2
    rec.wait_payload(SEL, cursor_payload(a, 3, 2, L3), since=m)


def test_visual_charwise_selection(nvim_factory):
    ed = nvim_factory()
    a = write(ed, "a.txt", TEXT)
    rec = open_and_connect(ed, a)

    m = rec.mark()
    feed(ed, "lv2l")  # → 😀 x selected; end just after x
    rec.wait_payload(SEL, selection_payload(a, (rng(0, 1, 0, 5), "→😀x")), since=m)

    m = rec.mark()
    feed(ed, "<Esc>0")
    rec.wait_payload(SEL, cursor_payload(a, 0, 0, L0), since=m)

    # across lines: from the first emoji to the "=" on the tab line
    m = rec.mark()
    feed(ed, "2lvj03l")
    wait_nvim(ed, "[mode(), line('v'), col('v'), line('.'), col('.')]", ["v", 1, 6, 2, 5])
    rec.wait_payload(SEL, selection_payload(a, (rng(0, 2, 1, 4), "😀x = 1\n\tπ =")), since=m)

    # backwards: the cursor before the anchor
    m = rec.mark()
    feed(ed, "<Esc>gg$v4h")
    rec.wait_payload(SEL, selection_payload(a, (rng(0, 4, 0, 9), "x = 1")), since=m)


def test_visual_linewise_selection(nvim_factory):
    ed = nvim_factory()
    a = write(ed, "a.txt", TEXT)
    rec = open_and_connect(ed, a)

    m = rec.mark()
    feed(ed, "Vj")
    rec.wait_payload(SEL, selection_payload(a, (rng(0, 0, 1, 14), L0 + "\n" + L1)), since=m)

    m = rec.mark()
    feed(ed, "<Esc>3G0")
    rec.wait_payload(SEL, cursor_payload(a, 2, 0, L2), since=m)

    # anchored on the emoji line, then extended upwards; the cursor column does not matter
    m = rec.mark()
    feed(ed, "jllVk")
    rec.wait_payload(SEL, selection_payload(a, (rng(2, 0, 3, 8), L2 + "\n" + L3)), since=m)


def test_visual_blockwise_selection_has_one_selection_per_row(nvim_factory):
    ed = nvim_factory()
    a = write(ed, "a.txt", TEXT)
    rec = open_and_connect(ed, a)

    m = rec.mark()
    feed(ed, "5G03l")  # on "c" of "ab→cd" (display column 3, byte 5)
    rec.wait_payload(SEL, cursor_payload(a, 4, 3, L4), since=m)

    m = rec.mark()
    feed(ed, "<C-v>2jl")  # display columns 3-4 of lines 4-6
    wait_nvim(ed, "[mode(), line('.'), col('.')]", ["\x16", 7, 5])
    rec.wait_payload(SEL, selection_payload(
        a,
        (rng(4, 3, 4, 5), "cd"),   # bytes 5..7
        (rng(5, 3, 5, 5), "fg"),   # bytes 6..8 after é and 😀
        (rng(6, 3, 6, 5), "zy"),   # bytes 3..5
    ), since=m)


def test_insert_mode_cursor_moves_and_typing(nvim_factory):
    ed = nvim_factory()
    a = write(ed, "a.txt", TEXT)
    rec = open_and_connect(ed, a)

    m = rec.mark()
    feed(ed, "i<Right><Right><Right>")  # before x
    rec.wait_payload(SEL, cursor_payload(a, 0, 4, L0), since=m)

    m = rec.mark()
    feed(ed, "Z")  # the content is the line as it is now
    rec.wait_payload(SEL, cursor_payload(a, 0, 5, "é→😀Zx = 1"), since=m)

    m = rec.mark()
    feed(ed, "<Esc>")  # back on Z
    rec.wait_payload(SEL, cursor_payload(a, 0, 4, "é→😀Zx = 1"), since=m)

    m = rec.mark()
    feed(ed, "jI")  # after the leading tab
    rec.wait_payload(SEL, cursor_payload(a, 1, 1, L1), since=m)
    m = rec.mark()
    feed(ed, "<End>")
    rec.wait_payload(SEL, cursor_payload(a, 1, 14, L1), since=m)

    m = rec.mark()
    feed(ed, "<Esc>2jA")  # end of the emoji line
    rec.wait_payload(SEL, cursor_payload(a, 3, 8, L3), since=m)
    m = rec.mark()
    feed(ed, "<Left><Left><Left><Left><Left>")  # d n e space, then over the second emoji
    wait_nvim(ed, "col('.')", 5)
    rec.wait_payload(SEL, cursor_payload(a, 3, 2, L3), since=m)
    feed(ed, "<Esc>")
    wait_mode(ed, "n")


# ----------------------------------------------------------------------- URIs


def test_file_uris_are_percent_encoded(nvim_factory, env_factory):
    ed = nvim_factory(_env=env_factory("ctx wörk"))
    names = {
        "with space.txt": "/with%20space.txt",
        "hash#name.txt": "/hash%23name.txt",
        "per%cent.txt": "/per%25cent.txt",
        "ünï ✓.txt": "/%C3%BCn%C3%AF%20%E2%9C%93.txt",
    }
    first = write(ed, "plain.txt", "plain\n")
    rec = open_and_connect(ed, first, ["plain"])
    workspace_uri = file_uri(ed.env.workspace)
    assert workspace_uri.endswith("/ctx%20w%C3%B6rk"), workspace_uri
    for name, encoded_tail in names.items():
        p = write(ed, name, f"{name} text\n")
        m = rec.mark()
        ed.edit(p)
        wait_nvim(ed, "expand('%:p')", str(p))
        vis = rec.wait_payload(VIS, visible_payload(p), since=m)
        assert vis.payload["uris"] == [workspace_uri + encoded_tail], vis
        sel = rec.wait_payload(SEL, cursor_payload(p, 0, 0, f"{name} text"), since=m)
        assert sel.payload["uri"] == workspace_uri + encoded_tail, sel


# -------------------------------------------------------------- visible files


def test_splits_tabs_and_closing_windows_change_visible_files(nvim_factory):
    ed = nvim_factory()
    a = write(ed, "a.txt", TEXT)
    b = write(ed, "b.txt", "bee\n")
    c = write(ed, "c.txt", "sea\n")
    rec = open_and_connect(ed, a)

    m = rec.mark()
    ed.nvim.command("vsplit " + str(b))  # the new window is on the left
    rec.wait_payload(VIS, visible_payload(b, a), since=m)

    # a second window on a.txt (above b): window order a, b, a, listed once each
    m = rec.mark()
    ed.nvim.command("split " + str(a))
    assert ed.nvim.eval("winnr('$')") == 3
    rec.wait_payload(VIS, visible_payload(a, b), since=m)

    m = rec.mark()
    ed.nvim.command("tabnew " + str(c))
    rec.wait_payload(VIS, visible_payload(c), since=m)

    m = rec.mark()
    ed.nvim.command("tabnew")  # an empty tab page: nothing visible
    rec.wait_payload(VIS, {"uris": []}, since=m)

    m = rec.mark()
    ed.nvim.command("tabclose")
    rec.wait_payload(VIS, visible_payload(c), since=m)

    m = rec.mark()
    ed.nvim.command("tabfirst")
    rec.wait_payload(VIS, visible_payload(a, b), since=m)

    m = rec.mark()
    ed.nvim.command("1close")  # the top-left a.txt window
    rec.wait_payload(VIS, visible_payload(b, a), since=m)

    m = rec.mark()
    ed.nvim.command("1close")  # b.txt
    rec.wait_payload(VIS, visible_payload(a), since=m)

    for note in rec.notes(0, VIS):
        assert all(u.startswith("file:///") for u in note.payload["uris"]), note


def test_floating_window_is_not_listed(nvim_factory):
    ed = nvim_factory()
    a = write(ed, "a.txt", TEXT)
    d = write(ed, "float.txt", "floating\n")
    e = write(ed, "e.txt", "eee\n")
    rec = open_and_connect(ed, a)

    m = rec.mark()
    ed.lua("""
        local buf = vim.fn.bufadd(...)
        vim.fn.bufload(buf)
        vim.api.nvim_open_win(buf, false, { relative = "editor", row = 1, col = 1, width = 20, height = 3 })
    """, str(d))
    assert ed.lua("return #vim.api.nvim_tabpage_list_wins(0)") == 2
    ed.nvim.command("vsplit " + str(e))
    rec.wait_payload(VIS, visible_payload(e, a), since=m)
    for note in rec.notes(m, VIS):
        assert file_uri(d) not in note.payload["uris"], note


def test_help_quickfix_terminal_windows_are_not_listed_and_send_no_selection(nvim_factory):
    ed = nvim_factory()
    a = write(ed, "a.txt", TEXT)
    b = write(ed, "b.txt", "bee\n")
    rec = open_and_connect(ed, a)
    # the pipeline is live
    m = rec.mark()
    feed(ed, "j")
    rec.wait_payload(SEL, cursor_payload(a, 1, 0, L1), since=m)

    m = rec.mark()
    ed.nvim.command("help")
    assert ed.nvim.eval("&buftype") == "help"
    top = ed.nvim.eval("line('.')")
    feed(ed, "jjj")
    wait_nvim(ed, "line('.')", top + 3)
    ed.nvim.command("botright copen")
    assert ed.nvim.eval("&buftype") == "quickfix"
    feed(ed, "k")
    ed.nvim.command("botright new")
    ed.nvim.command("terminal")
    assert ed.nvim.eval("&buftype") == "terminal"
    feed(ed, "k")
    assert ed.nvim.eval("winnr('$')") == 4
    time.sleep(QUIET)
    assert sels(rec, m) == [], "help/quickfix/terminal windows must not produce a selection"
    for note in rec.notes(m, VIS):
        assert note.payload == visible_payload(a), note

    # the tab page with help, quickfix, terminal and a.txt lists a.txt only
    m = rec.mark()
    ed.nvim.command("tabnew " + str(b))
    rec.wait_payload(VIS, visible_payload(b), since=m)
    m = rec.mark()
    ed.nvim.command("tabprevious")
    rec.wait_payload(VIS, visible_payload(a), since=m)

    # back in a.txt's window, moves are reported again
    ed.lua("""
        for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
          if vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(w)) == ... then
            vim.api.nvim_set_current_win(w)
          end
        end
    """, str(a))
    m = rec.mark()
    feed(ed, "j")
    rec.wait_payload(SEL, cursor_payload(a, 2, 0, L2), since=m)


def test_scratch_and_unnamed_buffers_are_not_listed_and_send_no_selection(nvim_factory):
    ed = nvim_factory()
    a = write(ed, "a.txt", TEXT)
    rec = open_and_connect(ed, a)

    m = rec.mark()
    ed.nvim.command("tabnew")  # unnamed buffer
    rec.wait_payload(VIS, {"uris": []}, since=m)
    m = rec.mark()
    feed(ed, "ihello<CR>world<Esc>k")
    wait_nvim(ed, "[getline(1), line('.')]", ["hello", 1])
    # a nofile buffer, even one whose name looks like a file in the workspace
    ed.nvim.command("enew")
    ed.nvim.command("setlocal buftype=nofile bufhidden=hide noswapfile")
    ed.nvim.command("file " + ed.nvim.funcs.fnameescape(str(ed.env.workspace / "scratch.txt")))
    feed(ed, "iscratch<CR>text<Esc>k")
    wait_nvim(ed, "[getline(1), line('.')]", ["scratch", 1])
    wait_mode(ed, "n")
    time.sleep(QUIET)
    assert sels(rec, m) == [], "unnamed/nofile buffers must not produce a selection"
    for note in rec.notes(m, VIS):
        assert note.payload == {"uris": []}, note

    m = rec.mark()
    ed.nvim.command("tabprevious")
    rec.wait_payload(VIS, visible_payload(a), since=m)
    m = rec.mark()
    feed(ed, "j")
    rec.wait_payload(SEL, cursor_payload(a, 1, 0, L1), since=m)


def test_moves_follow_renames_buftype_changes_wipeouts_and_mode_changes(nvim_factory):
    """The per-keystroke callbacks are buffer-local and know a buffer's file
    from a cache and Visual mode from ModeChanged: every way those change
    must reach them."""
    ed = nvim_factory()
    a = write(ed, "a.txt", TEXT)
    rec = open_and_connect(ed, a)

    # renamed (:saveas): moves report the new file
    renamed = ed.env.workspace / "renamed.txt"
    ed.nvim.command("saveas " + ed.nvim.funcs.fnameescape(str(renamed)))
    m = rec.mark()
    feed(ed, "j")
    rec.wait_payload(SEL, cursor_payload(renamed, 1, 0, L1), since=m)

    # no longer a file ('buftype' set): silent; a file again: reported
    ed.nvim.command("setlocal buftype=nofile")
    m = rec.mark()
    feed(ed, "j")
    wait_nvim(ed, "line('.')", 3)
    time.sleep(QUIET)
    assert sels(rec, m) == [], "a nofile buffer must not produce a selection"
    ed.nvim.command("setlocal buftype=")
    m = rec.mark()
    feed(ed, "j")
    rec.wait_payload(SEL, cursor_payload(renamed, 3, 0, L3), since=m)

    # Visual mode and back, by keys: the last state is the plain cursor
    m = rec.mark()
    feed(ed, "vj")
    wait_mode(ed, "v")
    rec.wait_note(lambda n: n.name == SEL and n.payload["selections"][0]["range"]["endLine"] == 4,
                  "the Visual selection", since=m)
    feed(ed, "<Esc>k")
    wait_mode(ed, "n")
    rec.wait_payload(SEL, cursor_payload(renamed, 3, 0, L3), since=m)

    # wiped out and opened again (a new buffer number): reported
    ed.nvim.command("bwipeout!")
    ed.edit(a)
    m = rec.mark()
    feed(ed, "G")
    rec.wait_payload(SEL, cursor_payload(a, 7, 0, L7), since=m)


# --------------------------------------------------------------------- timing


def numbered(n):
    return [f"line {i:03d}" for i in range(n)]


def test_burst_of_moves_is_coalesced_and_ends_with_the_latest_state(nvim_factory):
    ed = nvim_factory()
    lines = numbered(120)
    p = write(ed, "burst.txt", "\n".join(lines) + "\n")
    rec = open_and_connect(ed, p, lines)
    ed.lua("""
        _G.amp_test_moves = 0
        vim.api.nvim_create_autocmd("CursorMoved", { callback = function()
          _G.amp_test_moves = _G.amp_test_moves + 1
        end })
    """)
    time.sleep(QUIET)

    m = rec.mark()
    t0 = time.monotonic()
    for _ in range(50):
        feed(ed, "j")
    wait_nvim(ed, "line('.')", 51)
    elapsed = time.monotonic() - t0
    final = rec.wait_payload(SEL, cursor_payload(p, 50, 0, "line 050"), since=m)
    time.sleep(QUIET)
    got = sels(rec, m)
    moves = ed.lua("return _G.amp_test_moves")
    detail = (f"{len(got)} selection notifications for 50 keystrokes "
              f"({moves} CursorMoved events in {elapsed * 1000:.0f} ms): "
              f"{[n.payload['selections'][0]['range']['startLine'] for n in got]}")
    assert got[-1] is not None and got[-1].index == final.index, "the last one must be the final state; " + detail
    assert len(got) <= 25, "a burst must be coalesced; " + detail
    lines_sent = [n.payload["selections"][0]["range"]["startLine"] for n in got]
    assert lines_sent == sorted(set(lines_sent)), "states must be in order, none repeated; " + detail
    assert ed.nvim.eval("getcurpos()[1:2]") == [51, 1]


def test_selection_interval_option_spaces_notifications(nvim_factory):
    ed = nvim_factory(selection={"interval_ms": 200})
    lines = numbered(200)
    p = write(ed, "slow.txt", "\n".join(lines) + "\n")
    rec = open_and_connect(ed, p, lines)
    time.sleep(0.5)

    # an isolated change goes out at once, not after the interval
    m = rec.mark()
    t0 = time.monotonic()
    feed(ed, "j")
    first = rec.wait_payload(SEL, cursor_payload(p, 1, 0, "line 001"), since=m)
    latency = first.t - t0
    assert latency < 0.15, f"an isolated change took {latency * 1000:.0f} ms to arrive"
    time.sleep(0.5)

    # a steady stream of moves for ~1.5 s: one notification per 200 ms at most
    m = rec.mark()
    t0 = time.monotonic()
    for _ in range(60):
        feed(ed, "j")
        time.sleep(0.025)
    wait_nvim(ed, "line('.')", 62)
    duration = time.monotonic() - t0
    rec.wait_payload(SEL, cursor_payload(p, 61, 0, "line 061"), since=m)
    time.sleep(0.5)
    got = sels(rec, m)
    times = [first.t] + [n.t for n in got]
    gaps = [round((b - a) * 1000) for a, b in zip(times, times[1:])]
    detail = (f"{len(got)} notifications over {duration * 1000:.0f} ms, gaps (ms) {gaps}, lines "
              f"{[n.payload['selections'][0]['range']['startLine'] for n in got]}")
    assert got[-1].payload == cursor_payload(p, 61, 0, "line 061"), detail
    assert min(gaps) >= 150, "selection notifications closer than selection.interval_ms; " + detail
    assert 4 <= len(got) <= duration / 0.2 + 3, detail


def test_unchanged_state_is_not_sent_again(nvim_factory):
    ed = nvim_factory()
    a = write(ed, "a.txt", TEXT)
    rec = open_and_connect(ed, a)
    m = rec.mark()
    feed(ed, "j")
    rec.wait_payload(SEL, cursor_payload(a, 1, 0, L1), since=m)
    time.sleep(QUIET)

    m = rec.mark()
    ed.nvim.command('echo "nothing"')
    ed.nvim.command("doautocmd CursorMoved")
    ed.nvim.command("doautocmd WinEnter")
    ed.nvim.command("doautocmd BufEnter")
    feed(ed, "0i")  # Insert at column 0 and back: the same cursor, the same line
    wait_mode(ed, "i")
    feed(ed, "<Esc>")
    wait_mode(ed, "n")
    ed.nvim.command("vsplit")  # the same file in two windows: same files, same cursor
    assert ed.nvim.eval("winnr('$')") == 2
    time.sleep(QUIET)
    assert rec.notes(m) == [], "an unchanged state was sent again"

    feed(ed, "+")  # first non-blank of the next line
    note = rec.wait_note(lambda n: True, "the next notification", since=m)
    assert note.name == SEL and note.payload == cursor_payload(a, 2, 0, L2), note


# -------------------------------------------------------------------- dialect


def test_quick_reference_client_gets_its_own_notification_names(nvim_factory):
    ed = nvim_factory()
    a = write(ed, "a.txt", TEXT)
    b = write(ed, "b.txt", TEXT)
    flat = open_and_connect(ed, a)
    qr = connect_recorder(ed)
    # before its first request the dialect is unknown: the CLI forms
    qr.wait_payload(VIS, visible_payload(a))
    qr.wait_payload(SEL, cursor_payload(a, 0, 0, L0))
    qr.send_json({"clientRequest": {"id": "1", "method": {"ping": {}}}})
    resp = qr.response("1")
    assert "error" not in resp, resp
    after = qr.mark()
    fm = flat.mark()

    ed.nvim.command("vsplit " + str(b))
    qr.wait_payload("visibleFilesChanged", {"files": [str(b), str(a)]}, since=after, dialect="wrapped")
    qr.wait_payload("selectionChanged", {"path": str(b), "start": {"line": 0, "col": 0},
                                         "end": {"line": 0, "col": 0}}, since=after, dialect="wrapped")
    flat.wait_payload(VIS, visible_payload(b, a), since=fm, dialect="flat")

    feed(ed, "3l")
    qr.wait_payload("selectionChanged", {"path": str(b), "start": {"line": 0, "col": 4},
                                         "end": {"line": 0, "col": 4}}, since=after, dialect="wrapped")
    flat.wait_payload(SEL, cursor_payload(b, 0, 4, L0), since=fm, dialect="flat")

    feed(ed, "vl")
    qr.wait_payload("selectionChanged", {"path": str(b), "start": {"line": 0, "col": 4},
                                         "end": {"line": 0, "col": 6}}, since=after, dialect="wrapped")
    flat.wait_payload(SEL, selection_payload(b, (rng(0, 4, 0, 6), "x ")), since=fm, dialect="flat")
    feed(ed, "<Esc>")
    time.sleep(QUIET)

    wrong = [n for n in qr.notes(after) if n.dialect != "wrapped" or n.name in (SEL, VIS)]
    assert wrong == [], f"the quick-reference client got CLI-form notifications: {wrong!r}"
    wrong = [n for n in flat.notes(fm) if n.dialect != "flat"]
    assert wrong == [], f"the CLI client got quick-reference notifications: {wrong!r}"
