"""Files changed on disk by an outside process (the agent) while Neovim shows them.

Real headless Neovim with the real plugin; the test plays the agent and
writes files the way agents do (a temporary file renamed over the old one)
and in place. Issue: "Agent edits on disk appear in Neovim at once, and
unsaved work is never lost".
"""

from __future__ import annotations

import os
import statistics
import time

import pytest

from filewatch_helpers import (LATENCIES, QUIET, RELOAD_TARGET, Workspace, agent_write,
                               assert_responsive, fw_events, inplace_write, latency_summary,
                               lines_of, notes, notes_about, write_answering,
                               timed_reload, wait_event, wait_lines, wait_until)

BASE = "".join(f"line {i}\n" for i in range(1, 13))  # "line 1" … "line 12"


@pytest.fixture
def ws(nvim_factory):
    ed = nvim_factory()
    return Workspace(ed)


def modified(ed) -> bool:
    return bool(ed.nvim.eval("&modified"))


def conflict_var(ed):
    return ed.nvim.eval("get(b:, 'amp_disk_conflict', v:null)")


def user_edit(ed, line: int, text: str) -> None:
    """The user changes one line of the current buffer (0-based), unsaved."""
    ed.lua("vim.api.nvim_buf_set_lines(0, ..., ... + 1, true, { select(2, ...) })", line, text)
    assert modified(ed)


def quiet(seconds: float = QUIET) -> None:
    time.sleep(seconds)


def errors_in_messages(ed) -> list[str]:
    return [l for l in ed.messages().splitlines() if l.startswith("E") and ":" in l[:6]]


# ---------------------------------------------------------------- clean buffers


def test_rename_over_reloads_at_once_as_one_undo_step(ws):
    ed = ws.ed
    p = ws.open("a.txt", BASE)
    buf = ed.bufnr(p)
    new = BASE.replace("line 3\n", "LINE THREE (agent)\n")

    latency = timed_reload(ed, p, new, agent_write)
    assert latency <= 1.0, f"reload took {latency * 1000:.0f} ms"
    assert_responsive(ed)  # no "file changed" prompt
    assert not modified(ed)
    ev = wait_event(ed, p, "reloaded")
    assert ev == {"path": str(p), "buf": buf, "reloaded": True}, ev
    quiet(0.1)
    assert [e for e in fw_events(ed, p) if not e.get("reloaded")] == []
    assert notes(ed) == []
    assert "W11" not in ed.messages() and "changed since editing" not in ed.messages()

    ed.nvim.command("undo")
    assert ed.buf_lines(p) == lines_of(BASE), "one :undo must bring back exactly the old text"
    ed.nvim.command("redo")
    assert ed.buf_lines(p) == lines_of(new)
    assert p.read_text() == new  # the buffer never wrote anything


def test_in_place_write_reloads_and_u_brings_back_the_old_text(ws):
    ed = ws.ed
    p = ws.open("inplace.txt", BASE)
    new = "first\n" + BASE[len("line 1\n"):] + "appended\n"
    timed_reload(ed, p, new, inplace_write)
    assert not modified(ed)
    assert_responsive(ed)
    wait_event(ed, p, "reloaded")

    assert ed.nvim.input("u") == 1
    wait_lines(ed, p, lines_of(BASE))
    assert_responsive(ed)
    assert notes(ed) == []


def test_reload_in_a_path_with_spaces_and_unicode(nvim_factory, env_factory):
    ed = nvim_factory(_env=env_factory("proj ✓ é"))
    ws = Workspace(ed)
    p = ws.open("sub dir/dé mo ✓.txt", "héllo\nwörld 😀\n")
    timed_reload(ed, p, "héllo\nwörld 😀 ✓\n")
    assert not modified(ed)
    ev = wait_event(ed, p, "reloaded")
    assert ev["path"] == str(p)
    ed.nvim.command("undo")
    assert ed.buf_lines(p) == ["héllo", "wörld 😀"]


