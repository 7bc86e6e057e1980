"""OpenCtx client, end to end, with real parts only.

A real headless Neovim loads the plugin with `openctx.providers` pointing at
- a real HTTP provider (``http.server`` on 127.0.0.1:0, in a thread of the test),
- real ESM provider modules (tests/fixtures/openctx/provider-word.mjs,
  provider-slow.mjs) run by the plugin's real Node host,
- the real MCP server ``@modelcontextprotocol/server-everything``,
and the annotations it stores and draws are compared with what the official
client library (``@openctx/client`` 0.0.30, differential/reference.mjs)
returns for the same providers and documents.

Needs ``npm ci --prefix tests/fixtures/openctx`` (CI runs it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import file_uri
from context_helpers import connect_recorder
from openctx_helpers import (EVERYTHING, EVERYTHING_DOCS, FIXTURES, NODE_MODULES, REFERENCE_CLIENT, SLOW_PROVIDER,
                             WAIT, WORD_PROVIDER, HttpProvider, HttpReply, alive, all_mark_texts, children_with, mark_texts, marks,
                             module_uri, notes, occurrences, open_doc, plain_range, require_node_modules, result,
                             reconfigure, run_reference, screen_line, set_lines, shown_ranges, start, stored, titles,
                             tracked_buffers, utf16_index, utf16_len, utf16_to_byte, wait_marks, wait_stored,
                             word_route)

WORD = module_uri(WORD_PROVIDER)
SLOW = module_uri(SLOW_PROVIDER)


@pytest.fixture(autouse=True)
def _node_modules():
    require_node_modules(EVERYTHING, REFERENCE_CLIENT)


@pytest.fixture
def http_provider():
    p = HttpProvider()
    yield p
    p.close()


def wrapper_module(directory: Path, name: str, target: Path = WORD_PROVIDER) -> str:
    """A module of its own (its own provider URI) re-exporting a fixture provider."""
    directory.mkdir(parents=True, exist_ok=True)
    p = directory / name
    p.write_text(f"export {{ default }} from {json.dumps(module_uri(target))}\n", "utf-8")
    return module_uri(p)


def expected_word_annotations(uri: str, lines: list[str], label: str, word: str = "mark", *,
                              reverse: bool = False, tie: bool = False, whole_file: bool = False) -> list[dict]:
    """What provider-word.mjs answers, sorted as a client must sort it (stable, by start)."""
    out = []
    for i, line in enumerate(lines):
        for at in occurrences(line, word):
            c = utf16_index(line, at)
            r = {"start": {"line": i, "character": c}, "end": {"line": i, "character": c + utf16_len(word)}}
            out.append({"uri": uri, "range": r, "title": f"{label} {i}:{c}"})
            if tie:
                out.append({"uri": uri, "range": r, "title": f"{label} {i}:{c} (tie)"})
    if whole_file:
        out.append({"uri": uri, "range": None, "title": f"{label} whole file"})
    if reverse:
        out.reverse()
    key = lambda a: (a["range"]["start"]["line"], a["range"]["start"]["character"]) if a["range"] else (0, 0)
    return sorted(out, key=key)


def simple(annotations: list[dict]) -> list[dict]:
    return [{"uri": a["uri"], "range": plain_range(a.get("range")), "title": a["item"]["title"]}
            for a in annotations]


def wait_scratch(ed, name: str, timeout: float = 8) -> int:
    """The buffer named ``name`` (an amp://context/ scratch buffer), waited for."""
    deadline = time.monotonic() + timeout
    while True:
        buf = ed.lua("""
            for _, b in ipairs(vim.api.nvim_list_bufs()) do
              if vim.api.nvim_buf_get_name(b) == ... then return b end
            end
            return -1
        """, name)
        if buf != -1:
            return buf
        assert time.monotonic() < deadline, (f"no buffer {name!r} within {timeout} s",
                                             ed.lua("return amp_t.selects"), ed.messages())
        time.sleep(0.05)


def line_text(*titles_on_line: str) -> str:
    """The virtual text of a line: titles joined with " · " after one space."""
    return " " + " · ".join(titles_on_line)


# --------------------------------------------------------------------------
# HTTP provider
# --------------------------------------------------------------------------


def test_http_provider_annotations_get_settings_unchanged_and_json_content_type(nvim_factory, http_provider):
    settings = {"token": "s3cret", "nested": {"n": 3, "list": ["a", "b"], "flag": False}, "unicode": "é→😀"}
    url = http_provider.route("/openctx", word_route(word="TODO", label="http"))
    ed = start(nvim_factory, {url: settings})
    lines = ["first", "a TODO here", "", "TODO at start and TODO again", "last"]
    path = ed.env.workspace / "notes.txt"
    path.write_text("\n".join(lines) + "\n", "utf-8")
    ed.edit(path)
    buf = ed.nvim.current.buffer.number

    got = wait_stored(ed, buf, lambda a: len(a) == 3)
    uri = file_uri(path)
    assert [(a["provider"], a["uri"]) for a in got] == [(url, uri)] * 3
    assert simple(got) == expected_word_annotations(uri, lines, "http", "TODO")
    assert got[0]["item"]["url"] == "https://example.com/http/1/2"
    assert got[0]["item"]["ui"]["hover"]["markdown"] == "*hover* of http at 1:2"
    assert wait_marks(ed, buf, lambda t: len(t) == 2) == {
        1: line_text("http 1:2"),
        3: line_text("http 3:0", "http 3:18"),
    }
    for m in marks(ed, buf):
        assert m["pos"] == "eol", m
        assert [c[1] for c in m["virt_text"]][:2] == ["AmpAnnotationSeparator", "AmpAnnotation"], m

    reqs = http_provider.seen("/openctx")
    methods = [r["body"]["method"] for r in reqs]
    assert methods[0] == "meta" and "annotations" in methods, methods
    for r in reqs:
        assert r["headers"].get("content-type", "").lower().replace(" ", "") == "application/json;charset=utf-8", r
        assert set(r["body"]) == {"method", "params", "settings"}, r["body"]
        assert r["body"]["settings"] == settings, r["body"]["settings"]
    ann = http_provider.seen("/openctx", "annotations")[-1]["body"]["params"]
    assert ann["uri"] == uri
    assert ann["content"] in ("\n".join(lines), "\n".join(lines) + "\n"), ann["content"]


def test_http_provider_mentions_and_context_reach_a_scratch_buffer(nvim_factory, http_provider):
    mentions = [{"title": "Alpha doc", "uri": "https://docs.example/alpha", "description": "first"},
                {"title": "Beta doc", "uri": "https://docs.example/beta"}]
    url = http_provider.route("/ctx", word_route(label="ctx", mentions=mentions, message_pattern=r"\bdeploy\w*"))
    ed = start(nvim_factory, {url: {"k": "v"}})
    ed.lua("amp_t.pick_first()")

    ed.nvim.command("Amp mention beta")
    scratch = wait_scratch(ed, "amp://context/Beta doc")
    assert ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", scratch) == [
        "content of https://docs.example/beta"]
    sel = ed.lua("return amp_t.selects")
    assert sel[0]["shown"] == ["Beta doc"] and sel[0]["prompt"] == "Search ctx", sel
    q = http_provider.seen("/ctx", "mentions")[-1]["body"]
    assert q["params"]["query"] == "beta" and q["settings"] == {"k": "v"}, q
    it = http_provider.seen("/ctx", "items")[-1]["body"]["params"]
    assert it["mention"]["uri"] == "https://docs.example/beta", it

    ed.lua("""
        _G.ctx_done = nil
        require('amp.openctx').context('how do we deploying things', function(w) _G.ctx_done = w end)
    """)
    deadline = time.monotonic() + 8
    while ed.lua("return _G.ctx_done") is None:
        assert time.monotonic() < deadline, ed.messages()
        time.sleep(0.05)
    assert ed.lua("return _G.ctx_done") == "scratch"
    lines = ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")
    assert lines == ["ctx knows about: how do we deploying things"], lines
    assert ed.lua("return vim.api.nvim_buf_get_name(0)").startswith("amp://context/")


# --------------------------------------------------------------------------
# ESM provider, UTF-16 positions, several on one line
# --------------------------------------------------------------------------

