"""getDiagnostics (UTF-16 columns, severities, directories, URIs) and openURI."""

import pytest

from conftest import file_uri, uri_to_path

ERROR, WARN, INFO, HINT = 1, 2, 3, 4


@pytest.fixture
def ed(nvim_factory, env_factory):
    return nvim_factory(_env=env_factory("diag wörk ✓"))


@pytest.fixture
def c(ed):
    return ed.connect()


def make(ed, rel, text):
    p = ed.env.workspace / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


def set_diags(ed, path, diags):
    """Loads ``path`` into a buffer and sets diagnostics on it (namespace amp-it)."""
    ed.lua(
        """
        local path, diags = ...
        local b = vim.fn.bufadd(path)
        vim.fn.bufload(b)
        vim.bo[b].buflisted = true
        local ns = vim.api.nvim_create_namespace("amp-it")
        vim.diagnostic.set(ns, b, diags)
        """, str(path), diags)


def get_entries(c, path):
    result = c.call("getDiagnostics", {"path": str(path)})
    assert isinstance(result, dict) and isinstance(result.get("entries"), list), result
    for e in result["entries"]:
        assert isinstance(e.get("uri"), str) and isinstance(e.get("diagnostics"), list), e
    return result["entries"]


def nonempty_by_path(entries):
    return {uri_to_path(e["uri"]): e["diagnostics"] for e in entries if e["diagnostics"]}


# ------------------------------------------------------------ getDiagnostics


def test_diagnostic_columns_are_utf16(ed, c):
    p = make(ed, "uni ✓.py", "é→😀x = 1\nsecond\n")
    # byte col of x is 2 + 3 + 4 = 9; in UTF-16 units it is 1 + 1 + 2 = 4
    set_diags(ed, p, [{"lnum": 0, "col": 9, "end_lnum": 0, "end_col": 10,
                       "severity": WARN, "message": "x is unused ✓"}])
    entries = get_entries(c, p)
    assert len(entries) == 1, entries
    e = entries[0]
    assert uri_to_path(e["uri"]) == str(p)
    assert len(e["diagnostics"]) == 1
    d = e["diagnostics"][0]
    assert d["range"] == {"startLine": 0, "startCharacter": 4, "endLine": 0, "endCharacter": 5}
    assert d["severity"] == "warning"
    assert d["description"] == "x is unused ✓"
    assert d["lineContent"] == "é→😀x = 1"
    assert isinstance(d["startOffset"], int) and isinstance(d["endOffset"], int)
    assert d["endOffset"] >= d["startOffset"]


def test_diagnostic_multiline_end_column_uses_end_line(ed, c):
    p = make(ed, "multi.py", "ab\nü😀y z\n")
    # end on line 1 at byte 6 (after ü and 😀) = UTF-16 col 3
    set_diags(ed, p, [{"lnum": 0, "col": 1, "end_lnum": 1, "end_col": 6,
                       "severity": ERROR, "message": "span"}])
    (e,) = get_entries(c, p)
    (d,) = e["diagnostics"]
    assert d["range"] == {"startLine": 0, "startCharacter": 1, "endLine": 1, "endCharacter": 3}
    assert d["severity"] == "error"
    assert d["lineContent"] == "ab"


def test_severity_names(ed, c):
    p = make(ed, "sev.py", "l0\nl1\nl2\nl3\n")
    set_diags(ed, p, [
        {"lnum": 0, "col": 0, "end_lnum": 0, "end_col": 1, "severity": ERROR, "message": "E"},
        {"lnum": 1, "col": 0, "end_lnum": 1, "end_col": 1, "severity": WARN, "message": "W"},
        {"lnum": 2, "col": 0, "end_lnum": 2, "end_col": 1, "severity": INFO, "message": "I"},
        {"lnum": 3, "col": 0, "end_lnum": 3, "end_col": 1, "severity": HINT, "message": "H"},
    ])
    (e,) = get_entries(c, p)
    got = {d["description"]: (d["severity"], d["range"]["startLine"], d["lineContent"])
           for d in e["diagnostics"]}
    assert got == {"E": ("error", 0, "l0"), "W": ("warning", 1, "l1"),
                   "I": ("info", 2, "l2"), "H": ("hint", 3, "l3")}


def test_directory_path_returns_files_under_it(ed, c):
    a = make(ed, "src ✓/a.py", "a = 1\n")
    b = make(ed, "src ✓/deep er/b.py", "b = 2\n")
    other = make(ed, "other/c.py", "c = 3\n")
    for f in (a, b, other):
        set_diags(ed, f, [{"lnum": 0, "col": 0, "end_lnum": 0, "end_col": 1,
                           "severity": ERROR, "message": f.name}])
    entries = get_entries(c, ed.env.workspace / "src ✓")
    got = nonempty_by_path(entries)
    assert set(got) == {str(a), str(b)}, got
    assert got[str(a)][0]["description"] == "a.py"
    assert got[str(b)][0]["description"] == "b.py"
    for e in entries:
        assert uri_to_path(e["uri"]).startswith(str(ed.env.workspace / "src ✓") + "/"), e["uri"]
    # the workspace as a whole includes all three
    assert set(nonempty_by_path(get_entries(c, ed.env.workspace))) == {str(a), str(b), str(other)}


def test_directory_prefix_does_not_match_sibling_with_same_prefix(ed, c):
    a = make(ed, "lib/a.py", "a\n")
    sib = make(ed, "lib2/s.py", "s\n")
    sib_file = make(ed, "libx.py", "x\n")
    for f in (a, sib, sib_file):
        set_diags(ed, f, [{"lnum": 0, "col": 0, "end_lnum": 0, "end_col": 1,
                           "severity": WARN, "message": f.name}])
    assert set(nonempty_by_path(get_entries(c, ed.env.workspace / "lib"))) == {str(a)}