def test_cursor_stays_on_its_text(ws):
    ed = ws.ed
    p = ws.open("cursor.txt", BASE)
    win = ed.nvim.current.window
    win.cursor = (6, 3)  # "line 6", column 3
    # two lines inserted above the cursor, one changed below it
    new = BASE.replace("line 2\n", "line 2\nnew a\nnew b\n").replace("line 9\n", "line nine\n")
    timed_reload(ed, p, new)
    assert tuple(win.cursor) == (8, 3), win.cursor
    assert ed.nvim.current.line == "line 6"

    # a change below the cursor leaves it where it is
    newer = new.replace("line 11\n", "line eleven\n")
    timed_reload(ed, p, newer)
    assert tuple(win.cursor) == (8, 3), win.cursor


def test_multi_hunk_change_keeps_a_mark_between_the_hunks(ws):
    ed = ws.ed
    p = ws.open("marks.txt", BASE)
    ed.nvim.command("6")
    ed.nvim.command("normal! ma")
    ed.nvim.command("12")
    ed.nvim.command("normal! mb")
    assert ed.nvim.call("line", "'a") == 6
    # hunk 1: line 2 changed and a line inserted after it; hunk 2: line 10 changed
    new = BASE.replace("line 2\n", "line two\ninserted\n").replace("line 10\n", "line ten\n")
    timed_reload(ed, p, new)
    lines = ed.buf_lines(p)
    assert lines[6] == "line 6"
    assert ed.nvim.call("line", "'a") == 7, "mark 'a must stay on its (untouched) line"
    assert ed.nvim.call("line", "'b") == 13, "mark 'b must stay on its (untouched) line"
    assert not modified(ed)

    ed.nvim.command("undo")  # both hunks are one undo step
    assert ed.buf_lines(p) == lines_of(BASE)
    assert ed.nvim.call("line", "'a") == 6


def test_reload_latency(ws):
    """The buffer shows the disk's text within RELOAD_TARGET of the write."""
    ed = ws.ed
    p = ws.open("latency.txt", BASE)
    samples = []
    for i in range(12):
        writer = agent_write if i % 2 == 0 else inplace_write
        samples.append(timed_reload(ed, p, BASE + f"version {i}\n", writer))
        time.sleep(0.05)
    summary = latency_summary(samples)
    print(f"\nreload latency ({summary}); all tests so far: {latency_summary(LATENCIES)}")
    assert statistics.median(samples) <= RELOAD_TARGET, summary
    assert max(samples) <= 2.5 * RELOAD_TARGET, summary
    assert not modified(ed)
    ed.nvim.command("undo")
    assert ed.buf_lines(p) == lines_of(BASE + "version 10\n")


def test_burst_of_writes_ends_with_the_last_version(ws):
    ed = ws.ed
    p = ws.open("burst.txt", BASE)
    last = None
    t0 = time.monotonic()
    for i in range(30):
        last = f"burst {i}\n" + BASE + ("x" * i) + "\n"
        (agent_write if i % 3 else inplace_write)(p, last)
        time.sleep(0.003)
    elapsed = time.monotonic() - t0
    assert elapsed < 0.5, f"the burst itself took {elapsed:.3f} s"
    wait_lines(ed, p, lines_of(last))
    quiet(0.3)
    assert ed.buf_lines(p) == lines_of(last)
    assert not modified(ed)
    assert notes(ed) == []
    assert all(e.get("reloaded") for e in fw_events(ed, p)), fw_events(ed, p)
    assert_responsive(ed)


# ---------------------------------------------------------------- unsaved changes


def make_conflict(ws, rel="conflict.txt"):
    """An open file with an unsaved user change, then written by the agent."""
    ed = ws.ed
    p = ws.open(rel, BASE)
    user_edit(ed, 0, "user's unsaved line")
    mine = ed.buf_lines(p)
    disk = BASE.replace("line 5\n", "agent's line 5\n")
    agent_write(p, disk)
    wait_event(ed, p, "conflict")
    return p, mine, disk