MULTIBYTE = [
    "plain mark here",
    "é mark after e-acute",
    "→→ mark after arrows",
    "😀 mark after an emoji, 😀😀 mark again",
    "no word here",
    "mixé→😀mark glued, 日本語 mark",
]


def test_esm_provider_utf16_positions_on_multibyte_lines(nvim_factory):
    ed = start(nvim_factory, {WORD: {"label": "esm"}})
    path = ed.env.workspace / "multi byte.txt"
    path.write_text("\n".join(MULTIBYTE) + "\n", "utf-8")
    ed.edit(path)
    buf = ed.nvim.current.buffer.number
    uri = file_uri(path)

    want = expected_word_annotations(uri, MULTIBYTE, "esm")
    got = wait_stored(ed, buf, lambda a: len(a) == len(want))
    assert simple(got) == want
    assert all(a["provider"] == WORD for a in got)

    # The stored positions are the protocol's (UTF-16), and converted by hand to
    # bytes they point at the word in the buffer's bytes.
    buf_lines = ed.nvim.current.buffer[:]
    assert buf_lines == MULTIBYTE
    for a in got:
        r = a["range"]
        line = MULTIBYTE[r["start"]["line"]]
        b0 = utf16_to_byte(line, r["start"]["character"])
        b1 = utf16_to_byte(line, r["end"]["character"])
        assert line.encode("utf-8")[b0:b1] == b"mark", (a, line, b0, b1)
    # Spot checks of the conversion itself (é 2 bytes/1 unit, → 3/1, 😀 4/2).
    assert [a["range"]["start"]["character"] for a in got if a["range"]["start"]["line"] == 3] == [3, 29]
    assert utf16_to_byte(MULTIBYTE[3], 29) == len("😀 mark after an emoji, 😀😀 ".encode("utf-8")) == 35
    assert [a["range"]["start"]["character"] for a in got if a["range"]["start"]["line"] == 5] == [7, 23]
    assert utf16_to_byte(MULTIBYTE[5], 7) == len("mixé→😀".encode("utf-8")) == 12

    by_line: dict[int, list[str]] = {}
    for a in want:
        by_line.setdefault(a["range"]["start"]["line"], []).append(a["title"])
    texts = wait_marks(ed, buf, lambda t: len(t) == len(by_line))
    assert texts == {line: line_text(*ts) for line, ts in by_line.items()}
    assert texts[3] == " esm 3:3 · esm 3:29"
    assert texts[5] == " esm 5:7 · esm 5:23"
    assert 4 not in texts


def test_quickfix_entries_jump_to_the_annotated_column(nvim_factory):
    """`:Amp annotations list` puts each annotation at its range start: line and
    byte column (converted from UTF-16), so jumping lands on the annotated text."""
    ed = start(nvim_factory, {WORD: {"label": "qf"}})
    path = ed.env.workspace / "qf.txt"
    path.write_text("\n".join(MULTIBYTE) + "\n", "utf-8")
    ed.edit(path)
    buf = ed.nvim.current.buffer.number
    want = expected_word_annotations(file_uri(path), MULTIBYTE, "qf")
    wait_stored(ed, buf, lambda a: len(a) == len(want))
    ed.nvim.command("Amp annotations list")
    qf = ed.nvim.funcs.getqflist()
    got = [(e["lnum"], e["col"]) for e in qf]
    expected = [(a["range"]["start"]["line"] + 1,
                 utf16_to_byte(MULTIBYTE[a["range"]["start"]["line"]], a["range"]["start"]["character"]) + 1)
                for a in want]
    assert got == expected, f"quickfix (lnum, col) {got} != expected (lnum, byte col + 1) {expected}"


# --------------------------------------------------------------------------
# merging several providers
# --------------------------------------------------------------------------


def test_results_merge_in_provider_uri_order_each_sorted_by_position(nvim_factory, http_provider, tmp_path):
    lines = ["mark one mark", "nothing", "two mark", "mark"]
    b = wrapper_module(tmp_path / "mods", "b-second.mjs")
    a = wrapper_module(tmp_path / "mods", "a-first.mjs")

    def reversed_annotations(params):
        out = []
        for i, line in enumerate(params["content"].split("\n")):
            for at in occurrences(line, "mark"):
                c = utf16_index(line, at)
                out.append({"uri": params["uri"],
                            "range": {"start": {"line": i, "character": c}, "end": {"line": i, "character": c + 4}},
                            "item": {"title": f"H {i}:{c}"}})
        return out[::-1]

    h = http_provider.route("/z", word_route(label="H", annotations=reversed_annotations))
    providers = {b: {"label": "B", "reverse": True, "tie": True}, h: True, a: {"label": "A", "reverse": True}}
    ed = start(nvim_factory, providers)
    path = "/w/merge.txt"
    buf = open_doc(ed, path, lines)
    uri = file_uri(path)
    want = (
        [dict(x, provider=a) for x in expected_word_annotations(uri, lines, "A", reverse=True)]
        + [dict(x, provider=b) for x in expected_word_annotations(uri, lines, "B", reverse=True, tie=True)]
        + [dict(x, provider=h) for x in expected_word_annotations(uri, lines, "H")]
    )
    assert sorted([a, b, h]) == [a, b, h]
    got = wait_stored(ed, buf, lambda x: len(x) == len(want))
    assert [dict(s, provider=g["provider"]) for s, g in zip(simple(got), got)] == want
    texts = wait_marks(ed, buf, lambda t: len(t) == 3)
    assert texts[0] == line_text("A 0:0", "A 0:9", "B 0:0 (tie)", "B 0:0", "B 0:9 (tie)", "B 0:9", "H 0:0", "H 0:9")
    assert texts[2] == line_text("A 2:4", "B 2:4 (tie)", "B 2:4", "H 2:4")
    assert texts[3] == line_text("A 3:0", "B 3:0 (tie)", "B 3:0", "H 3:0")


# --------------------------------------------------------------------------
# failures: hanging, garbage, a dead Node host
# --------------------------------------------------------------------------


def test_hanging_providers_delay_neither_the_others_nor_the_editor(nvim_factory, http_provider):
    """A module whose `annotations` never settles and an HTTP endpoint that never
    answers: the good provider's marks appear well before timeout_ms, and Neovim
    answers at once all along. The document is opened as a user opens it (:edit)."""
    hang_http = http_provider.route("/hang", lambda *a: HttpReply(hang=True))
    timeout_ms = 6000
    ed = start(nvim_factory, {SLOW: {"hang": True}, hang_http: True, WORD: {"label": "good"}},
               timeout_ms=timeout_ms)
    path = ed.env.workspace / "hang.txt"
    path.write_text("a mark\nb\n", "utf-8")
    t0 = time.monotonic()
    ed.edit(path)
    buf = ed.nvim.current.buffer.number

    # The editor answers at once while both providers hang.
    slowest = 0.0
    while time.monotonic() - t0 < 1.0:
        t = time.monotonic()
        assert ed.nvim.eval("1") == 1
        slowest = max(slowest, time.monotonic() - t)
        time.sleep(0.02)
    assert slowest < 0.25, f"nvim took {slowest:.3f} s to answer while providers hang"

    texts = wait_marks(ed, buf, lambda t: t.get(0) == " good 0:2", timeout=3 * timeout_ms / 1000 + 5)
    took = time.monotonic() - t0
    hang_calls = [(round(r["t"] - t0, 2), r["body"]["method"]) for r in http_provider.seen("/hang")]
    assert took < 2.0, (f"the good provider's annotation appeared after {took:.2f} s: it waited for the "
                        f"hanging providers (timeout_ms = {timeout_ms}); marks {texts!r}; "
                        f"calls to the hanging HTTP endpoint (s after :edit, method): {hang_calls}")


