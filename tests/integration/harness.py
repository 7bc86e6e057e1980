"""The harness shared by the integration tests (conftest.py's fixtures) and
the benchmarks (benches/bench/): a headless Neovim that loads this
repository's plugin, its HOME/XDG tree, the lockfile it writes, WebSocket
clients (the `websockets` client and a hand-written upgrade request), Lua
literals, file URIs and time bounds. No pytest in here.

Environment:
  AMP_NVIM        the nvim binary (default: <repo>/.venv/bin/nvim)
"""

from __future__ import annotations

import base64
import itertools
import contextlib
import json
import os
import re
import signal
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any, Callable

import pynvim
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect_raw

REPO = Path(__file__).resolve().parents[2]
LIBRARY = REPO / "target" / "release" / "libamp_core.so"

LOCKFILE_TIMEOUT = 10.0
RESPONSE_TIMEOUT = 10.0
TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{43,}$")


def _nvim_binary() -> str:
    configured = os.environ.get("AMP_NVIM")
    if not configured:
        return str(REPO / ".venv" / "bin" / "nvim")
    path = Path(configured)
    if not path.is_absolute():
        # relative to the current directory, else to the repository
        path = path.resolve() if path.exists() else (REPO / configured)
    return str(path)


NVIM = _nvim_binary()


class TestTimeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: float, error: BaseException):
    """Raises ``error`` in the main thread (SIGALRM) when the block runs past
    ``seconds``; the timer is off again afterwards."""
    def on_alarm(signum, frame):
        raise error

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def tighter_time_bound(limit: float, what: str):
    """Inside a test (already bounded by _bounded_test_time): a tighter bound
    of ``limit`` seconds, for suites whose every test must be quick."""
    def on_alarm(signum, frame):
        raise TestTimeout(f"{what} exceeded {limit:.0f} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    remaining = signal.getitimer(signal.ITIMER_REAL)[0]
    signal.setitimer(signal.ITIMER_REAL, min(limit, remaining or limit))
    try:
        yield
    finally:
        signal.signal(signal.SIGALRM, previous)


# --------------------------------------------------------------------------
# Lua literals
# --------------------------------------------------------------------------


def lua_string(s: str) -> str:
    """A Lua string literal, ASCII only (non-ASCII bytes as \\ddd escapes)."""
    out = ['"']
    for b in s.encode("utf-8"):
        if b in (0x22, 0x5C):
            out.append("\\" + chr(b))
        elif 0x20 <= b < 0x7F:
            out.append(chr(b))
        else:
            out.append("\\%03d" % b)
    out.append('"')
    return "".join(out)


def lua_literal(value: Any) -> str:
    if value is None:
        return "nil"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return lua_string(value)
    if isinstance(value, dict):
        items = ", ".join(f"[{lua_string(str(k))}] = {lua_literal(v)}" for k, v in value.items())
        return "{ " + items + " }"
    if isinstance(value, (list, tuple)):
        return "{ " + ", ".join(lua_literal(v) for v in value) + " }"
    raise TypeError(f"cannot express {value!r} in Lua")


# --------------------------------------------------------------------------
# URIs
# --------------------------------------------------------------------------


def file_uri(path: str | Path, fragment: str = "") -> str:
    """RFC 3986 file URI: every byte outside unreserved and '/' percent-encoded."""
    uri = "file://" + urllib.parse.quote(str(path), safe="/")
    return uri + (("#" + fragment) if fragment else "")


def uri_to_path(uri: str) -> str:
    assert uri.startswith("file://"), uri
    rest = uri[len("file://"):]
    if rest.startswith("localhost/"):
        rest = rest[len("localhost"):]
    return urllib.parse.unquote(rest, errors="strict")


# --------------------------------------------------------------------------
# per-test directory tree
# --------------------------------------------------------------------------


class AmpEnv:
    """A fresh HOME / XDG tree plus a workspace directory."""

    def __init__(self, root: Path, workspace_name: str = "workspace"):
        self.root = Path(os.path.realpath(root))
        self.home = self.root / "home"
        self.data_home = self.root / "xdg data"
        self.state_home = self.root / "xdg-state"
        self.config_home = self.root / "xdg-config"
        self.cache_home = self.root / "xdg-cache"
        self.workspace = self.root / workspace_name
        for d in (self.home, self.data_home, self.state_home, self.config_home,
                  self.cache_home, self.workspace):
            d.mkdir(parents=True, exist_ok=True)
        self.environ = dict(os.environ)
        for var in ("AMP_DATA_HOME", "NVIM", "NVIM_LISTEN_ADDRESS", "VIMINIT", "EXINIT",
                    "MYVIMRC", "NVIM_APPNAME", "VIMRUNTIME", "VIM", "XDG_RUNTIME_DIR",
                    "XDG_CONFIG_DIRS", "XDG_DATA_DIRS"):
            self.environ.pop(var, None)
        self.environ.update({
            "HOME": str(self.home),
            "XDG_DATA_HOME": str(self.data_home),
            "XDG_STATE_HOME": str(self.state_home),
            "XDG_CONFIG_HOME": str(self.config_home),
            "XDG_CACHE_HOME": str(self.cache_home),
            "NVIM_LOG_FILE": str(self.root / "nvim-internal.log"),
        })

    @property
    def lockfile_dir(self) -> Path:
        amp_home = self.environ.get("AMP_DATA_HOME")
        base = Path(amp_home) if amp_home else self.data_home
        return base / "amp" / "ide"


# --------------------------------------------------------------------------
# lockfiles
# --------------------------------------------------------------------------


def read_lockfiles(directory: Path) -> dict[Path, dict]:
    out = {}
    if not directory.is_dir():
        return out
    for p in sorted(directory.glob("*.json")):
        try:
            out[p] = json.loads(p.read_text("utf-8"))
        except (OSError, ValueError):
            continue  # vanished or (should never happen) half-written
    return out


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.1f} s waiting for {what}")
        time.sleep(interval)