def test_unsaved_changes_are_kept_and_reported_once(ws):
    ed = ws.ed
    p, mine, disk = make_conflict(ws)
    buf = ed.bufnr(p)
    for i in range(3):  # more outside writes, in both styles
        n = len(fw_events(ed, p))
        disk = disk + f"agent again {i}\n"
        (inplace_write if i % 2 else agent_write)(p, disk)
        wait_event(ed, p, "conflict", since=n)
    quiet(0.2)

    assert ed.buf_lines(p) == mine, "the unsaved text must stay in the buffer"
    assert modified(ed)
    assert conflict_var(ed) is True
    about = notes_about(ed, p)
    assert len(about) == 1, f"expected one message about {p}, got {notes(ed)!r}"
    evs = fw_events(ed, p)
    assert evs and all(e == {"path": str(p), "buf": buf, "conflict": True} for e in evs), evs
    assert p.read_text() == disk, "nothing may be written to disk"
    assert_responsive(ed)


def test_amp_diff_shows_buffer_and_disk_in_diff_mode(ws):
    ed = ws.ed
    p, mine, disk = make_conflict(ws, "diffme.txt")
    buf = ed.bufnr(p)
    ed.nvim.command("Amp diff")
    wins = ed.lua(
        """
        local out = {}
        for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
          local b = vim.api.nvim_win_get_buf(w)
          table.insert(out, { buf = b, name = vim.api.nvim_buf_get_name(b),
                              diff = vim.wo[w].diff,
                              lines = vim.api.nvim_buf_get_lines(b, 0, -1, false) })
        end
        return out
        """)
    assert len(wins) == 2, wins
    assert all(w["diff"] for w in wins), wins
    by_name = {w["name"]: w for w in wins}
    assert str(p) in by_name and by_name[str(p)]["buf"] == buf, wins
    disk_view = by_name.get("amp://disk/" + str(p))
    assert disk_view is not None, wins
    assert disk_view["lines"] == lines_of(disk), (
        "the disk view must show exactly the file's lines (an extra empty last line "
        "makes the diff show a change that is not there)")
    assert by_name[str(p)]["lines"] == mine
    assert ed.buf_lines(p) == mine and modified(ed)
    assert_responsive(ed)


def test_amp_take_loads_the_disk_text_undoably(ws):
    ed = ws.ed
    p, mine, disk = make_conflict(ws, "take.txt")
    ed.nvim.command("Amp take")
    wait_lines(ed, p, lines_of(disk))
    wait_until(lambda: not modified(ed), "the buffer to be unmodified after :Amp take")
    wait_until(lambda: conflict_var(ed) is None, "b:amp_disk_conflict to be cleared")
    assert_responsive(ed)
    ed.nvim.command("undo")
    assert ed.buf_lines(p) == mine, "one :undo must bring back the user's text"
    assert p.read_text() == disk


def test_amp_keep_writes_the_buffer_over_the_disk(ws):
    ed = ws.ed
    p, mine, disk = make_conflict(ws, "keep.txt")
    n_events, n_notes = len(fw_events(ed, p)), len(notes(ed))
    ed.nvim.command("Amp keep")
    assert p.read_text() == "\n".join(mine) + "\n"
    assert not modified(ed)
    assert conflict_var(ed) is None
    assert_responsive(ed)
    quiet(0.3)
    # Neovim's own write is not an outside change
    assert fw_events(ed, p)[n_events:] == []
    assert notes(ed)[n_notes:] == []
    assert ed.buf_lines(p) == mine
    # and the file is still watched
    timed_reload(ed, p, BASE)
    wait_event(ed, p, "reloaded", since=n_events)