def test_garbage_answers_are_reported_once_and_skipped(nvim_factory, http_provider):
    def garbage(kind):
        def route(method, params, settings, req):
            if method == "meta":
                return result({"name": kind, "annotations": {}})
            if kind == "html":
                return HttpReply(200, "<html>this is not JSON</html>", "text/html")
            return HttpReply(body={"result": 5})
        return route

    html = http_provider.route("/html", garbage("html"))
    five = http_provider.route("/five", garbage("five"))
    ed = start(nvim_factory, {html: True, five: True, WORD: {"label": "ok"}})
    ed.lua("amp_t.record_notify()")

    buf = open_doc(ed, "/w/g.txt", ["mark 1"])
    wait_marks(ed, buf, lambda t: t == {0: " ok 0:0"})
    for n in range(2, 5):
        set_lines(ed, buf, [f"mark {n}", "mark"])
        got = wait_stored(ed, buf, lambda a: titles(a) == ["ok 0:0", "ok 1:0"], what=f"refresh {n}")
        assert {a["provider"] for a in got} == {WORD}
        wait_marks(ed, buf, lambda t: t == {0: " ok 0:0", 1: " ok 1:0"})
    deadline = time.monotonic() + 3
    while len(http_provider.seen("/html", "annotations")) < 4 or len(http_provider.seen("/five", "annotations")) < 4:
        assert time.monotonic() < deadline, http_provider.requests
        time.sleep(0.05)
    time.sleep(0.3)
    msgs = [n["msg"] for n in notes(ed)]
    about_html = [m for m in msgs if html in m]
    about_five = [m for m in msgs if five in m]
    assert len(about_html) == 1, "\n".join(msgs)
    assert len(about_five) == 1, "{\"result\": 5} reported %d times over 4 refreshes:\n%s" % (len(about_five), "\n".join(msgs))
    assert not [m for m in msgs if WORD in m], msgs


def test_killed_node_host_comes_back_on_the_next_refresh(nvim_factory):
    ed = start(nvim_factory, {WORD: {"label": "k"}})
    buf = open_doc(ed, "/w/kill.txt", ["mark before"])
    wait_marks(ed, buf, lambda t: t == {0: " k 0:0"})
    nvim_pid = ed.nvim.funcs.getpid()
    hosts = children_with(nvim_pid, "openctx-host.mjs")
    assert len(hosts) == 1, f"node hosts under nvim {nvim_pid}: {hosts}"
    os.kill(hosts[0], signal.SIGKILL)
    deadline = time.monotonic() + 5
    while alive(hosts[0]):
        assert time.monotonic() < deadline, "the killed host is still alive"
        time.sleep(0.02)

    set_lines(ed, buf, ["after", "the mark"])
    got = wait_stored(ed, buf, lambda a: titles(a) == ["k 1:4"], timeout=8, what="annotations after the kill")
    assert got[0]["range"]["start"] == {"line": 1, "character": 4}
    assert wait_marks(ed, buf, lambda t: t == {1: " k 1:4"})
    new = children_with(nvim_pid, "openctx-host.mjs")
    assert len(new) == 1 and new[0] != hosts[0], (hosts, new)
    assert ed.nvim.eval("1") == 1


# --------------------------------------------------------------------------
# what is drawn, and when
# --------------------------------------------------------------------------


def test_only_the_newest_answer_per_buffer_is_drawn(nvim_factory):
    ed = start(nvim_factory, {SLOW: {"label": "s", "slow_marker": "SLOW", "delay_ms": 1500}})
    buf = open_doc(ed, "/w/race.txt", ["warm up"])
    wait_marks(ed, buf, lambda t: t == {0: " s: warm up"})

    set_lines(ed, buf, ["SLOW old"])  # answered after 1.5 s
    time.sleep(0.2)
    set_lines(ed, buf, ["fast new"])  # answered at once
    t0 = time.monotonic()
    seen_texts = set()
    seen_stored = set()
    while time.monotonic() - t0 < 3.0:  # well past the slow answer
        seen_texts.update(mark_texts(ed, buf).values())
        s = stored(ed, buf)
        if s:
            seen_stored.update(titles(s))
        time.sleep(0.02)
    assert " s: SLOW old" not in seen_texts, seen_texts
    assert "s: SLOW old" not in seen_stored, seen_stored
    assert mark_texts(ed, buf) == {0: " s: fast new"}
    assert titles(stored(ed, buf)) == ["s: fast new"]

    # An edit while the slow answer is on its way, with no new request (the
    # refresh that follows edits is held back): the answer is for an older
    # text and is dropped.
    ed.lua("vim.o.eventignore = 'TextChanged'")
    set_lines(ed, buf, ["SLOW again"])
    time.sleep(0.2)
    ed.lua("vim.api.nvim_buf_set_lines(..., 0, -1, false, { 'edited meanwhile' })", buf)
    time.sleep(2.0)
    assert stored(ed, buf) is None
    assert " s: SLOW again" not in mark_texts(ed, buf).values()
    ed.lua("vim.o.eventignore = ''")


def test_files_over_max_file_bytes_get_no_annotations(nvim_factory, http_provider):
    url = http_provider.route("/size", word_route(label="size"))
    ed = start(nvim_factory, {url: True}, max_file_bytes=300)
    big_lines = ["mark " + "x" * 70] * 8  # 8 * 76 bytes
    big_path = ed.env.workspace / "big.txt"
    big_path.write_text("\n".join(big_lines) + "\n", "utf-8")
    small_path = ed.env.workspace / "small.txt"
    small_path.write_text("mark small\n", "utf-8")
    ed.edit(big_path)
    big = ed.nvim.current.buffer.number
    ed.edit(small_path)
    small = ed.nvim.current.buffer.number
    wait_marks(ed, small, lambda t: t == {0: " size 0:0"})
    time.sleep(0.5)
    asked = [r["body"]["params"]["uri"] for r in http_provider.seen("/size", "annotations")]
    assert file_uri(big_path) not in asked, asked
    assert stored(ed, big) is None and all_mark_texts(ed, big) == {}

    # Shrunk under the limit it is annotated; grown over it, its annotations go.
    set_lines(ed, big, big_lines[:2])
    ed.nvim.command(f"buffer {big}")
    wait_marks(ed, big, lambda t: t == {0: " size 0:0", 1: " size 1:0"})
    ed.nvim.command(f"buffer {small}")
    wait_marks(ed, small, lambda t: t == {0: " size 0:0"})
    ed.lua("vim.api.nvim_buf_set_lines(..., 0, -1, false, { 'mark ' .. string.rep('y', 400) })", small)
    ed.lua("require('amp.openctx').refresh(...)", small)
    wait_marks(ed, small, lambda t: t == {}, what="marks of a buffer grown over max_file_bytes cleared")
    time.sleep(0.3)
    left = ed.lua("return require('amp.openctx').annotations(...)", small)
    assert left == [], f"a buffer grown over max_file_bytes still lists its old annotations: {left!r}"


def test_toggle_hides_and_shows_annotations(nvim_factory):
    ed = start(nvim_factory, {WORD: {"label": "t"}})
    ed.lua("amp_t.record_notify()")
    buf = open_doc(ed, "/w/toggle.txt", ["mark", "x mark"])
    ed.nvim.command(f"buffer {buf}")
    wait_marks(ed, buf, lambda t: t == {0: " t 0:0", 1: " t 1:2"})

    ed.nvim.command("Amp annotations toggle")
    wait_marks(ed, buf, lambda t: t == {}, what="marks hidden")
    set_lines(ed, buf, ["mark", "x mark", "yy mark"])
    time.sleep(0.6)
    assert mark_texts(ed, buf) == {}, "annotations drawn while hidden"

    ed.nvim.command("Amp annotations toggle")
    wait_marks(ed, buf, lambda t: t == {0: " t 0:0", 1: " t 1:2", 2: " t 2:3"}, what="marks shown again")
    msgs = [n["msg"] for n in notes(ed)]
    assert any("hidden" in m for m in msgs) and any("shown" in m for m in msgs), msgs


# --------------------------------------------------------------------------
# drawn as lines come into view
# --------------------------------------------------------------------------

LONG = 2000


def long_lines(n: int = LONG) -> list[str]:
    """Even lines hold the word, odd lines do not: a mark on an odd line is misplaced."""
    return [f"mark {i:04d}" if i % 2 == 0 else f"plain {i:04d}" for i in range(n)]