def lockfile_names_ok(directory: Path) -> list[str]:
    """Names in the lockfile directory that are not <digits>.json (temp files etc.)."""
    if not directory.is_dir():
        return []
    return sorted(n for n in os.listdir(directory) if not re.fullmatch(r"\d+\.json", n))


# --------------------------------------------------------------------------
# WebSocket client
# --------------------------------------------------------------------------


class ProtocolError(AssertionError):
    pass


class Client:
    """A WebSocket client speaking both dialects; notifications are collected."""

    _ids = itertools.count(1)

    def __init__(self, ws):
        self.ws = ws
        self.notifications: list[dict] = []
        self.stray: list[dict] = []  # responses nobody waited for yet

    # -- raw ------------------------------------------------------------
    def send_json(self, obj: Any) -> None:
        self.ws.send(json.dumps(obj))

    def send_text(self, text: str) -> None:
        self.ws.send(text)

    def recv_message(self, timeout: float = RESPONSE_TIMEOUT) -> dict:
        raw = self.ws.recv(timeout=timeout)
        if isinstance(raw, bytes):
            raise ProtocolError(f"server sent a binary frame: {raw[:200]!r}")
        try:
            msg = json.loads(raw)
        except ValueError as e:
            raise ProtocolError(f"server sent non-JSON text {raw[:300]!r}: {e}")
        if not isinstance(msg, dict) or len(msg) != 1:
            raise ProtocolError(f"server frame is not a one-key object: {raw[:500]}")
        return msg

    def recv_response(self, id: str | None, timeout: float = RESPONSE_TIMEOUT) -> dict:
        """The inner serverResponse object whose id equals ``id`` (skipping notifications)."""
        for i, msg in enumerate(self.stray):
            if msg["id"] == id:
                return self.stray.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no serverResponse with id {id!r} within {timeout} s "
                                   f"(stray responses: {self.stray!r})")
            try:
                msg = self.recv_message(timeout=remaining)
            except TimeoutError:
                raise TimeoutError(f"no serverResponse with id {id!r} within {timeout} s "
                                   f"(stray responses: {self.stray!r})") from None
            if "serverNotification" in msg:
                self.notifications.append(msg["serverNotification"])
                continue
            if "serverResponse" not in msg:
                raise ProtocolError(f"unexpected frame {msg!r}")
            inner = msg["serverResponse"]
            if not isinstance(inner, dict) or "id" not in inner:
                raise ProtocolError(f"serverResponse without id: {msg!r}")
            if inner["id"] == id:
                return inner
            self.stray.append(inner)

    # -- requests -------------------------------------------------------
    def next_id(self) -> str:
        return str(next(Client._ids))

    def send_request(self, method: str, params: Any, id: str | None = None) -> str:
        id = id if id is not None else self.next_id()
        self.send_json({"clientRequest": {"id": id, method: params}})
        return id

    def send_request_qr(self, method: str, params: Any, id: str | None = None) -> str:
        id = id if id is not None else self.next_id()
        self.send_json({"clientRequest": {"id": id, "method": {method: params}}})
        return id

    def request(self, method: str, params: Any, id: str | None = None,
                timeout: float = RESPONSE_TIMEOUT) -> dict:
        """Flat (CLI) dialect; returns the inner serverResponse object."""
        return self.recv_response(self.send_request(method, params, id), timeout)

    def request_qr(self, method: str, params: Any, id: str | None = None,
                   timeout: float = RESPONSE_TIMEOUT) -> dict:
        """Quick-reference dialect; returns the inner serverResponse object."""
        return self.recv_response(self.send_request_qr(method, params, id), timeout)

    def call(self, method: str, params: Any, timeout: float = RESPONSE_TIMEOUT) -> Any:
        """Flat request that must succeed; returns the result under the method's key."""
        resp = self.request(method, params, timeout=timeout)
        assert "error" not in resp, f"{method} {params!r} -> error {resp!r}"
        assert method in resp, f"{method} response lacks key {method!r}: {resp!r}"
        return resp[method]

    def ping(self, message: str = "are you there", timeout: float = RESPONSE_TIMEOUT) -> None:
        result = self.call("ping", {"message": message}, timeout=timeout)
        assert result == {"message": message}, result

    def wait_closed(self, timeout: float = RESPONSE_TIMEOUT) -> tuple[int | None, str | None, list]:
        """Reads until the server closes; returns (code, reason, frames received before)."""
        frames = []
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"server did not close within {timeout} s; got {frames!r}")
            try:
                frames.append(self.ws.recv(timeout=remaining))
            except ConnectionClosed as e:
                rcvd = e.rcvd
                if rcvd is None:
                    return None, None, frames
                return rcvd.code, rcvd.reason, frames
            except TimeoutError:
                raise TimeoutError(f"server did not close within {timeout} s; got {frames!r}") from None

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:
            pass


