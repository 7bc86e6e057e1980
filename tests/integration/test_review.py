"""Reviews of agents' changes (lua/amp/review/), in a real Neovim:
Amp's editFile under `review.edit_file` (offered without taking the
keyboard, opened with :Amp review, decided as a whole or hunk by hunk with
the keys users press), and `:Amp review` of changes an agent made on disk,
whose reverts are written by Neovim's own :write."""

import time

import pytest

from conftest import wait_for
from review_helpers import buffer_count, messages, open_review, press, shown_window, tabs, wait_proposals, winbar


def record_events(ed) -> None:
    ed.lua("""
        _G.amp_review_events = {}
        vim.api.nvim_create_autocmd('User', { pattern = 'AmpReview*', callback = function(ev)
          table.insert(_G.amp_review_events, { ev.match, ev.data })
        end })
    """)


def events(ed) -> list[str]:
    return [e[0] for e in ed.lua("return _G.amp_review_events") or []]


# ---------------------------------------------------------------- editFile under review


@pytest.fixture
def reviewed(nvim_factory):
    ed = nvim_factory(review={"edit_file": True, "timeout_ms": 60000})
    record_events(ed)
    return ed


def test_edit_file_is_decided_hunk_by_hunk_with_the_keys(reviewed):
    ed = reviewed
    path = ed.env.workspace / "dos.txt"
    path.write_bytes(b"one\r\ntwo\r\nthree\r\nfour\r\nfive\r\n")
    c = ed.connect()
    rid = c.send_request("editFile", {"path": str(path), "fullContent": "ONE\r\ntwo\r\nthree\r\nfour\r\nFIVE\r\n"})
    assert [(p["agent"], p["rel"]) for p in wait_proposals(ed, 1)] == [("Amp", "dos.txt")]
    assert tabs(ed) == 1, "a proposal is not shown until the user opens it"
    win = open_review(ed, "dos.txt (proposed by Amp)")
    assert tabs(ed) == 2
    # The agent waits: nothing is written before the user decides.
    time.sleep(0.3)
    assert path.read_bytes() == b"one\r\ntwo\r\nthree\r\nfour\r\nfive\r\n"
    press(ed, win, 1, "ga")  # keep ONE
    assert tabs(ed) == 2, "one hunk is still undecided"
    press(ed, win, 5, "gr")  # five stays five
    resp = c.recv_response(rid, timeout=10)
    result = resp["editFile"]
    assert result["success"] is True, result
    assert result["content"] == "ONE\r\ntwo\r\nthree\r\nfour\r\nfive\r\n", result
    # Written as :w writes a 'fileformat' dos buffer.
    assert path.read_bytes() == b"ONE\r\ntwo\r\nthree\r\nfour\r\nfive\r\n"
    wait_for(lambda: tabs(ed) == 1, 5, "the review to close")
    assert "AmpReviewOpened" in events(ed) and "AmpReviewDecided" in events(ed), events(ed)
    # Accepted in a review: not counted again as an unreviewed change.
    time.sleep(0.2)
    assert ed.lua("return require('amp.review').count()") == 0


def test_edit_file_accepted_with_w_keeps_the_users_own_edits(reviewed):
    ed = reviewed
    path = ed.env.workspace / "a.py"
    path.write_text("x = 1\ny = 2\n")
    c = ed.connect()
    rid = c.send_request("editFile", {"path": str(path), "fullContent": "x = 10\ny = 2\n"})
    win = open_review(ed, "(proposed by Amp)")
    ed.lua("vim.api.nvim_set_current_win(...)", win)
    ed.lua("vim.api.nvim_buf_set_lines(0, 1, 2, false, { 'y = 20  # mine' })")
    ed.nvim.command("write")
    result = c.recv_response(rid, timeout=10)["editFile"]
    assert result["success"] is True and result["content"] == "x = 10\ny = 20  # mine\n", result
    assert path.read_text() == "x = 10\ny = 20  # mine\n"


def test_edit_file_rejected_with_q_changes_nothing(reviewed):
    ed = reviewed
    path = ed.env.workspace / "keep.txt"
    path.write_bytes(b"keep me\n")
    c = ed.connect()
    rid = c.send_request("editFile", {"path": str(path), "fullContent": "lost\n"})
    win = open_review(ed, "(proposed by Amp)")
    ed.lua("vim.api.nvim_set_current_win(...)", win)
    ed.nvim.command("quit")
    result = c.recv_response(rid, timeout=10)["editFile"]
    assert result["success"] is False and "rejected" in result["message"], result
    assert path.read_bytes() == b"keep me\n"
    wait_for(lambda: tabs(ed) == 1, 5, "the review to close")