def open_long(ed, name: str) -> int:
    """A 2,000-line file opened with :edit, once its answer (1,000 annotations) is in."""
    path = ed.env.workspace / name
    path.write_text("\n".join(long_lines()) + "\n", "utf-8")
    ed.edit(path)
    buf = ed.nvim.current.buffer.number
    wait_stored(ed, buf, lambda a: len(a) == LONG // 2)
    return buf


def in_view(ed, buf: int, lines: list[str]) -> dict[int, str]:
    """Row -> virtual text the word provider's answer for ``lines`` gives the lines windows show."""
    return {row: f" v {row}:0"
            for r in shown_ranges(ed, buf) for row in range(r["top"], r["bottom"] + 1) if "mark" in lines[row]}


def assert_only_rows(drawn: dict[int, str], ranges: list[tuple[int, int]]) -> None:
    """Every extmark is on a line that was shown (or the one below a window: Neovim's botline)."""
    outside = [row for row in drawn if not any(top <= row <= bottom + 1 for top, bottom in ranges)]
    assert not outside, f"drawn outside the lines shown {ranges}: rows {outside[:20]} (of {len(drawn)} extmarks)"


def test_a_long_buffer_draws_the_lines_in_view_then_those_scrolled_to(nvim_factory):
    ed = start(nvim_factory, {WORD: {"label": "v"}})
    buf = open_long(ed, "long.txt")
    win = ed.nvim.current.window.handle
    lines = long_lines()
    (view,) = shown_ranges(ed, buf)
    assert view["top"] == 0 and 10 <= view["bottom"] < 60, view
    want = in_view(ed, buf, lines)
    assert wait_marks(ed, buf, lambda t: t == want) == want
    assert_only_rows(all_mark_texts(ed, buf), [(0, view["bottom"])])
    assert screen_line(ed, win, 1) == "mark 0000  v 0:0", "what the screen shows of line 1"
    assert screen_line(ed, win, 2) == "plain 0001"

    seen = [(0, view["bottom"])]
    for _ in range(3):  # page by page
        ed.nvim.command('execute "normal! \\<C-f>"')
        (view,) = shown_ranges(ed, buf)
        seen.append((view["top"], view["bottom"]))
        want = in_view(ed, buf, lines)
        assert want and mark_texts(ed, buf) == want, view
    ed.nvim.command("normal! 1201Gzt")
    (view,) = shown_ranges(ed, buf)
    assert view["top"] == 1200, view
    seen.append((view["top"], view["bottom"]))
    assert mark_texts(ed, buf) == in_view(ed, buf, lines)
    assert screen_line(ed, win, 1201) == "mark 1200  v 1200:0"
    drawn = all_mark_texts(ed, buf)
    assert_only_rows(drawn, seen)
    assert len(drawn) < 100, len(drawn)


def test_an_edit_before_scrolling_draws_nothing_at_the_wrong_lines(nvim_factory):
    ed = start(nvim_factory, {WORD: {"label": "v"}})
    buf = open_long(ed, "edited.txt")
    lines = long_lines()
    want = in_view(ed, buf, lines)
    wait_marks(ed, buf, lambda t: t == want)
    before = all_mark_texts(ed, buf)

    # A line in at the top, then a scroll and a redraw, in one call: no
    # answer can come in between. The answer's line 1000 is now line 1001.
    shown, everywhere = ed.lua("""
        local buf = ...
        vim.api.nvim_buf_set_lines(buf, 0, 0, false, { 'inserted' })
        vim.cmd('normal! 1001Gzt')
        return { amp_t.marks(buf), amp_t.all_marks(buf) }
    """, buf)
    assert shown == [], f"drawn after the edit from an answer for the text before it: {shown[:5]}"
    # What was drawn before moved with its text.
    assert len(everywhere) == len(before)
    assert all_mark_texts(ed, buf) == {row + 1: text for row, text in before.items()}

    # The refresh that follows the edit draws the lines in view.
    edited = ["inserted"] + lines
    want = in_view(ed, buf, edited)
    assert want and min(want) >= 1000
    assert wait_marks(ed, buf, lambda t: t == want, what="annotations after the refresh") == want
    for row in all_mark_texts(ed, buf):
        assert "mark" in edited[row], (row, edited[row])


def test_a_buffer_in_two_windows_is_drawn_where_each_shows_it(nvim_factory):
    ed = start(nvim_factory, {WORD: {"label": "v"}})
    path = ed.env.workspace / "two.txt"
    path.write_text("\n".join(long_lines()) + "\n", "utf-8")
    ed.edit(path)
    buf = ed.nvim.current.buffer.number
    lower = ed.nvim.current.window.handle
    ed.nvim.command("split")
    ed.nvim.command("normal! 1501Gzt")
    upper = ed.nvim.current.window.handle
    assert upper != lower
    wait_stored(ed, buf, lambda a: len(a) == LONG // 2)

    lines = long_lines()
    ranges = {r["win"]: (r["top"], r["bottom"]) for r in shown_ranges(ed, buf)}
    assert ranges[lower][0] == 0 and ranges[upper][0] == 1500, ranges
    want = in_view(ed, buf, lines)
    assert wait_marks(ed, buf, lambda t: t == want) == want
    assert any(row < 100 for row in want) and any(row >= 1500 for row in want)
    assert_only_rows(all_mark_texts(ed, buf), list(ranges.values()))
    assert screen_line(ed, lower, 1) == "mark 0000  v 0:0"
    assert screen_line(ed, upper, 1501) == "mark 1500  v 1500:0"


def test_hidden_annotations_are_not_drawn_as_lines_scroll_in(nvim_factory):
    ed = start(nvim_factory, {WORD: {"label": "v"}})
    buf = open_long(ed, "hidden.txt")
    lines = long_lines()
    want = in_view(ed, buf, lines)
    wait_marks(ed, buf, lambda t: t == want)

    ed.nvim.command("Amp annotations toggle")
    assert all_mark_texts(ed, buf) == {}
    ed.nvim.command("normal! 801Gzt")
    assert mark_texts(ed, buf) == {} and all_mark_texts(ed, buf) == {}

    ed.nvim.command("Amp annotations toggle")
    want = in_view(ed, buf, lines)
    assert want and min(want) >= 800
    assert wait_marks(ed, buf, lambda t: t == want, what="annotations shown again") == want


def test_a_buffer_that_goes_leaves_no_annotation_state(nvim_factory):
    ed = start(nvim_factory, {WORD: {"label": "w"}, SLOW: {"label": "s", "slow_marker": "SLOW", "delay_ms": 2000}})
    gone = open_doc(ed, "/w/gone.txt", ["mark"])
    wait_marks(ed, gone, lambda t: "w 0:0" in t.get(0, ""))
    assert gone in tracked_buffers(ed)
    ed.nvim.command(f"bwipeout! {gone}")
    assert gone not in tracked_buffers(ed)

    # Unloaded while an answer is on its way: the answer is dropped.
    unloaded = open_doc(ed, "/w/unloaded.txt", ["SLOW mark"])
    wait_marks(ed, unloaded, lambda t: t == {0: " w 0:5"})  # the slow answer is still on its way
    assert unloaded in tracked_buffers(ed)
    ed.nvim.command(f"enew | bunload! {unloaded}")
    assert unloaded not in tracked_buffers(ed)
    time.sleep(2.5)  # past the slow answer
    assert unloaded not in tracked_buffers(ed)
    assert all_mark_texts(ed, unloaded) == {}


def test_list_hover_and_open(nvim_factory):
    ed = start(nvim_factory, {WORD: {"label": "ui"}})
    ed.lua("amp_t.record_notify(); amp_t.record_open(); amp_t.pick_first()")
    lines = ["top", "mark and mark", "é mark"]
    buf = open_doc(ed, "/w/ui.txt", lines)
    ed.nvim.command(f"buffer {buf}")
    wait_stored(ed, buf, lambda a: len(a) == 3)

    ed.nvim.command("Amp annotations list")
    qf = ed.nvim.funcs.getqflist()
    assert [(e["bufnr"], e["lnum"]) for e in qf] == [(buf, 2), (buf, 2), (buf, 3)], qf
    assert qf[0]["text"] == "ui 1:0  https://example.com/ui/1/0", qf
    assert qf[2]["text"] == "ui 2:2  https://example.com/ui/2/2", qf
    assert ed.lua("return vim.fn.getqflist({ title = 1 }).title") == "OpenCtx annotations"
    assert ed.lua("return vim.bo.buftype") == "quickfix"
    ed.nvim.command("wincmd p")
    assert ed.nvim.current.buffer.number == buf

    ed.nvim.api.win_set_cursor(0, [2, 0])
    ed.nvim.command("Amp annotations hover")
    floats = ed.lua("""
        local out = {}
        for _, w in ipairs(vim.api.nvim_list_wins()) do
          if vim.api.nvim_win_get_config(w).relative ~= '' then
            table.insert(out, vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(w), 0, -1, false))
          end
        end
        return out
    """)
    assert len(floats) == 1, floats
    text = "\n".join(floats[0])
    for want in ("ui 1:0", "hover of ui at 1:0", "ui 1:9", "hover of ui at 1:9", "https://example.com/ui/1/9"):
        assert want in text, (want, text)

    # Two annotations with a URL on line 2: vim.ui.select picks the first.
    ed.nvim.command("Amp annotations open")
    deadline = time.monotonic() + 3
    while len(ed.lua("return amp_t.opened")) < 1:
        assert time.monotonic() < deadline, ed.lua("return amp_t.opened")
        time.sleep(0.02)
    ed.nvim.api.win_set_cursor(0, [3, 0])
    ed.nvim.command("Amp annotations open")
    deadline = time.monotonic() + 3
    while len(ed.lua("return amp_t.opened")) < 2:
        assert time.monotonic() < deadline, ed.lua("return amp_t.opened")
        time.sleep(0.02)
    assert ed.lua("return amp_t.opened") == ["https://example.com/ui/1/0", "https://example.com/ui/2/2"]
    assert ed.lua("return amp_t.selects")[0]["count"] == 2


# --------------------------------------------------------------------------
# MCP: server-everything's resources as mentions
# --------------------------------------------------------------------------


def everything() -> dict:
    return {"mcp:everything": {"command": "node", "args": [str(EVERYTHING)]}}


def test_mcp_mention_goes_to_a_scratch_buffer_without_an_agent(nvim_factory):
    ed = start(nvim_factory, everything())
    ed.lua("amp_t.pick_first()")
    ed.nvim.command("Amp mention feat")
    scratch = wait_scratch(ed, "amp://context/features.md", timeout=20)
    sel = ed.lua("return amp_t.selects")
    assert sel[0]["shown"][0].startswith("features.md"), sel
    text = "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", scratch))
    assert text == (EVERYTHING_DOCS / "features.md").read_text("utf-8")


