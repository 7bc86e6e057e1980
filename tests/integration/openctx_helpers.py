"""Helpers for the OpenCtx client tests (test_openctx.py, test_openctx_hardening.py).

Real parts only: a real HTTP provider (``http.server`` on 127.0.0.1:0 in a
thread), real ESM provider modules (tests/fixtures/openctx/provider-*.mjs) run
by the plugin's real Node host, the real MCP server ``server-everything``, and
the official client library ``@openctx/client`` 0.0.30 as the reference
(tests/fixtures/openctx/differential/reference.mjs). The Node dependencies come
from ``npm ci --prefix tests/fixtures/openctx``; missing is a failure.

Only the OpenCtx tests use it; conftest.py stays as it is.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import REPO, Editor, file_uri

FIXTURES = REPO / "tests" / "fixtures" / "openctx"
NODE_MODULES = FIXTURES / "node_modules"
WORD_PROVIDER = FIXTURES / "provider-word.mjs"
SLOW_PROVIDER = FIXTURES / "provider-slow.mjs"
REFERENCE_SCRIPT = FIXTURES / "differential" / "reference.mjs"
EVERYTHING = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
EVERYTHING_DOCS = EVERYTHING.parent / "docs"
REFERENCE_CLIENT = NODE_MODULES / "@openctx" / "client" / "package.json"

NS = "amp_openctx"
VAR = "amp_openctx_annotations"
WAIT = 8.0  # seconds: bound of every "this must arrive" wait


def require_node_modules(*paths: Path) -> None:
    """The test dependencies must be installed (CI runs npm ci): a failure, not a skip."""
    for p in paths:
        if not p.exists():
            pytest.fail(f"{p} is missing: run `npm ci --prefix tests/fixtures/openctx`", pytrace=False)


def module_uri(path: Path) -> str:
    return file_uri(path)


# --------------------------------------------------------------------------
# UTF-16 positions (the protocol's) and byte columns (Neovim's), by hand
# --------------------------------------------------------------------------


def utf16_len(s: str) -> int:
    return sum(2 if ord(c) > 0xFFFF else 1 for c in s)


def utf16_index(line: str, char_index: int) -> int:
    """UTF-16 column of the code point at ``char_index`` of ``line``."""
    return utf16_len(line[:char_index])


def utf16_to_byte(line: str, u16: int) -> int:
    """Byte column (UTF-8) of UTF-16 column ``u16`` on ``line``, walking the characters."""
    units = 0
    byte = 0
    for c in line:
        if units >= u16:
            break
        units += 2 if ord(c) > 0xFFFF else 1
        byte += len(c.encode("utf-8"))
    return byte


def occurrences(line: str, word: str) -> list[int]:
    """Code-point indices of every occurrence of ``word`` (non-overlapping)."""
    out, at = [], line.find(word)
    while at >= 0:
        out.append(at)
        at = line.find(word, at + len(word))
    return out


# --------------------------------------------------------------------------
# a real HTTP provider
# --------------------------------------------------------------------------


class HttpReply:
    def __init__(self, status: int = 200, body: bytes | str | Any = b"", content_type: str = "application/json",
                 hang: bool = False, delay: float = 0.0):
        self.status = status
        if isinstance(body, (dict, list)) or body is None or isinstance(body, (int, float)):
            body = json.dumps(body)
        self.body = body.encode("utf-8") if isinstance(body, str) else body
        self.content_type = content_type
        self.hang = hang
        self.delay = delay


def result(value: Any) -> HttpReply:
    return HttpReply(body={"result": value})


class HttpProvider:
    """ThreadingHTTPServer on 127.0.0.1:0; each path has a route
    ``fn(method, params, settings, request) -> HttpReply``. Every request is
    recorded (path, headers, raw body, parsed JSON)."""

    def __init__(self):
        self.routes: dict[str, Callable[..., HttpReply]] = {}
        # GET path -> (content type, body): files served as they are (remote modules).
        self.files: dict[str, tuple[str, bytes]] = {}
        self.requests: list[dict] = []
        self.release = threading.Event()  # ends hanging replies
        self._lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest's output clean
                pass

            def do_GET(self):
                with provider._lock:
                    provider.requests.append({"path": self.path, "verb": "GET", "body": None, "raw": b"",
                                              "headers": {k.lower(): v for k, v in self.headers.items()},
                                              "t": time.monotonic()})
                content_type, body = provider.files.get(self.path, ("text/plain", None))
                try:
                    self.send_response(200 if body is not None else 404)
                    self.send_header("Content-Type", content_type)
                    body = body if body is not None else b"no such file"
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                req = {"path": self.path, "verb": "POST", "headers": {k.lower(): v for k, v in self.headers.items()},
                       "raw": raw, "body": body, "t": time.monotonic()}
                with provider._lock:
                    provider.requests.append(req)
                route = provider.routes.get(self.path)
                if route is None:
                    reply = HttpReply(404, b"no such route", "text/plain")
                elif not isinstance(body, dict):
                    reply = HttpReply(400, b"not a JSON object", "text/plain")
                else:
                    reply = route(body.get("method"), body.get("params"), body.get("settings"), req)
                if reply.hang:
                    provider.release.wait(60)
                    return  # the connection closes without an answer
                if reply.delay:
                    provider.release.wait(reply.delay)
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.content_type)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except OSError:
                    pass  # the client gave up (timeout)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       name="openctx-http-provider", daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def route(self, path: str, fn: Callable[..., HttpReply]) -> str:
        self.routes[path] = fn
        return self.url(path)

    def serve_file(self, path: str, body: bytes, content_type: str) -> str:
        """Serves ``body`` to GET ``path`` with ``content_type``; returns its URL."""
        self.files[path] = (content_type, body)
        return self.url(path)

    def verbs(self, path: str) -> set[str]:
        """The HTTP methods of the requests made to ``path``."""
        with self._lock:
            return {r.get("verb", "POST") for r in self.requests if r["path"] == path}

    def seen(self, path: str | None = None, method: str | None = None) -> list[dict]:
        with self._lock:
            reqs = list(self.requests)
        return [r for r in reqs
                if r.get("verb", "POST") == "POST"
                and (path is None or r["path"] == path)
                and (method is None or (isinstance(r["body"], dict) and r["body"].get("method") == method))]

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def word_route(word: str = "mark", label: str = "http", selectors: list | None = None,
               mentions: list[dict] | None = None, message_pattern: str | None = None,
               annotations: Callable[[dict], Any] | None = None) -> Callable[..., HttpReply]:
    """A well-behaved HTTP provider: annotations of ``word`` (UTF-16 positions),
    mentions filtered by the query, items for a mention or a message."""

    def annotate(params: dict) -> list:
        out = []
        for i, line in enumerate(params["content"].split("\n")):
            for at in occurrences(line, word):
                c = utf16_index(line, at)
                out.append({
                    "uri": params["uri"],
                    "range": {"start": {"line": i, "character": c},
                              "end": {"line": i, "character": c + utf16_len(word)}},
                    "item": {"title": f"{label} {i}:{c}", "url": f"https://example.com/{label}/{i}/{c}",
                             "ui": {"hover": {"markdown": f"*hover* of {label} at {i}:{c}"}}},
                })
        return out

    def route(method, params, settings, req):
        if method == "meta":
            meta: dict = {"name": label, "annotations": {} if selectors is None else {"selectors": selectors}}
            if mentions is not None:
                meta["mentions"] = {"label": f"Search {label}"}
            if message_pattern is not None:
                meta["items"] = {"messageSelectors": [{"pattern": message_pattern}]}
            return result(meta)
        if method == "annotations":
            return result((annotations or annotate)(params))
        if method == "mentions":
            q = (params or {}).get("query") or ""
            return result([m for m in (mentions or []) if q.lower() in m["title"].lower()])
        if method == "items":
            if params.get("mention"):
                m = params["mention"]
                return result([{"title": m["title"], "ai": {"content": f"content of {m['uri']}"}}])
            return result([{"title": "for the message", "ai": {"content": f"{label} knows about: {params.get('message')}"}}])
        return HttpReply(body={"error": {"code": -32601, "message": f"no method {method}"}})

    return route


# --------------------------------------------------------------------------
# the editor
# --------------------------------------------------------------------------

LUA_TEST_MODULE = r"""
_G.amp_t = {}
local T = _G.amp_t
T.notes = {}
T.selects = {}
T.opened = {}
function T.record_notify()
  vim.notify = function(msg, level, opts)
    table.insert(T.notes, { msg = tostring(msg), level = level or vim.NIL })
  end