def test_every_hunk_rejected_is_a_rejection(reviewed):
    ed = reviewed
    path = ed.env.workspace / "r.txt"
    path.write_text("a\nb\n")
    c = ed.connect()
    rid = c.send_request("editFile", {"path": str(path), "fullContent": "a\nB\n"})
    win = open_review(ed, "(proposed by Amp)")
    press(ed, win, 2, "gr")
    result = c.recv_response(rid, timeout=10)["editFile"]
    assert result["success"] is False and "rejected" in result["message"], result
    assert path.read_text() == "a\nb\n"


def test_an_undecided_review_times_out_and_closes(nvim_factory):
    ed = nvim_factory(review={"edit_file": True, "timeout_ms": 1000})
    path = ed.env.workspace / "slow.txt"
    path.write_text("old\n")
    c = ed.connect()
    rid = c.send_request("editFile", {"path": str(path), "fullContent": "new\n"})
    open_review(ed, "(proposed by Amp)")
    result = c.recv_response(rid, timeout=10)["editFile"]
    assert result["success"] is False and "within 1 s" in result["message"], result
    assert path.read_text() == "old\n"
    wait_for(lambda: tabs(ed) == 1, 5, "the review to close")
    # The user is told, in one line.
    wait_for(lambda: "amp: Amp's proposal timed out: slow.txt closed (nothing written)" in ed.messages(), 5,
             "the timeout's line")
    assert ed.lua("return #require('amp.review').proposals()") == 0


def test_the_keys_are_configurable_and_buffer_local(nvim_factory):
    ed = nvim_factory(review={"edit_file": True, "keys": {"accept_hunk": "<leader>y", "reject_hunk": False}})
    path = ed.env.workspace / "k.txt"
    path.write_text("a\n")
    c = ed.connect()
    rid = c.send_request("editFile", {"path": str(path), "fullContent": "b\n"})
    win = open_review(ed, "(proposed by Amp)")
    maps = ed.lua("""
        vim.api.nvim_set_current_win(...)
        local out = {}
        for _, m in ipairs(vim.api.nvim_buf_get_keymap(0, 'n')) do out[#out + 1] = m.lhs end
        return out""", win)
    assert "gr" not in maps and "gA" in maps, maps
    ed.lua("vim.cmd.tabfirst()")
    assert ed.lua("return vim.fn.maparg('gA', 'n')") == "", "the keys exist only in the review's buffers"
    press(ed, win, 1, "\\y")
    assert c.recv_response(rid, timeout=10)["editFile"]["success"] is True
    assert path.read_text() == "b\n"


# ---------------------------------------------------------------- :Amp review of changes on disk


def agent_writes(ed, path, data: bytes, expect_first_line: str) -> None:
    """Writes `data` as an agent would, until the buffer has taken it in: the
    watcher starts watching a buffer's file a moment after it is loaded,
    and a write before that is not an outside change it sees."""
    deadline = time.monotonic() + 10
    while True:
        path.write_bytes(data)
        try:
            wait_for(lambda: (ed.buf_lines(path) or [None])[0] == expect_first_line, 0.5, "the buffer")
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise AssertionError(f"the buffer of {path} never took in the agent's change") from None