def ws_url(port: int, token: str | None, host: str = "localhost") -> str:
    if token is None:
        return f"ws://{host}:{port}/"
    return f"ws://{host}:{port}/?auth={urllib.parse.quote(token, safe='')}"


def open_client(port: int, token: str | None, *, host: str = "localhost",
                origin: str | None = None, compression: str | None = "deflate",
                timeout: float = 5) -> Client:
    ws = ws_connect_raw(
        ws_url(port, token, host),
        open_timeout=timeout,
        close_timeout=2,
        max_size=None,
        origin=origin,
        compression=compression,
        proxy=None,
        ping_interval=None,
        legacy=True,
    )
    return Client(ws)


# module-level helpers (the brief's names)
def request(client: Client, method: str, params: Any, id: str | None = None) -> dict:
    return client.request(method, params, id)


def request_qr(client: Client, method: str, params: Any, id: str | None = None) -> dict:
    return client.request_qr(method, params, id)


def recv_response(client: Client, id: str | None, timeout: float = RESPONSE_TIMEOUT) -> dict:
    return client.recv_response(id, timeout)


# --------------------------------------------------------------------------
# raw HTTP handshake
# --------------------------------------------------------------------------


class RawHandshake:
    def __init__(self, status: int, status_line: str, headers: dict[str, str], sock: socket.socket):
        self.status = status
        self.status_line = status_line
        self.headers = headers
        self.sock = sock

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def upgrade_request(port: int, token: str | None, *, host: str | None = "__default__",
                    origin: str | None = None, extra_headers: list[tuple[str, str]] = ()) -> bytes:
    """A hand-written WebSocket upgrade request (host=None: no Host header)."""
    if host == "__default__":
        host = f"localhost:{port}"
    target = "/" if token is None else f"/?auth={urllib.parse.quote(token, safe='')}"
    lines = [f"GET {target} HTTP/1.1"]
    if host is not None:
        lines.append(f"Host: {host}")
    lines += [
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: " + base64.b64encode(os.urandom(16)).decode(),
        "Sec-WebSocket-Version: 13",
    ]
    if origin is not None:
        lines.append(f"Origin: {origin}")
    for k, v in extra_headers:
        lines.append(f"{k}: {v}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8")