def test_diff_take_keep_without_a_conflict_say_so_and_do_nothing(ws):
    """A buffer whose file did not change on disk under its unsaved
    changes: :Amp diff opens no (identical) diff and leaves no window,
    :Amp keep writes nothing, :Amp take loads nothing; each says in one
    line that there is nothing to settle."""
    ed = ws.ed
    p = ws.open("calm.txt", BASE)
    user_edit(ed, 0, "user's unsaved line")
    mine = ed.buf_lines(p)
    before = p.stat().st_mtime_ns
    n = len(notes(ed))
    wins = ed.lua("return #vim.api.nvim_tabpage_list_wins(0)")
    bufs = ed.lua("return #vim.api.nvim_list_bufs()")
    for cmd in ("Amp diff", "Amp keep", "Amp take"):
        ed.nvim.command(cmd)
    quiet(0.3)
    assert [x["msg"] for x in notes(ed)[n:]] == [
        "amp: nothing to settle: calm.txt did not change on disk while it had unsaved changes"] * 3
    assert ed.lua("return #vim.api.nvim_tabpage_list_wins(0)") == wins
    assert ed.lua("return #vim.api.nvim_list_bufs()") == bufs
    assert ed.lua("return vim.wo.diff") is False
    assert p.stat().st_mtime_ns == before and p.read_text() == BASE
    assert ed.buf_lines(p) == mine and modified(ed)


def test_plain_write_asks_before_overwriting_the_agents_text(ws):
    """Neovim still knows the old timestamp: `:write` warns and asks (W13-like
    "changed since reading it") instead of silently clobbering the disk."""
    ed = ws.ed
    p, mine, disk = make_conflict(ws, "clobber.txt")

    def disk_untouched_while_asking():
        assert p.read_text() == disk

    out = write_answering(ed, "write", "n", during_prompt=disk_untouched_while_asking)
    assert out["prompted"], (
        f"`:write` did not ask before overwriting the agent's text ({out!r}); "
        f"the disk now holds {p.read_text()!r}")
    assert p.read_text() == disk, "the agent's text must survive a refused :write"
    assert "changed since reading" in ed.messages()
    assert ed.buf_lines(p) == mine and modified(ed)
    assert_responsive(ed)


# ---------------------------------------------------------------- our own writes


def test_edit_file_is_not_an_outside_change(ws):
    ed = ws.ed
    p = ws.open("edited.txt", BASE)
    c = ed.connect()
    want = lines_of(BASE)
    for i in range(5):
        if i % 2 == 0:
            result = c.call("editFile", {"path": str(p),
                                         "fullContent": "\n".join(want) + f"\nedit {i}\n"})
            want = want + [f"edit {i}"]
        else:
            # the first line, by offsets into the file's text
            result = c.call("editFile", {"path": str(p), "start": 0, "end": len(want[0]),
                                         "newText": f"LINE {i}"})
            want = [f"LINE {i}"] + want[1:]
        assert result.get("success") is True, result
        # the user types right after the edit
        user_edit(ed, len(want) - 1, want[-1] + " (user)")
        want = want[:-1] + [want[-1] + " (user)"]
        quiet(0.3)
        assert ed.buf_lines(p) == want
        assert modified(ed)
        # `:write!`: whether a plain `:write` asks here is
        # test_write_after_edit_file_does_not_ask's business
        ed.nvim.command("write!")
        assert not modified(ed)
    quiet(0.2)
    assert fw_events(ed, p) == [], fw_events(ed, p)
    assert notes(ed) == []
    assert conflict_var(ed) is None
    assert_responsive(ed)


def test_edit_file_then_user_change_without_saving(ws):
    ed = ws.ed
    p = ws.open("edited2.txt", BASE)
    c = ed.connect()
    result = c.call("editFile", {"path": str(p), "fullContent": BASE + "from the agent\n"})
    assert result.get("success") is True, result
    user_edit(ed, 0, "typed right after")
    quiet()
    assert ed.buf_lines(p)[0] == "typed right after"
    assert ed.buf_lines(p)[-1] == "from the agent"
    assert [e for e in fw_events(ed, p) if e.get("conflict")] == []
    assert notes(ed) == []
    assert conflict_var(ed) is None
    # the disk holds the edit (not the unsaved typing)
    assert p.read_text() == BASE + "from the agent\n"