def test_amp_review_reverts_a_hunk_with_write_and_keeps_another(nvim_factory):
    ed = nvim_factory()
    record_events(ed)
    path = ed.env.workspace / "crlf.txt"
    path.write_bytes(b"\xef\xbb\xbfalpha\r\nbeta\r\ngamma\r\ndelta")  # BOM, CRLF, no final EOL
    ed.edit(path)
    assert ed.lua("return require('amp.review').count()") == 0
    agent_writes(ed, path, b"\xef\xbb\xbfALPHA\r\nbeta\r\ngamma\r\nDELTA", "ALPHA")
    wait_for(lambda: ed.lua("return require('amp.review').count()") == 1, 5, "the change to be counted")
    assert "AmpReviewChanged" in events(ed), events(ed)
    assert "1 to review" in ed.lua("return require('amp').statusline()")

    ed.nvim.command("Amp review")
    wait_for(lambda: tabs(ed) == 2, 5, "the review tab")
    win = ed.lua("""
        for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
          if vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(win)) == ... then return win end
        end""", str(path))
    assert win, "the file's own buffer is the review's right side"
    press(ed, win, 1, "gr")  # revert ALPHA
    # Written by :write, as the user's :w writes it: BOM and CRLF kept, and
    # with 'fixendofline' (the default) the final line gets its EOL.
    assert path.read_bytes() == b"\xef\xbb\xbfalpha\r\nbeta\r\ngamma\r\nDELTA\r\n"
    assert ed.lua("return vim.bo[vim.fn.bufnr(...)].modified", str(path)) is False
    assert tabs(ed) == 2, "DELTA is not decided yet"
    press(ed, win, 4, "ga")  # keep DELTA
    wait_for(lambda: tabs(ed) == 1, 5, "the review to end")
    assert ed.lua("return require('amp.review').count()") == 0
    assert "AmpReviewDone" in events(ed), events(ed)
    assert "to review" not in ed.lua("return require('amp').statusline()")
    assert path.read_bytes() == b"\xef\xbb\xbfalpha\r\nbeta\r\ngamma\r\nDELTA\r\n"
    # The buffer-local keys went with the review.
    left = ed.lua("""
        local out = {}
        for _, m in ipairs(vim.api.nvim_buf_get_keymap(vim.fn.bufnr(...), 'n')) do out[#out + 1] = m.lhs end
        return out""", str(path))
    assert "gr" not in left and "ga" not in left, left


def test_amp_review_lists_files_and_reverts_all(nvim_factory):
    ed = nvim_factory()
    a, b = ed.env.workspace / "a.txt", ed.env.workspace / "b.txt"
    a.write_text("a1\na2\n")
    b.write_text("b1\n")
    ed.edit(a)
    ed.edit(b)
    agent_writes(ed, a, b"A1\na2\n", "A1")
    agent_writes(ed, b, b"B1\n", "B1")
    wait_for(lambda: ed.lua("return require('amp.review').count()") == 2, 5, "two changes")
    assert ed.lua("return vim.fn.getcompletion('Amp review ', 'cmdline')") == ["a.txt", "b.txt"]
    ed.lua("""
        vim.ui.select = function(items, opts, on_choice)
          _G.amp_offered = vim.tbl_map(opts.format_item, items)
          on_choice(items[2])
        end""")
    ed.nvim.command("Amp review")
    assert ed.lua("return _G.amp_offered") == ["a.txt", "b.txt"]
    wait_for(lambda: tabs(ed) == 2, 5, "the review of b.txt")
    ed.nvim.command("normal gR")
    wait_for(lambda: tabs(ed) == 1, 5, "the review to end")
    assert b.read_text() == "b1\n" and a.read_text() == "A1\na2\n"
    assert ed.lua("return require('amp.review').pending()") == [str(a)]


def test_amp_review_with_nothing_to_review_says_so(nvim_factory):
    ed = nvim_factory()
    ed.nvim.command("Amp review")
    assert "amp: nothing to review (no proposals, no unreviewed changes)" in ed.messages()


def test_a_revert_never_writes_the_users_unsaved_text(nvim_factory):
    ed = nvim_factory()
    path = ed.env.workspace / "u.txt"
    path.write_text("one\ntwo\n")
    ed.edit(path)
    agent_writes(ed, path, b"ONE\ntwo\n", "ONE")
    wait_for(lambda: ed.lua("return require('amp.review').count()") == 1, 5, "the change")
    ed.nvim.command("Amp review")
    wait_for(lambda: tabs(ed) == 2, 5, "the review tab")
    win = ed.lua("return vim.fn.bufwinid(...)", str(path))
    ed.lua("vim.api.nvim_buf_set_lines(vim.fn.bufnr(...), 1, 2, false, { 'mine' })", str(path))
    press(ed, win, 1, "gr")
    assert "unsaved changes" in ed.messages()
    assert path.read_text() == "ONE\ntwo\n"
    assert ed.buf_lines(path) == ["ONE", "mine"]