def raw_handshake(port: int, *, token: str | None, host: str | None = "__default__",
                  origin: str | None = None, extra_headers: list[tuple[str, str]] = (),
                  timeout: float = 5.0, keep_open: bool = False) -> RawHandshake:
    """Sends a hand-written WebSocket upgrade request; returns the status line parsed."""
    data = upgrade_request(port, token, host=host, origin=origin, extra_headers=extra_headers)
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.settimeout(timeout)
    sock.sendall(data)
    buf = b""
    try:
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(4096)
            if not chunk:
                break
            buf += chunk
    except socket.timeout:
        pass
    head = buf.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    head_lines = head.split("\r\n")
    status_line = head_lines[0] if head_lines else ""
    m = re.match(r"HTTP/1\.[01] (\d{3})", status_line)
    if not m:
        sock.close()
        raise AssertionError(f"no HTTP status line from server; got {buf[:300]!r}")
    headers = {}
    for line in head_lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    hs = RawHandshake(int(m.group(1)), status_line, headers, sock)
    if not keep_open:
        hs.close()
    return hs


# --------------------------------------------------------------------------
# Neovim
# --------------------------------------------------------------------------


class Editor:
    """A headless Neovim in ``env``, attached over RPC, that loads this
    repository's plugin and calls ``require('amp').setup(setup_opts)``
    (a dict, or a Lua expression as a string). ``plugin=False``: a bare
    Neovim (a benchmark's baseline); ``extra_cmds``: --cmd's run first."""

    def __init__(self, env: AmpEnv, cwd: Path, setup_opts: dict | str, extra_env: dict | None,
                 plugin_before: str | None = None, *, plugin: bool = True,
                 extra_cmds: tuple[str, ...] = ()):
        self.env = env
        self.cwd = Path(cwd)
        self.setup_opts = setup_opts
        self.sock_dir = tempfile.mkdtemp(prefix="ampit-")
        self.sock = os.path.join(self.sock_dir, "nvim.sock")
        self.stderr_path = env.root / f"nvim-stderr-{os.path.basename(self.sock_dir)}.log"
        self.clients: list[Client] = []
        self.nvim: pynvim.Nvim | None = None
        self.exited = False
        environ = dict(env.environ)
        if extra_env:
            for k, v in extra_env.items():
                if v is None:
                    environ.pop(k, None)
                else:
                    environ[k] = v
        self.environ = environ
        opts = setup_opts if isinstance(setup_opts, str) else lua_literal(setup_opts)
        argv = [NVIM, "--headless", "--clean", "--listen", self.sock]
        for cmd in extra_cmds:
            argv += ["--cmd", cmd]
        if plugin:
            argv += ["--cmd", f"set rtp^={REPO}"]
            if plugin_before:
                argv += ["--cmd", plugin_before]
            argv += ["-c", f"lua require('amp').setup({opts})"]
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            argv, cwd=str(self.cwd), env=environ, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=self._stderr, start_new_session=True,
        )
        self.pid = self.proc.pid
        try:
            self._attach()
        except BaseException:
            self.shutdown()
            raise

    def _attach(self) -> None:
        deadline = time.monotonic() + 10
        while not os.path.exists(self.sock):
            if self.proc.poll() is not None:
                raise AssertionError(f"nvim exited early with {self.proc.returncode}: {self.stderr()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"nvim socket {self.sock} did not appear: {self.stderr()}")
            time.sleep(0.02)
        last = None
        while time.monotonic() < deadline:
            try:
                self.nvim = pynvim.attach("socket", path=self.sock)
                return
            except OSError as e:
                last = e
                time.sleep(0.05)
        raise AssertionError(f"could not attach to nvim: {last}")

    # -- diagnostics for failures ------------------------------------------
    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text("utf-8", errors="replace")
        except OSError:
            return ""

    def messages(self) -> str:
        try:
            return self.nvim.command_output("messages") if self.nvim else ""
        except Exception as e:  # nvim gone
            return f"<no messages: {e}>"

    # -- helpers ----------------------------------------------------------
    def lua(self, code: str, *args) -> Any:
        return self.nvim.exec_lua(code, *args)

    @property
    def lockfile_dir(self) -> Path:
        amp_home = self.environ.get("AMP_DATA_HOME")
        base = Path(amp_home) if amp_home else self.env.data_home
        return base / "amp" / "ide"

    def own_lockfiles(self) -> dict[Path, dict]:
        return {p: d for p, d in read_lockfiles(self.lockfile_dir).items()
                if isinstance(d, dict) and d.get("pid") == self.pid}

    def wait_lockfile(self, timeout: float = LOCKFILE_TIMEOUT,
                      where: Callable[[dict], bool] | None = None) -> tuple[Path, dict]:
        deadline = time.monotonic() + timeout
        while True:
            found = [(p, d) for p, d in self.own_lockfiles().items() if where is None or where(d)]
            if found:
                assert len(found) == 1, f"more than one lockfile for pid {self.pid}: {found!r}"
                return found[0]
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"nvim exited ({self.proc.returncode}) before writing its lockfile; "
                    f"stderr: {self.stderr()}")
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"no lockfile for pid {self.pid} in {self.lockfile_dir} within {timeout} s; "
                    f"dir has {sorted(os.listdir(self.lockfile_dir)) if self.lockfile_dir.is_dir() else 'nothing'}; "
                    f"stderr: {self.stderr()!r}; messages: {self.messages()!r}")
            time.sleep(0.05)

    @property
    def lock(self) -> dict:
        return self.wait_lockfile()[1]

    def connect(self, token: str | None | object = ..., **kw) -> Client:
        lock = self.lock
        client = open_client(lock["port"], lock["authToken"] if token is ... else token, **kw)
        self.clients.append(client)
        return client

    def edit(self, path: str | Path) -> None:
        self.nvim.command("edit " + self.nvim.funcs.fnameescape(str(path)))

    def buf_lines(self, path: str | Path) -> list[str] | None:
        """Lines of the loaded buffer named ``path`` (None when there is none)."""
        return self.lua(
            """
            local want = ...
            for _, b in ipairs(vim.api.nvim_list_bufs()) do
              if vim.api.nvim_buf_get_name(b) == want and vim.api.nvim_buf_is_loaded(b) then
                return vim.api.nvim_buf_get_lines(b, 0, -1, false)
              end
            end
            return vim.NIL
            """, str(path))

    def bufnr(self, path: str | Path) -> int:
        return self.lua(
            """
            local want = ...
            for _, b in ipairs(vim.api.nvim_list_bufs()) do
              if vim.api.nvim_buf_get_name(b) == want then return b end
            end
            return -1
            """, str(path))

    def quit(self, command: str = "qa!", timeout: float = 5.0) -> int:
        """Runs :qa (or the given command) and waits for the process to exit."""
        try:
            self.nvim.command(command)
        except Exception:
            pass  # EOF / connection reset: nvim is gone
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"nvim did not exit within {timeout} s after {command!r}")
        self.exited = True
        return rc

    def shutdown(self) -> None:
        for c in self.clients:
            c.close()
        if self.proc.poll() is None and self.nvim is not None:
            try:
                self.nvim.command("qa!")
            except Exception:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=5)
        try:
            if self.nvim is not None:
                self.nvim.close()
        except Exception:
            pass
        self._stderr.close()
        shutil.rmtree(self.sock_dir, ignore_errors=True)