def test_mcp_mention_goes_to_the_connected_agent(nvim_factory):
    ed = start(nvim_factory, everything(), agent=True)
    rec = connect_recorder(ed)
    rec.wait_note(lambda n: n.name == "pluginMetadata", "pluginMetadata")
    ed.lua("amp_t.pick_first()")
    m = rec.mark()
    ed.nvim.command("Amp mention feat")
    want = (EVERYTHING_DOCS / "features.md").read_text("utf-8")
    rec.wait_payload("appendToPrompt", {"message": want}, since=m, timeout=20)
    assert ed.lua("""
        for _, b in ipairs(vim.api.nvim_list_bufs()) do
          if vim.api.nvim_buf_get_name(b):find('amp://context/', 1, true) then return true end
        end
        return false
    """) is False


# --------------------------------------------------------------------------
# differential: the same providers and documents through @openctx/client 0.0.30
# --------------------------------------------------------------------------

DIFF_DOCS = {
    "/w/README.md": ["# readme mark", "needle mark", ""],
    "/w/src/a.ts": ["const mark = 1 // é mark"],
    "/w/src/ab.ts": ["mark"],
    "/w/src/deep/b.ts": ["zebra mark 😀 mark", "→ mark"],
    "/w/x y.md": ["mark in a file with a space"],
    "/w/.hidden/c.md": ["hidden mark needle"],
    "/w/docs/d.md": ["docs → mark", "mark"],
    "/w/docs/e.ts": ["mark zebra"],
    "/other/README.md": ["mark elsewhere needle"],
    "/w/ü/é.md": ["ü mark", "😀mark"],
    "/w/a[1].ts": ["mark [1]"],
    "/w/#h.md": ["# mark"],
}

# (wrapper module name, settings beyond the label): the selector edge cases.
DIFF_PROVIDERS = [
    ("absent.mjs", {}),                                                    # no selectors: always
    ("never.mjs", {"selectors_json": "[]"}),                               # []: never
    ("always.mjs", {"selectors_json": "[{}]", "reverse": True, "tie": True, "whole_file": True}),
    ("no-annotations.mjs", {"no_annotations": True}),                      # no meta.annotations: never
    ("md.mjs", {"selectors_json": json.dumps([{"path": "**/*.md"}])}),
    ("src-relative.mjs", {"selectors_json": json.dumps([{"path": "src/**"}])}),
    ("w-src.mjs", {"selectors_json": json.dumps([{"path": "w/src/**"}])}),
    ("any-src.mjs", {"selectors_json": json.dumps([{"path": "**/src/**"}])}),
    ("star-ts.mjs", {"selectors_json": json.dumps([{"path": "*.ts"}])}),
    ("deep-ts.mjs", {"selectors_json": json.dumps([{"path": "**/*.ts"}])}),
    ("braces.mjs", {"selectors_json": json.dumps([{"path": "w/{src,docs}/*.{ts,md}"}])}),
    ("question.mjs", {"selectors_json": json.dumps([{"path": "w/src/?.ts"}])}),
    ("contains.mjs", {"selectors_json": json.dumps([{"contentContains": "needle"}])}),
    ("md-and-contains.mjs", {"selectors_json": json.dumps([{"path": "**/*.md", "contentContains": "needle"}])}),
    ("or.mjs", {"selectors_json": json.dumps([{"path": "**/deep/**"}, {"contentContains": "zebra"}])}),
    ("space-raw.mjs", {"selectors_json": json.dumps([{"path": "w/x y.md"}])}),
    ("space-encoded.mjs", {"selectors_json": json.dumps([{"path": "w/x%20y.md"}])}),
    ("leading-slash.mjs", {"selectors_json": json.dumps([{"path": "/w/README.md"}])}),
    ("dot-explicit.mjs", {"selectors_json": json.dumps([{"path": "**/.hidden/*.md"}])}),
    ("non-ascii-raw.mjs", {"selectors_json": json.dumps([{"path": "w/ü/*.md"}])}),
    ("non-ascii-encoded.mjs", {"selectors_json": json.dumps([{"path": "w/%C3%BC/*.md"}])}),
    ("class.mjs", {"selectors_json": json.dumps([{"path": "w/a[1].ts"}])}),
    ("hash-encoded.mjs", {"selectors_json": json.dumps([{"path": "w/%23h.md"}])}),
    ("Upper.mjs", {"selectors_json": json.dumps([{"path": "**/README.md"}])}),
    ("under_score.mjs", {"selectors_json": json.dumps([{"path": "w/**"}])}),
    ("under-score.mjs", {"selectors_json": json.dumps([{"path": "w/**/*.ts"}])}),
]