def test_neovim_write_is_not_reported(ws):
    ed = ws.ed
    p = ws.open("saved.txt", BASE)
    for i in range(3):
        user_edit(ed, i, f"saved by nvim {i}")
        ed.nvim.command("write")
        assert not modified(ed)
    quiet()
    assert fw_events(ed, p) == [], fw_events(ed, p)
    assert notes(ed) == []
    # the file is still watched after Neovim's own writes
    timed_reload(ed, p, BASE)
    wait_event(ed, p, "reloaded")


def test_write_after_a_reload_does_not_ask(ws):
    """The agent's text is in the buffer: the user's next `:w` is an ordinary
    write, not a "changed since reading it" prompt."""
    ed = ws.ed
    p = ws.open("reload-then-write.txt", BASE)
    timed_reload(ed, p, BASE + "agent\n")
    wait_event(ed, p, "reloaded")
    user_edit(ed, 0, "user after the reload")
    out = write_answering(ed, "write", "n")
    assert not out["prompted"], (
        "after the buffer took the agent's text, :write asked \"The file has been changed "
        f"since reading it\" ({ed.messages().splitlines()[-3:]!r})")
    assert out["result"] == [True, ""], out
    assert p.read_text() == "user after the reload\n" + BASE[len("line 1\n"):] + "agent\n"
    assert not modified(ed)


def test_write_after_edit_file_does_not_ask(ws):
    ed = ws.ed
    p = ws.open("edit-then-write.txt", BASE)
    c = ed.connect()
    result = c.call("editFile", {"path": str(p), "fullContent": BASE + "from the agent\n"})
    assert result.get("success") is True, result
    user_edit(ed, 0, "user after the edit")
    out = write_answering(ed, "write", "n")
    assert not out["prompted"], (
        "after editFile, :write asked \"The file has been changed since reading it\" "
        f"({ed.messages().splitlines()[-3:]!r})")
    assert p.read_text() == "user after the edit\n" + BASE[len("line 1\n"):] + "from the agent\n"
    quiet(0.3)
    assert [e for e in fw_events(ed, p) if e.get("conflict")] == []
    assert notes(ed) == []


# ---------------------------------------------------------------- deleted / moved away


@pytest.mark.parametrize("how", ["deleted", "renamed"])
def test_file_removed_by_the_agent_keeps_the_buffer(ws, how):
    ed = ws.ed
    p = ws.open(f"gone-{how}.txt", BASE)
    buf = ed.bufnr(p)
    ed.nvim.command("let v:errmsg = ''")
    if how == "deleted":
        os.remove(p)
    else:
        os.rename(p, p.with_name("moved-away.txt"))
    ev = wait_event(ed, p, "deleted")
    assert ev == {"path": str(p), "buf": buf, "deleted": True}, ev
    quiet(0.3)
    assert ed.buf_lines(p) == lines_of(BASE)
    assert len(notes_about(ed, p)) == 1, notes(ed)
    assert [e for e in fw_events(ed, p) if not e.get("deleted")] == []
    assert ed.nvim.eval("v:errmsg") == ""
    assert errors_in_messages(ed) == []
    assert ed.nvim.current.buffer.number == buf
    assert_responsive(ed)
    assert not p.exists()


# ---------------------------------------------------------------- switched off


def test_watch_disabled_leaves_the_buffer_alone(nvim_factory):
    ed = nvim_factory(watch={"enabled": False})
    ws = Workspace(ed)
    p = ws.file("off.txt", BASE)
    ed.edit(p)
    time.sleep(0.2)  # (no watcher to wait for)
    agent_write(p, "changed by the agent\n")
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        assert ed.buf_lines(p) == lines_of(BASE), "the buffer changed with watch.enabled = false"
        time.sleep(0.02)
    inplace_write(p, "changed again\n")
    quiet()
    assert ed.buf_lines(p) == lines_of(BASE)
    assert fw_events(ed) == []
    assert notes(ed) == []