end
function T.pick_first()
  vim.ui.select = function(items, opts, on_choice)
    local shown = {}
    for _, it in ipairs(items) do
      table.insert(shown, opts.format_item and opts.format_item(it) or tostring(it))
    end
    table.insert(T.selects, { prompt = opts.prompt or vim.NIL, shown = shown, count = #items })
    vim.schedule(function() on_choice(items[1], items[1] and 1 or nil) end)
  end
end
function T.record_open()
  vim.ui.open = function(url)
    table.insert(T.opened, url)
    return nil, nil
  end
end
function T.open_doc(path, lines)
  local buf = vim.fn.bufadd(path)
  vim.fn.bufload(buf)
  vim.bo[buf].buflisted = true
  vim.bo[buf].swapfile = false
  -- Shown, as a user opens a file: annotations are drawn in windows only.
  vim.api.nvim_win_set_buf(0, buf)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  pcall(vim.api.nvim_buf_del_var, buf, "amp_openctx_annotations")
  require("amp.openctx").refresh(buf)
  return buf
end
function T.set_lines(buf, lines)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  pcall(vim.api.nvim_buf_del_var, buf, "amp_openctx_annotations")
  require("amp.openctx").refresh(buf)
end
function T.stored(buf)
  local ok, v = pcall(vim.api.nvim_buf_get_var, buf, "amp_openctx_annotations")
  if not ok then return vim.NIL end
  -- Stored as JSON text (decoded by amp.openctx.annotations() when asked).
  return type(v) == "string" and vim.json.decode(v) or v
end
local function mark_entry(m)
  local d = m[4]
  return { row = m[2], col = m[3], virt_text = d.virt_text or {}, pos = d.virt_text_pos or vim.NIL }
end
--- The lines (0-based, inclusive) each window showing `buf` shows.
function T.shown_ranges(buf)
  local out = {}
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_buf(win) == buf then
      table.insert(out, { win = win, top = vim.fn.line("w0", win) - 1, bottom = vim.fn.line("w$", win) - 1 })
    end
  end
  return out
end
--- What a user sees: after a redraw (which draws the lines coming into
--- view), the annotation extmarks on the lines that windows show.
function T.marks(buf)
  vim.cmd("redraw")
  local ns = vim.api.nvim_create_namespace("amp_openctx")
  local out, seen = {}, {}
  for _, shown in ipairs(T.shown_ranges(buf)) do
    local found = vim.api.nvim_buf_get_extmarks(buf, ns, { shown.top, 0 }, { shown.bottom, -1 }, { details = true })
    for _, m in ipairs(found) do
      if not seen[m[1]] then
        seen[m[1]] = true
        table.insert(out, mark_entry(m))
      end
    end
  end
  table.sort(out, function(a, b) return a.row < b.row end)
  return out
end
--- Every annotation extmark of `buf`, seen or not, without a redraw.
function T.all_marks(buf)
  local ns = vim.api.nvim_create_namespace("amp_openctx")
  return vim.tbl_map(mark_entry, vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true }))