def test_differential_annotations_match_the_reference_client(nvim_factory, http_provider, tmp_path):
    mods = tmp_path / "providers"
    providers: dict = {}
    label_of: dict[str, str] = {}
    for name, settings in DIFF_PROVIDERS:
        uri = wrapper_module(mods, name)
        label = name.removesuffix(".mjs")
        providers[uri] = dict(settings, label=label)
        label_of[uri] = label
    http = http_provider.route("/diff", word_route(label="http", selectors=[{"path": "**/*.ts"}]))
    providers[http] = True
    label_of[http] = "http"
    providers[wrapper_module(mods, "disabled.mjs")] = False

    documents = [{"uri": file_uri(p), "content": "\n".join(lines)} for p, lines in DIFF_DOCS.items()]
    reference = run_reference(tmp_path, providers, documents)
    ref_docs = {d["uri"]: d for d in reference["documents"]}
    for d in reference["documents"]:
        assert d["errors"] == [], d["errors"]

    ed = start(nvim_factory, providers, timeout_ms=8000)
    bufs = {p: open_doc(ed, p, lines) for p, lines in DIFF_DOCS.items()}
    # Annotations are drawn as each provider answers: wait until every
    # document has as many as the reference found (the order is checked below).
    ours = {p: wait_stored(ed, b, lambda a, n=len(ref_docs[file_uri(p)]["annotations"]): len(a) >= n,
                           timeout=15, what=f"annotations of {p}")
            for p, b in bufs.items()}

    diffs = []
    for p in DIFF_DOCS:
        uri = file_uri(p)
        want = [(a["providerUri"], a["uri"], plain_range(a["range"]), a["title"]) for a in ref_docs[uri]["annotations"]]
        got = [(a["provider"], a["uri"], plain_range(a.get("range")), a["item"]["title"]) for a in ours[p]]
        if got != want:
            diffs.append(f"{p} ({uri}):\n  reference: {[(label_of[w[0]], w[3]) for w in want]}\n"
                         f"  ours:      {[(label_of.get(g[0], g[0]), g[3]) for g in got]}")
    assert not diffs, "annotations differ from @openctx/client 0.0.30:\n" + "\n".join(diffs)
    compared = sum(len(d["annotations"]) for d in reference["documents"])
    print(f"differential: {compared} annotations on {len(DIFF_DOCS)} documents from {len(providers)} providers agree")
    assert compared > 100, compared  # not a vacuous comparison

    # Independent spot checks, so that both clients being wrong the same way shows too.
    def labels(p):
        seen = []
        for a in ours[p]:
            label = label_of[a["provider"]]
            if label not in seen:
                seen.append(label)
        return seen

    for p in DIFF_DOCS:
        got = labels(p)
        for never in ("never", "no-annotations", "src-relative", "star-ts", "space-raw", "disabled"):
            assert never not in got, (p, got)
        assert "absent" in got and "always" in got, (p, got)
    assert "leading-slash" in labels("/w/README.md") and "md-and-contains" in labels("/w/README.md")
    assert "md" not in labels("/w/.hidden/c.md") and "dot-explicit" in labels("/w/.hidden/c.md")
    assert "space-encoded" in labels("/w/x y.md") and "md" in labels("/w/x y.md")
    assert "question" in labels("/w/src/a.ts") and "question" not in labels("/w/src/ab.ts")
    assert "braces" in labels("/w/docs/e.ts") and "braces" not in labels("/w/src/deep/b.ts")
    assert "or" in labels("/w/src/deep/b.ts") and "or" in labels("/w/docs/e.ts") and "or" not in labels("/w/src/a.ts")
    assert "under_score" not in labels("/other/README.md") and "Upper" in labels("/other/README.md")
    assert "non-ascii-encoded" in labels("/w/ü/é.md") and "non-ascii-raw" not in labels("/w/ü/é.md")
    assert "hash-encoded" in labels("/w/#h.md") and "class" not in labels("/w/a[1].ts")
    # Merged in the reference's order (localeCompare), not code-unit order.
    order = [label_of[u] for u in providers if u in label_of]
    readme = labels("/w/README.md")
    assert readme.index("under_score") < readme.index("Upper"), readme


SHAPES_PROVIDER = WORD_PROVIDER.parent / "provider-shapes.mjs"
GOOD = {"uri": "$URI", "range": {"start": {"line": 0, "character": 2}, "end": {"line": 0, "character": 6}},
        "item": {"title": "good"}}

# (wrapper module name, meta, annotations): answers of unusual shapes.
SHAPES = [
    ("meta-no-name.mjs", {"annotations": {}}, [GOOD]),
    ("selectors-null.mjs", {"name": "s", "annotations": {"selectors": None}}, [GOOD]),
    ("annotations-null.mjs", {"name": "s", "annotations": None}, [GOOD]),
    ("path-null.mjs", {"name": "s", "annotations": {"selectors": [{"path": None, "contentContains": "mark"}]}}, [GOOD]),
    ("contains-empty.mjs", {"name": "s", "annotations": {"selectors": [{"contentContains": ""}]}}, [GOOD]),
    ("path-empty.mjs", {"name": "s", "annotations": {"selectors": [{"path": ""}]}}, [GOOD]),
    ("null-range.mjs", {"name": "s", "annotations": {}}, [dict(GOOD, range=None, item={"title": "null range"})]),
    ("extra-fields.mjs", {"name": "s", "annotations": {}},
     [dict(GOOD, presentationHints=["prefer-link-over-detail"], custom={"a": 1},
           item={"title": "extra", "custom": True})]),
    ("not-a-list.mjs", {"name": "s", "annotations": {}}, {"not": "a list"}),
    ("null-result.mjs", {"name": "s", "annotations": {}}, None),
    ("beyond-end.mjs", {"name": "s", "annotations": {}},
     [dict(GOOD, range={"start": {"line": 99, "character": 0}, "end": {"line": 99, "character": 1}},
           item={"title": "beyond"})]),
    ("no-uri.mjs", {"name": "s", "annotations": {}}, [{"range": GOOD["range"], "item": {"title": "no uri"}}, GOOD]),
    ("no-title.mjs", {"name": "s", "annotations": {}}, [dict(GOOD, item={"url": "https://x"}), GOOD]),
    ("start-only.mjs", {"name": "s", "annotations": {}},
     [dict(GOOD, range={"start": {"line": 0, "character": 1}}, item={"title": "start only"}), GOOD]),
]


def test_differential_unusual_answers_match_the_reference_client(nvim_factory, tmp_path):
    mods = tmp_path / "shapes"
    providers: dict = {}
    label_of: dict[str, str] = {}
    for name, meta, anns in SHAPES:
        uri = wrapper_module(mods, name, SHAPES_PROVIDER)
        providers[uri] = {"meta_json": json.dumps(meta), "annotations_json": json.dumps(anns)}
        label_of[uri] = name.removesuffix(".mjs")
    path, lines = "/w/shapes.txt", ["a mark", "b"]
    reference = run_reference(tmp_path, providers, [{"uri": file_uri(path), "content": "\n".join(lines)}])
    ref = reference["documents"][0]

    want = [(label_of[a["providerUri"]], a.get("uri"), plain_range(a.get("range")), a.get("title"))
            for a in ref["annotations"]]

    # The reference passes malformed entries through (no title, no uri, a range
    # without its end); a client may leave those out, but only those: every
    # well-formed entry must be there, in the reference's order.
    def malformed(entry):
        _, uri, rng, title = entry
        return not isinstance(uri, str) or not isinstance(title, str) or (rng is not None and set(rng) != {"start", "end"})

    # Annotations are drawn as each provider answers: wait for all of them.
    well_formed = sum(1 for w in want if not malformed(w))
    ed = start(nvim_factory, providers, timeout_ms=8000)
    buf = open_doc(ed, path, lines)
    ours = wait_stored(ed, buf, lambda a: len(a) >= well_formed, timeout=15)
    got = [(label_of[a["provider"]], a.get("uri"), plain_range(a.get("range")), a.get("item", {}).get("title"))
           for a in ours]

    i = 0
    matched = True
    for w in want:
        if i < len(got) and got[i] == w:
            i += 1
        elif not malformed(w):
            matched = False
            break
    matched = matched and i == len(got)
    assert matched, ("annotations differ from @openctx/client 0.0.30\n  reference: "
                     + "\n    ".join(map(repr, want)) + "\n  ours:      " + "\n    ".join(map(repr, got))
                     + f"\n  reference errors: {ref['errors']}")


# --------------------------------------------------------------------------
# issue #16: real providers work the way their users expect
# --------------------------------------------------------------------------

LINEAR = NODE_MODULES / "@openctx" / "provider-linear-issues" / "dist" / "bundle.js"
SETTINGS_LIST = FIXTURES / "provider-settings-list.mjs"
IMPORT_FAILS = FIXTURES / "provider-import-fails.mjs"
THROWS = FIXTURES / "provider-throws.mjs"
SLOW_MCP = FIXTURES / "mcp-slow-start.mjs"
NPM_MODULE = "https://openctx.org/npm/@openctx/provider-linear-issues"
HTML_PAGE = b"<!doctype html><html><head><title>Sign in</title></head><body>Sign in</body></html>"