def test_stopping_the_server_closes_its_pending_reviews(reviewed):
    ed = reviewed
    path = ed.env.workspace / "s.txt"
    path.write_text("old\n")
    c = ed.connect()
    c.send_request("editFile", {"path": str(path), "fullContent": "new\n"})
    open_review(ed, "(proposed by Amp)")
    ed.nvim.command("Amp stop")
    wait_for(lambda: tabs(ed) == 1, 5, "the review to close with the server")
    assert ed.lua("return vim.tbl_count(require('amp.review').reviews)") == 0
    assert path.read_text() == "old\n"


def test_a_proposal_for_a_buffer_with_unsaved_changes_says_so_and_loses_nothing(reviewed):
    ed = reviewed
    path = ed.env.workspace / "dirty.txt"
    path.write_text("one\ntwo\n")
    ed.edit(path)
    ed.lua("vim.api.nvim_buf_set_lines(0, 1, 2, false, { 'two (unsaved)' })")
    c = ed.connect()
    # readFile's text (the buffer's, unsaved change included) is the left side.
    rid = c.send_request("editFile", {"path": str(path), "fullContent": "ONE\ntwo (unsaved)\n"})
    win = open_review(ed, "(proposed by Amp)")
    assert "unsaved changes" in winbar(ed, win)
    ed.lua("vim.api.nvim_set_current_win(...)", win)
    ed.nvim.command("write")
    result = c.recv_response(rid, timeout=10)["editFile"]
    assert result["success"] is True, result
    # The user's unsaved line went through the review and is on disk now.
    assert path.read_text() == "ONE\ntwo (unsaved)\n"


def test_edits_through_the_server_count_as_unreviewed_changes(nvim_factory):
    ed = nvim_factory()
    path = ed.env.workspace / "e.txt"
    path.write_text("before\n")
    c = ed.connect()
    assert c.call("editFile", {"path": str(path), "fullContent": "after\n"})["success"] is True
    wait_for(lambda: ed.lua("return require('amp.review').count()") == 1, 5, "the edit to be counted")
    ed.nvim.command("Amp review")
    wait_for(lambda: tabs(ed) == 2, 5, "the review tab")
    left = ed.lua("""
        for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
          local buf = vim.api.nvim_win_get_buf(win)
          if vim.api.nvim_buf_get_name(buf):find('(before the change)', 1, true) then
            return vim.api.nvim_buf_get_lines(buf, 0, -1, false)
          end
        end""")
    assert left == ["before"]
    ed.nvim.command("normal gR")
    wait_for(lambda: tabs(ed) == 1, 5, "the review to end")
    assert path.read_text() == "before\n"
    # The agent's next read sees the reverted text.
    assert c.call("readFile", {"path": str(path)})["content"] == "before\n"


# ---------------------------------------------------------------- proposals never take the keyboard


def test_q_in_a_proposal_rejects_it_even_after_the_user_edited_it(reviewed):
    ed = reviewed
    path = ed.env.workspace / "q.txt"
    path.write_text("keep\n")
    c = ed.connect()
    rid = c.send_request("editFile", {"path": str(path), "fullContent": "theirs\n"})
    win = open_review(ed, "q.txt (proposed by Amp)")
    ed.lua("vim.api.nvim_set_current_win(...)", win)
    ed.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, { 'theirs, edited' })")
    assert ed.lua("return vim.bo.modified") is True
    ed.nvim.command("quit")  # no E37
    result = c.recv_response(rid, timeout=10)["editFile"]
    assert result["success"] is False and "rejected" in result["message"], result
    assert path.read_text() == "keep\n"
    wait_for(lambda: tabs(ed) == 1, 5, "the review to close")
    assert "E37" not in ed.messages()