def responsive(ed: Editor, within: float = 1.0) -> float:
    """Neovim answers an RPC request within ``within`` seconds; returns the time."""
    t = time.monotonic()
    assert ed.nvim.eval("1 + 1") == 2
    took = time.monotonic() - t
    assert took < within, f"nvim took {took:.3f} s to answer"
    return took


def flood_diagnostics_and_log_moves(ed: Editor) -> None:
    """In the current buffer (3000 lines): 300 diagnostics, so that a
    getDiagnostics is a few ms of main-thread work; the cursor on line 1000;
    each CursorMoved appends { vim.uv.hrtime(), cursor line } to _G.amp_moves."""
    ed.lua("""
        local ns = vim.api.nvim_create_namespace("amp-flood")
        local d = {}
        for i = 0, 2999, 10 do
          d[#d + 1] = { lnum = i, col = 0, end_col = 4, message = "diagnostic " .. i, severity = 1 }
        end
        vim.diagnostic.set(ns, 0, d)
        vim.api.nvim_win_set_cursor(0, { 1000, 0 })
        _G.amp_moves = {}
        vim.api.nvim_create_autocmd("CursorMoved", { callback = function()
          local t = _G.amp_moves
          t[#t + 1] = { vim.uv.hrtime(), vim.api.nvim_win_get_cursor(0)[1] }
        end })
    """)