def wait_notes(ed, pred, timeout: float = WAIT, what: str = "notifications") -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        found = notes(ed)
        if pred(found):
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {found!r} {ed.messages()}"
        time.sleep(0.05)


def note_about(found: list[dict], provider: str) -> list[str]:
    return [n["msg"] for n in found if provider in n["msg"]]


def test_module_urls_are_downloaded_and_run_as_the_reference_decides(nvim_factory, http_provider, tmp_path):
    """Which provider URLs are JS modules (downloaded, then run by Node) and
    which are HTTP endpoints (POSTed to), and the Content-Type a downloaded
    module must have: as @openctx/client 0.0.30 decides, on real modules
    served by a local HTTP server (the published linear-issues bundle at an
    /npm/@openctx/… path, as openctx.org/npm serves it)."""
    require_node_modules(LINEAR)
    hp = http_provider
    word_js = WORD_PROVIDER.read_bytes()
    npm_js = hp.serve_file("/npm/@openctx/provider-linear-issues", LINEAR.read_bytes(), "text/javascript")
    npm_plus_js = npm_js.replace("http://", "http+js://", 1)
    remote = hp.serve_file("/dist/word.js", word_js, "application/javascript; charset=utf-8")
    remote_mts = hp.serve_file("/dist/word.mts", word_js, "text/plain")
    html = hp.serve_file("/dist/login.js", HTML_PAGE, "text/html; charset=utf-8")
    upper = hp.route("/dist/Upper.JS", word_route(label="upper"))        # case-sensitive: an endpoint
    npm_http = hp.route("/npm/provider-word", word_route(label="npm-http"))  # /npm/ elsewhere: an endpoint
    providers = {
        npm_plus_js: True,
        remote: {"label": "remote"},
        remote_mts: {"label": "remote-mts"},
        html: True,
        upper: True,
        npm_http: True,
        NPM_MODULE: True,
    }
    path, lines = "/w/src/m.ts", ["a mark", "mark é mark"]
    doc = {"uri": file_uri(path), "content": "\n".join(lines)}

    reference = run_reference(tmp_path, providers, [doc])
    # The reference's decision: what it asked to import (after +js is stripped).
    modules = set(reference["imported"])
    assert modules == {npm_js, remote, remote_mts, html, NPM_MODULE}, modules
    ref_errors = {e["providerUri"]: e["message"] for e in reference["documents"][0]["errors"]}
    assert 'invalid Content-Type "text/html"' in ref_errors[html], ref_errors
    assert NPM_MODULE in ref_errors  # no internet here: its download fails
    want = [(a["providerUri"], plain_range(a["range"]), a["title"]) for a in reference["documents"][0]["annotations"]]
    assert {w[2].split()[0] for w in want} == {"remote", "remote-mts", "upper", "npm-http"}, want

    hp.requests.clear()
    ed = start(nvim_factory, providers, timeout_ms=8000)
    ed.lua("amp_t.record_notify()")
    buf = open_doc(ed, path, lines)
    ours = wait_stored(ed, buf, lambda a: len(a) >= len(want), timeout=20)
    got = [(a["provider"], plain_range(a.get("range")), a["item"]["title"]) for a in ours]
    assert got == want

    found = wait_notes(ed, lambda n: note_about(n, html) and note_about(n, NPM_MODULE), timeout=20,
                       what="the failures of the HTML page and of openctx.org")
    # Ours: modules are fetched (GET), endpoints are POSTed to, as the reference decided.
    # (Checked once every provider has answered or failed: the HTML page's
    # download gives no annotation, and may finish after the others'.)
    for p in ("/npm/@openctx/provider-linear-issues", "/dist/word.js", "/dist/word.mts", "/dist/login.js"):
        assert hp.verbs(p) == {"GET"}, (p, hp.verbs(p))
    for p in ("/dist/Upper.JS", "/npm/provider-word"):
        assert hp.verbs(p) == {"POST"}, (p, hp.verbs(p))
    # The HTML page is refused for its Content-Type, not run.
    assert any("Content-Type" in m or "not a JavaScript module" in m for m in note_about(found, html)), found
    # openctx.org/npm/… is downloaded (which fails offline), never POSTed to.
    assert any("downloading" in m or "not a JavaScript module" in m for m in note_about(found, NPM_MODULE)), found
    # The real linear-issues bundle was imported: its meta answered (no failure).
    assert not note_about(found, npm_plus_js), found


BAD_ENTRIES = {
    "/abs/provider.mjs": True,                               # a bare path, not a URL
    "@openctx/provider-links": True,                         # a package name
    "mcp:no-command": {"args": ["x"]},                       # mcp: without command
    "mcp:string-args": {"command": "node", "args": "x.js"},  # args as a string
}


def test_a_bad_provider_entry_disables_only_itself(nvim_factory, tmp_path):
    """One malformed entry: a one-line warning naming it, and every other
    provider works, as in @openctx/client (which skips it with an error)."""
    good = wrapper_module(tmp_path / "providers", "good.mjs")
    providers = dict(BAD_ENTRIES, **{good: {"label": "good"}})
    path, lines = "/w/bad.ts", ["mark", "x mark"]
    doc = {"uri": file_uri(path), "content": "\n".join(lines)}
    reference = run_reference(tmp_path, providers, [doc])
    ref = reference["documents"][0]
    assert {e["providerUri"] for e in ref["errors"]} == set(BAD_ENTRIES), ref["errors"]

    ed = start(nvim_factory, providers, timeout_ms=8000)
    buf = open_doc(ed, path, lines)
    ours = wait_stored(ed, buf, lambda a: len(a) >= len(ref["annotations"]))
    assert [(a["provider"], plain_range(a.get("range")), a["item"]["title"]) for a in ours] == \
        [(a["providerUri"], plain_range(a["range"]), a["title"]) for a in ref["annotations"]]
    assert ed.lua("return require('amp.openctx').providers()") == [good]
    # One warning per bad entry, one line each, naming it.
    shown = ed.messages().splitlines()
    for uri in BAD_ENTRIES:
        lines_about = [m for m in shown if f'"{uri}"' in m]
        assert len(lines_about) == 1 and lines_about[0].startswith("amp: OpenCtx: provider skipped:"), (uri, shown)
    assert any("file:///" in m for m in shown if "/abs/provider.mjs" in m), shown
    assert any("https://openctx.org/npm/@openctx/provider-links" in m for m in shown), shown
    assert any("command" in m for m in shown if "mcp:no-command" in m), shown
    assert any("args" in m for m in shown if "mcp:string-args" in m), shown


def test_empty_lua_tables_in_settings_are_sent_as_lists_and_empty_dict_as_an_object(nvim_factory, tmp_path):
    """Lua has one kind of table: inside settings, `{}` is sent as `[]` (what
    `links = {}` means to a provider that maps over its links), and
    `vim.empty_dict()` as `{}`, as vim.json.encode does; the settings table
    itself is always an object."""
    uri = module_uri(SETTINGS_LIST)
    other = wrapper_module(tmp_path / "providers", "top.mjs", SETTINGS_LIST)
    ed = start(nvim_factory, {WORD: True})
    reconfigure(ed, "{ [%s] = { links = {}, headers = vim.empty_dict(), nested = { tags = {}, opts = vim.empty_dict() },"
                    " some = { 'a', 'b' }, n = 3 }, [%s] = {} }" % (json.dumps(uri), json.dumps(other)))
    ed.lua("amp_t.record_notify()")
    buf = open_doc(ed, "/w/settings.ts", ["settings"])
    found = wait_stored(ed, buf, lambda a: len(a) >= 2)
    got = {a["provider"]: json.loads(a["item"]["title"]) for a in found}
    assert got[uri] == {"links": 0, "settings": {"links": [], "headers": {}, "nested": {"tags": [], "opts": {}},
                                                 "some": ["a", "b"], "n": 3}}, got
    assert got[other] == {"links": 0, "settings": {}}, got
    assert notes(ed) == []