def test_proposals_arriving_in_the_command_line_window_wait_and_leak_no_buffer(reviewed):
    ed = reviewed
    files = [ed.env.workspace / f"f{i}.txt" for i in range(20)]
    for f in files:
        f.write_text("old\n")
    big = "a proposed line of text\n" * (1024 * 1024 // 24)
    ed.nvim.input("q:")
    wait_for(lambda: ed.lua("return vim.fn.getcmdwintype()") == ":", 5, "the command-line window")
    buffers = buffer_count(ed)
    c = ed.connect()
    rids = {c.send_request("editFile", {"path": str(f), "fullContent": big}): f for f in files}
    wait_proposals(ed, 20, timeout=30)
    # Waiting: no buffer made, no error, the command-line window still open.
    assert buffer_count(ed) == buffers
    assert ed.lua("return vim.fn.getcmdwintype()") == ":"
    assert "20 proposals" in ed.lua("return require('amp').statusline()")
    # Opening one from inside it is refused with the reason, and makes nothing.
    ed.lua("require('amp.review').command('f3.txt')")
    assert "close it, then :Amp review" in messages(ed)
    assert buffer_count(ed) == buffers
    ed.nvim.input(":quit<CR>")
    wait_for(lambda: ed.lua("return vim.fn.getcmdwintype()") == "", 5, "the command-line window to close")
    buffers = buffer_count(ed)
    win = open_review(ed, "f3.txt (proposed by Amp)", arg="f3.txt")
    ed.lua("vim.api.nvim_set_current_win(...)", win)
    ed.nvim.command("write")
    rid = next(r for r, f in rids.items() if f.name == "f3.txt")
    assert c.recv_response(rid, timeout=20)["editFile"]["success"] is True
    assert files[3].read_text() == big
    wait_for(lambda: buffer_count(ed) == buffers + 1, 5, "the review's buffers to go (f3.txt's is loaded now)")
    ed.nvim.command("Amp stop")
    wait_for(lambda: ed.lua("return #require('amp.review').proposals()") == 0, 5, "every proposal closed")
    assert buffer_count(ed) == buffers + 1


@pytest.mark.parametrize("layout", ["tab", "split", "inline"])
def test_each_layout_opens_and_decides_hunk_by_hunk(nvim_factory, layout):
    ed = nvim_factory(review={"edit_file": True, "timeout_ms": 60000, "layout": layout})
    path = ed.env.workspace / "l.txt"
    path.write_text("a\nb\nc\nd\ne\n")
    ed.edit(path)
    user_win = ed.lua("return vim.api.nvim_get_current_win()")
    user_buf = ed.bufnr(path)
    c = ed.connect()
    rid = c.send_request("editFile", {"path": str(path), "fullContent": "A\nb\nc\nd\nE\n"})
    win = open_review(ed, "l.txt (proposed by Amp)")
    assert win != user_win
    if layout == "tab":
        assert tabs(ed) == 2
    else:
        assert tabs(ed) == 1, "beside the current window, in its tab page"
        assert ed.lua("return vim.api.nvim_win_get_tabpage(...)", win) == ed.lua(
            "return vim.api.nvim_win_get_tabpage(...)", user_win)
    if layout == "split":
        # The user's window shows the old text beside the proposal, both in diff mode.
        assert ed.lua("return vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(...))", user_win).endswith(
            "l.txt (as it is)")
        assert ed.lua("return vim.wo[...].diff", user_win) is True and ed.lua("return vim.wo[...].diff", win) is True
    if layout == "inline":
        # One window: the proposal, the removed lines shown between its lines.
        assert ed.lua("return vim.api.nvim_win_get_buf(...)", user_win) == user_buf
        assert ed.lua("return vim.wo[...].diff", win) is False
        removed = ed.lua("""
            local buf = vim.api.nvim_win_get_buf(...)
            local out = {}
            for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, -1, 0, -1, { details = true })) do
              for _, chunks in ipairs(m[4].virt_lines or {}) do out[#out + 1] = chunks[1][1] end
            end
            return out""", win)
        assert removed == ["a", "e"], removed
    press(ed, win, 1, "ga")  # keep A
    press(ed, win, 5, "gr")  # e stays e
    result = c.recv_response(rid, timeout=10)["editFile"]
    assert result["success"] is True and result["content"] == "A\nb\nc\nd\ne\n", result
    assert path.read_text() == "A\nb\nc\nd\ne\n"
    wait_for(lambda: tabs(ed) == 1 and ed.lua("return #vim.api.nvim_list_wins()") == 1, 5, "the view to close")
    # The user's window is theirs again, showing their file.
    assert ed.lua("return vim.api.nvim_win_is_valid(...)", user_win) is True
    assert ed.lua("return vim.api.nvim_win_get_buf(...)", user_win) == user_buf
    assert "amp: every hunk decided: accepted Amp's change to l.txt" in ed.messages()


# ---------------------------------------------------------------- unsaved text survives


def test_accepting_amps_edit_keeps_an_unsaved_line_the_agent_did_not_know(reviewed):
    """The agent's text came from the disk (or an earlier read): the user's
    unsaved line is not in it. The review shows the proposal over the
    buffer, so that line is no hunk, and accepting keeps it."""
    ed = reviewed
    path = ed.env.workspace / "u.txt"
    path.write_text("one\ntwo\nthree\n")
    ed.edit(path)
    ed.lua("vim.api.nvim_buf_set_lines(0, 1, 1, false, { 'mine (unsaved)' })")
    c = ed.connect()
    rid = c.send_request("editFile", {"path": str(path), "fullContent": "one\ntwo\nTHREE\n"})
    win = open_review(ed, "u.txt (proposed by Amp)")
    sides = ed.lua("""
        local review = require('amp.review').reviews[next(require('amp.review').reviews)]
        return { vim.api.nvim_buf_get_lines(review.left, 0, -1, false),
                 vim.api.nvim_buf_get_lines(review.right, 0, -1, false) }""")
    assert sides == [["one", "mine (unsaved)", "two", "three"], ["one", "mine (unsaved)", "two", "THREE"]], sides
    ed.lua("vim.api.nvim_set_current_win(...)", win)
    ed.nvim.command("write")
    result = c.recv_response(rid, timeout=10)["editFile"]
    assert result["success"] is True, result
    assert path.read_text() == "one\nmine (unsaved)\ntwo\nTHREE\n"
    assert ed.buf_lines(path) == ["one", "mine (unsaved)", "two", "THREE"]


def test_reverting_everything_never_writes_or_drops_unsaved_text(nvim_factory):
    ed = nvim_factory()
    path = ed.env.workspace / "v.txt"
    path.write_text("one\ntwo\n")
    ed.edit(path)
    agent_writes(ed, path, b"ONE\ntwo\n", "ONE")
    wait_for(lambda: ed.lua("return require('amp.review').count()") == 1, 5, "the change")
    open_review(ed, "v.txt")
    ed.lua("vim.api.nvim_buf_set_lines(vim.fn.bufnr(...), 1, 2, false, { 'mine' })", str(path))
    ed.lua("vim.api.nvim_set_current_win(vim.fn.bufwinid(...))", str(path))
    ed.nvim.command("normal gR")
    assert "unsaved changes" in ed.messages()
    assert path.read_text() == "ONE\ntwo\n"
    assert ed.buf_lines(path) == ["ONE", "mine"]
    assert tabs(ed) == 2, "the review stays open"


def test_the_open_key_opens_the_waiting_proposal_and_its_notice_names_it(nvim_factory):
    ed = nvim_factory(review={"edit_file": True, "timeout_ms": 60000, "open_key": "<leader>R"})
    path = ed.env.workspace / "k.txt"
    path.write_text("a\n")
    c = ed.connect()
    rid = c.send_request("editFile", {"path": str(path), "fullContent": "b\n"})
    wait_proposals(ed, 1)
    wait_for(lambda: "amp: Amp proposes a change to k.txt: <leader>R to open it" in ed.messages(), 5, "the notice")
    assert tabs(ed) == 1
    ed.nvim.command("normal \\R")
    win = shown_window(ed, "k.txt (proposed by Amp)")
    ed.lua("vim.api.nvim_set_current_win(...)", win)
    ed.nvim.command("write")
    assert c.recv_response(rid, timeout=10)["editFile"]["success"] is True
    assert path.read_text() == "b\n"


def test_a_proposal_of_many_slices_is_shown_and_accepted_whole(reviewed):
    """Filled from the native side in slices of 4096 lines / 256 KiB: a
    proposal of 10000 lines (several slices, a long line among them) comes
    out of the view byte for byte."""
    ed = reviewed
    path = ed.env.workspace / "many.txt"
    old = "".join(f"line {i}\n" for i in range(9000))
    new = "".join(f"line {i}{' changed' if i % 1000 == 0 else ''}\n" for i in range(10000)) + "x" * 300000 + "\n"
    path.write_text(old)
    c = ed.connect()
    rid = c.send_request("editFile", {"path": str(path), "fullContent": new})
    win = open_review(ed, "many.txt (proposed by Amp)")
    assert ed.lua("return vim.api.nvim_buf_line_count(vim.api.nvim_win_get_buf(...))", win) == 10001
    ed.lua("vim.api.nvim_set_current_win(...)", win)
    ed.nvim.command("write")
    result = c.recv_response(rid, timeout=20)["editFile"]
    assert result["success"] is True and result["content"] == new
    assert path.read_text() == new