end
--- The text on screen of line `lnum` (1-based) in window `win`, trailing
--- blanks removed; nil when the line is not on screen.
function T.screen_line(win, lnum)
  local row = vim.fn.screenpos(win, lnum, 1).row
  if row == 0 then
    return vim.NIL
  end
  local info = vim.fn.getwininfo(win)[1]
  local cells = {}
  for col = info.wincol, info.wincol + info.width - 1 do
    table.insert(cells, vim.fn.screenstring(row, col))
  end
  return (table.concat(cells):gsub("%s+$", ""))
end
"""


def reconfigure(ed: Editor, providers_lua: str, **openctx) -> None:
    """``require('amp').setup()`` again, with the current options but
    ``openctx.providers`` set to the Lua expression ``providers_lua`` (Lua
    tables as a user writes them: ``{}``, ``vim.empty_dict()``)."""
    ed.lua("local providers_fn, extra = ...\n"
           "local opts = vim.deepcopy(require('amp').get_config())\n"
           "opts.openctx.providers = assert(loadstring('return ' .. providers_fn))()\n"
           "for k, v in pairs(extra) do opts.openctx[k] = v end\n"
           "require('amp').setup(opts)", providers_lua, openctx or {"enabled": True})


def start(nvim_factory, providers: dict, *, agent: bool = False, **openctx) -> Editor:
    """A headless Neovim with OpenCtx configured (the Amp server only with ``agent``)."""
    opts = {"enabled": True, "providers": providers}
    opts.update(openctx)
    ed = nvim_factory(auto_start=agent, openctx=opts, _wait=agent)
    deadline = time.monotonic() + 10
    while ed.lua("return package.loaded['amp.openctx'] ~= nil and require('amp.openctx').enabled()") is not True:
        assert time.monotonic() < deadline, f"OpenCtx did not start: {ed.messages()} {ed.stderr()}"
        time.sleep(0.05)
    ed.lua(LUA_TEST_MODULE)
    return ed


def open_doc(ed: Editor, path: str | Path, lines: list[str]) -> int:
    """A buffer named ``path`` (need not exist on disk) holding ``lines``; asks for annotations."""
    return ed.lua("return amp_t.open_doc(...)", str(path), lines)


def set_lines(ed: Editor, buf: int, lines: list[str]) -> None:
    ed.lua("amp_t.set_lines(...)", buf, lines)


def stored(ed: Editor, buf: int) -> list[dict] | None:
    return ed.lua("return amp_t.stored(...)", buf)


def marks(ed: Editor, buf: int) -> list[dict]:
    """The annotation extmarks a user sees: on the lines windows show, after a redraw
    (annotations are drawn as their lines come into view)."""
    return ed.lua("return amp_t.marks(...)", buf)


def texts_of(found: list[dict]) -> dict[int, str]:
    """Row -> the virtual text at its end."""
    return {m["row"]: "".join(chunk[0] for chunk in m["virt_text"]) for m in found}


def mark_texts(ed: Editor, buf: int) -> dict[int, str]:
    """Row -> the virtual text shown at its end, on the lines windows show (after a redraw)."""
    return texts_of(marks(ed, buf))


def all_mark_texts(ed: Editor, buf: int) -> dict[int, str]:
    """Row -> virtual text of every annotation extmark, on screen or not (no redraw)."""
    return texts_of(ed.lua("return amp_t.all_marks(...)", buf))


def shown_ranges(ed: Editor, buf: int) -> list[dict]:
    """{win, top, bottom} (0-based lines, inclusive) of each window showing ``buf``."""
    return ed.lua("return amp_t.shown_ranges(...)", buf)


def screen_line(ed: Editor, win: int, lnum: int) -> str | None:
    """What the screen shows for line ``lnum`` (1-based) of window ``win``."""
    return ed.lua("return amp_t.screen_line(...)", win, lnum)


def tracked_buffers(ed: Editor) -> list[int]:
    """The buffers the native side keeps annotation state for."""
    return ed.lua("return require('amp.native').call('openctx_tracked_buffers')")


def notes(ed: Editor) -> list[dict]:
    return ed.lua("return amp_t.notes")


def wait_stored(ed: Editor, buf: int, pred: Callable[[list[dict]], bool] = lambda a: True,
                timeout: float = WAIT, what: str = "annotations") -> list[dict]:
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = stored(ed, buf)
        if last is not None and pred(last):
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what} in buffer {buf}; "
                                 f"stored: {json.dumps(last, ensure_ascii=False)[:2000]}; "
                                 f"marks: {marks(ed, buf)!r}; notes: {notes(ed)!r}")
        time.sleep(0.02)


def wait_marks(ed: Editor, buf: int, pred: Callable[[dict[int, str]], bool], timeout: float = WAIT,
               what: str = "extmarks") -> dict[int, str]:
    deadline = time.monotonic() + timeout
    while True:
        texts = mark_texts(ed, buf)
        if pred(texts):
            return texts
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}; marks: {texts!r}; "
                                 f"stored: {json.dumps(stored(ed, buf), ensure_ascii=False)[:2000]}; "
                                 f"notes: {notes(ed)!r}")
        time.sleep(0.02)


def titles(annotations: list[dict]) -> list[str]:
    return [a["item"]["title"] for a in annotations]


def plain_range(r: Any) -> dict | None:
    """A stored range as plain ints (None for none)."""
    if not isinstance(r, dict):
        return None
    return {k: {f: int(v[f]) if isinstance(v.get(f), (int, float)) else v.get(f) for f in ("line", "character")}
            for k, v in r.items() if isinstance(v, dict)}


# --------------------------------------------------------------------------
# processes
# --------------------------------------------------------------------------


def children_with(ppid: int, needle: str) -> list[int]:
    """Live (not zombie) children of ``ppid`` whose command line contains ``needle``."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        state, parent = fields[0], int(fields[1])
        if parent == ppid and state != "Z" and needle in cmdline:
            out.append(int(entry))
    return sorted(out)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:].split()[0] != "Z"


# --------------------------------------------------------------------------
# the reference client
# --------------------------------------------------------------------------


def run_reference(tmp: Path, providers: dict, documents: list[dict], timeout: float = 30,
                  mentions: list[dict] | None = None) -> dict:
    """Runs differential/reference.mjs (@openctx/client 0.0.30) on the documents
    (and the mention requests)."""
    require_node_modules(REFERENCE_CLIENT)
    inp = tmp / "reference-input.json"
    inp.write_text(json.dumps({"providers": providers, "documents": documents, "mentions": mentions or []}),
                   "utf-8")
    proc = subprocess.run(["node", str(REFERENCE_SCRIPT), str(inp)], capture_output=True, timeout=timeout,
                          cwd=str(FIXTURES))
    assert proc.returncode == 0, f"reference.mjs failed ({proc.returncode}): {proc.stderr.decode()[-3000:]}"
    return json.loads(proc.stdout)