def test_a_slow_starting_mcp_server_gets_the_startup_deadline(nvim_factory):
    """A real MCP server that needs 3 s to start (as `npx -y` the first
    time) works with the default 2 s call deadline: its start-up has
    `startup_timeout_ms`; a start-up deadline too short says so."""
    slow = {"mcp:slow": {"command": "node", "args": [str(SLOW_MCP)], "env": {"START_DELAY_MS": "3000"}}}
    ed = start(nvim_factory, slow, timeout_ms=2000)
    ed.lua("amp_t.record_notify(); amp_t.pick_first()")
    t0 = time.monotonic()
    ed.nvim.command("Amp mention feat")
    scratch = wait_scratch(ed, "amp://context/features.md", timeout=20)
    assert time.monotonic() - t0 >= 2.5  # it did take longer than a call's deadline
    text = "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", scratch))
    assert text == (EVERYTHING_DOCS / "features.md").read_text("utf-8")
    assert [n for n in notes(ed) if "mcp:slow" in n["msg"]] == []

    ed2 = start(nvim_factory, slow, timeout_ms=2000, startup_timeout_ms=1000)
    ed2.lua("amp_t.record_notify(); amp_t.pick_first()")
    ed2.nvim.command("Amp mention feat")
    found = wait_notes(ed2, lambda n: note_about(n, "mcp:slow"), timeout=10)
    assert any("did not start within 1000 ms" in m for m in note_about(found, "mcp:slow")), found


def test_startup_timeout_ms_is_validated(nvim_factory):
    ed = nvim_factory(auto_start=False, _wait=False)
    err = ed.lua("""
        local ok, err = pcall(require('amp').setup, { openctx = { startup_timeout_ms = 0 } })
        return err
    """)
    assert "openctx.startup_timeout_ms must be a positive integer, got 0" in err, err
    err = ed.lua("""
        local ok, err = pcall(require('amp').setup, { openctx = { startup_timeout_ms = 'soon' } })
        return err
    """)
    assert 'openctx.startup_timeout_ms must be a positive integer, got "soon"' in err, err


def test_import_failures_and_thrown_errors_are_labelled(nvim_factory):
    """A module Node cannot import and a provider that throws, each named:
    "import failed: …" / "provider threw: …" (real modules: one importing a
    package that is not installed, one throwing, and the published
    linear-issues provider, which throws without its access token)."""
    require_node_modules(LINEAR)
    import_fails, throws, linear = module_uri(IMPORT_FAILS), module_uri(THROWS), module_uri(LINEAR)
    ed = start(nvim_factory, {import_fails: True, throws: True, linear: True})
    ed.lua("amp_t.record_notify(); amp_t.pick_first()")
    open_doc(ed, "/w/labels.ts", ["x"])
    found = wait_notes(ed, lambda n: note_about(n, import_fails) and note_about(n, throws))
    about = note_about(found, import_fails)
    assert len(about) == 1 and about[0].startswith(
        f"amp: OpenCtx provider {import_fails}: meta failed: import failed: Cannot find package"), found
    assert note_about(found, throws) == [f"amp: OpenCtx provider {throws}: meta failed: provider threw: boom from meta"], found
    ed.nvim.command("Amp mention issue")
    found = wait_notes(ed, lambda n: note_about(n, linear), timeout=15)
    assert any(f"OpenCtx provider {linear}: mentions failed: provider threw: must provide a Linear" in m
               for m in note_about(found, linear)), found
    assert not any("provider error 0" in n["msg"] for n in found), found


def test_mentions_send_the_active_documents_uri_as_the_reference_client(nvim_factory, http_provider, tmp_path):
    """`mentions` params are {query, uri} with the active document's URI (as
    VS Code's client sends them): the body the provider gets is the one
    @openctx/client sends for the same request."""
    mentions = [{"title": "alpha", "uri": "doc://alpha"}, {"title": "beta", "uri": "doc://beta"}]
    url = http_provider.route("/m", word_route(label="m", mentions=mentions))
    providers = {url: {"token": "t"}}
    path = tmp_path / "src" / "active file.ts"
    path.parent.mkdir(parents=True)
    path.write_text("mark\n", "utf-8")
    params = {"query": "al", "uri": file_uri(path)}
    reference = run_reference(tmp_path, providers, [], mentions=[params])
    assert [m["title"] for m in reference["mentions"][0]["mentions"]] == ["alpha"]
    ref_body = http_provider.seen("/m", "mentions")[-1]["body"]
    http_provider.requests.clear()

    ed = start(nvim_factory, providers)
    ed.lua("amp_t.pick_first()")
    ed.lua("vim.cmd.edit(...)", str(path))  # nvim_cmd: no escaping needed
    ed.nvim.command("Amp mention al")
    wait_scratch(ed, "amp://context/alpha")
    ours = http_provider.seen("/m", "mentions")
    assert [r["body"] for r in ours] == [ref_body], (ours, ref_body)
    assert ref_body["params"] == params


def test_mention_without_providers_says_how_to_add_one(nvim_factory):
    ed = nvim_factory(auto_start=False, _wait=False, openctx={"enabled": True, "providers": {}})
    msgs = ed.lua("""
        local got = {}
        vim.notify = function(msg) table.insert(got, msg) end
        vim.cmd('Amp mention')
        vim.cmd('Amp context some message')
        return got
    """)
    assert len(msgs) == 2, msgs
    for m in msgs:
        assert m == "amp: add a provider to openctx.providers (:help amp-openctx): none is configured", m
        assert "not enabled" not in m, m


def checkhealth(ed) -> str:
    ed.nvim.command("checkhealth amp")
    return "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))


def test_checkhealth_reports_each_provider_and_the_node_command(nvim_factory, http_provider, tmp_path):
    """`:checkhealth amp` asks each provider's meta (off the main thread,
    bounded) and reports it ok or failed with why; with a JS provider
    configured it checks openctx.node_command, not the `node` on PATH."""
    import shutil
    node = shutil.which("node")
    assert node
    # A node_command that is not on PATH: a wrapper script of its own.
    wrapper = tmp_path / "bin" / "my-node"
    wrapper.parent.mkdir()
    wrapper.write_text(f"#!/bin/sh\nexec {node} \"$@\"\n", "utf-8")
    wrapper.chmod(0o755)
    url = http_provider.route("/h", word_route(label="h"))
    broken = http_provider.url("/missing")
    throws = module_uri(THROWS)
    ed = start(nvim_factory, {WORD: True, url: True, broken: True, throws: True}, node_command=str(wrapper))
    report = checkhealth(ed)
    assert "amp.nvim-rs: OpenCtx" in report, report
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    assert f'openctx.node_command "{wrapper}": {version}' in report, report
    lines = report.splitlines()

    def line_of(uri):
        found = [line for line in lines if uri + " (" in line]
        assert len(found) == 1, (uri, report)
        return found[0]

    assert "OK" in line_of(WORD) and "offers annotations" in line_of(WORD), report
    assert "OK" in line_of(url) and "offers annotations" in line_of(url), report
    assert "ERROR" in line_of(broken) and "meta failed:" in line_of(broken) and "404" in line_of(broken), report
    assert "ERROR" in line_of(throws) and "provider threw: boom from meta" in line_of(throws), report

    ed2 = start(nvim_factory, {WORD: True}, node_command=str(tmp_path / "no-such-node"))
    report = checkhealth(ed2)
    assert f'openctx.node_command "{tmp_path / "no-such-node"}" is not executable' in report, report


def test_the_documented_npx_mcp_example_works_on_first_use(nvim_factory):
    """The example of :help amp-openctx, `npx -y @modelcontextprotocol/server-everything`,
    with the default deadlines: npx takes seconds to start the server (here
    it finds the package installed in tests/fixtures/openctx, no network)."""
    npx = {"mcp:everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"],
                              "cwd": str(FIXTURES)}}
    ed = start(nvim_factory, npx)
    ed.lua("amp_t.record_notify(); amp_t.pick_first()")
    ed.nvim.command("Amp mention feat")
    scratch = wait_scratch(ed, "amp://context/features.md", timeout=30)
    text = "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", scratch))
    assert text == (EVERYTHING_DOCS / "features.md").read_text("utf-8")
    assert [n for n in notes(ed) if "mcp:everything" in n["msg"]] == []