def _dump_logs(root: Path) -> None:
    for p in sorted(root.rglob("*.log")):
        try:
            text = p.read_text("utf-8", errors="replace")
        except OSError:
            continue
        if not text.strip():
            continue
        lines = text.splitlines()
        print(f"===== {p} (last {min(len(lines), 150)} of {len(lines)} lines) =====")
        print("\n".join(lines[-150:]))


def listening_addresses(port: int) -> list[str]:
    """Local addresses of LISTEN sockets on ``port`` from /proc/net/tcp{,6}."""
    out = []
    for name, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state = fields[1], fields[3]
            if state != "0A":
                continue
            addr_hex, port_hex = local.split(":")
            if int(port_hex, 16) != port:
                continue
            raw = bytes.fromhex(addr_hex)
            if v6:
                words = [raw[i:i + 4][::-1] for i in range(0, 16, 4)]
                out.append(socket.inet_ntop(socket.AF_INET6, b"".join(words)))
            else:
                out.append(socket.inet_ntop(socket.AF_INET, raw[::-1]))
    return out


def connections_of_session(sid: int, port: int) -> set[int]:
    """Local ports of the ESTABLISHED TCP connections to ``port`` that the
    processes of session ``sid`` hold (from /proc: which process owns
    which socket inode)."""
    inodes: set[str] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if os.getsid(int(proc.name)) != sid:
                continue
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    out: set[int] = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
            if state == "01" and inode in inodes and int(remote.split(":")[1], 16) == port:
                out.add(int(local.split(":")[1], 16))
    return out


def port_accepts(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def dead_pid() -> int:
    """A pid that belonged to a process which has exited."""
    p = subprocess.Popen(["true"])
    p.wait()
    try:
        os.kill(p.pid, 0)
    except ProcessLookupError:
        return p.pid
    for candidate in range(4_000_000, 3_000_000, -7919):
        try:
            os.kill(candidate, 0)
        except ProcessLookupError:
            return candidate
        except PermissionError:
            continue
    raise RuntimeError("no dead pid found")