def test_file_path_does_not_return_other_files(ed, c):
    a = make(ed, "one.py", "1\n")
    b = make(ed, "two.py", "2\n")
    for f in (a, b):
        set_diags(ed, f, [{"lnum": 0, "col": 0, "end_lnum": 0, "end_col": 1,
                           "severity": INFO, "message": f.name}])
    assert set(nonempty_by_path(get_entries(c, a))) == {str(a)}


def test_uri_is_percent_encoded(ed, c):
    p = make(ed, "a b#%.py", "x\n")
    set_diags(ed, p, [{"lnum": 0, "col": 0, "end_lnum": 0, "end_col": 1,
                       "severity": HINT, "message": "m"}])
    (e,) = get_entries(c, p)
    uri = e["uri"]
    assert uri.startswith("file:///"), uri
    assert uri.endswith("/a%20b%23%25.py"), uri
    assert uri.isascii() and " " not in uri, uri  # workspace "diag wörk ✓" encoded too
    assert uri_to_path(uri) == str(p)


def test_get_diagnostics_quick_reference_dialect(ed, c):
    p = make(ed, "qr.py", "bad\n")
    set_diags(ed, p, [{"lnum": 0, "col": 0, "end_lnum": 0, "end_col": 3,
                       "severity": ERROR, "message": "qr"}])
    resp = c.request_qr("getDiagnostics", {"path": str(p)})
    assert "error" not in resp, resp
    (e,) = resp["result"]["entries"]
    assert e["diagnostics"][0]["description"] == "qr"
    assert e["diagnostics"][0]["range"]["endCharacter"] == 3


# ------------------------------------------------------------ openURI


def open_uri(c, uri):
    return c.call("openURI", {"uri": uri})


def test_open_uri_line(ed, c):
    p = make(ed, "open ✓.txt", "l1\nl2\nl3\nl4\nl5\n")
    r = open_uri(c, file_uri(p, "L3"))
    assert r.get("success") is True, r
    assert ed.nvim.current.buffer.name == str(p)
    assert ed.nvim.current.window.cursor[0] == 3


def test_open_uri_line_column(ed, c):
    p = make(ed, "col.txt", "first\nabcdef\nthird\n")
    r = open_uri(c, file_uri(p, "L2C3"))
    assert r.get("success") is True, r
    assert ed.nvim.current.buffer.name == str(p)
    assert tuple(ed.nvim.current.window.cursor) == (2, 2)


def test_open_uri_line_range_selects_lines(ed, c):
    p = make(ed, "range.txt", "1\n2\n3\n4\n5\n6\n")
    r = open_uri(c, file_uri(p, "L2-L4"))
    assert r.get("success") is True, r
    assert ed.nvim.current.buffer.name == str(p)
    mode = ed.nvim.api.get_mode()["mode"]
    assert mode in ("V", "v"), mode
    lines = sorted([ed.nvim.funcs.getpos("v")[1], ed.nvim.funcs.getpos(".")[1]])
    assert lines == [2, 4]


def test_open_uri_percent_encoded_path(ed, c):
    p = make(ed, "ö p#q%.txt", "a\nb\n")
    uri = file_uri(p, "L2")
    assert "%23" in uri and "%C3%B6" in uri
    r = open_uri(c, uri)
    assert r.get("success") is True, r
    assert ed.nvim.current.buffer.name == str(p)
    assert ed.nvim.current.window.cursor[0] == 2


def test_open_uri_without_fragment(ed, c):
    p = make(ed, "plain.txt", "x\n")
    ed.nvim.command("enew")
    r = open_uri(c, file_uri(p))
    assert r.get("success") is True, r
    assert ed.nvim.current.buffer.name == str(p)
    assert ed.nvim.current.buffer[:] == ["x"]


def test_open_uri_directory(ed, c):
    d = ed.env.workspace / "a dir ✓"
    d.mkdir()
    r = open_uri(c, file_uri(d))
    assert r.get("success") is True, r
    assert ed.nvim.current.buffer.name.rstrip("/") == str(d)


def test_open_uri_quick_reference_dialect(ed, c):
    p = make(ed, "qr open.txt", "1\n2\n")
    resp = c.request_qr("openURI", {"uri": file_uri(p, "L2")})
    assert "error" not in resp, resp
    assert resp["result"].get("success") is True, resp
    assert ed.nvim.current.buffer.name == str(p)
    assert ed.nvim.current.window.cursor[0] == 2


@pytest.mark.parametrize("uri", ["ftp://x", "ftp://example.com/file.txt", "javascript:alert(1)"])
def test_open_uri_unsupported_scheme(ed, c, uri):
    before = ed.nvim.current.buffer.number
    r = open_uri(c, uri)
    assert r.get("success") is False, r
    assert isinstance(r.get("message"), str) and r["message"], r
    assert ed.nvim.current.buffer.number == before


def test_open_uri_https_uses_vim_ui_open(ed, c):
    ed.lua("""
        _G.amp_it_opened = {}
        vim.ui.open = function(uri)
          table.insert(_G.amp_it_opened, uri)
          return { wait = function() return { code = 0 } end }, nil
        end
    """)
    url = "https://example.com/a%20b?x=1&y=2#frag"
    r = open_uri(c, url)
    assert r.get("success") is True, r
    assert ed.lua("return _G.amp_it_opened") == [url]
