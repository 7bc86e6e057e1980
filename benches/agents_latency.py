#!/usr/bin/env python3
"""Several attach protocols served from one editor state (issue #13):

1. keystroke -> selection notification at each protocol's client, all
   connected to the same Neovim (one published selection serves them all);
2. main-thread CPU per cursor move with one client of each protocol
   connected, against the same Neovim set-up serving Amp alone (one Amp
   client): the protocols must add nothing on the main thread.

    AMP_NVIM=.venv/bin/nvim .venv/bin/python benches/agents_latency.py [samples]

The keystroke is an `nvim_input` RPC notification (one way); each client's
reader (a Python thread) records when its notification arrives. The CPU
figure is the main thread's own clock (CLOCK_THREAD_CPUTIME_ID read from
Lua) around 50,000 cursor moves, each followed by CursorMoved; runs of the
two editors alternate and the median of the per-pair differences is
printed (a load that changes meanwhile moves both runs of a pair alike).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

import pynvim
from websockets.sync.client import connect

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benches"))
from bench.editor import LUA_THREAD_CPU  # noqa: E402 - the main thread's CPU clock, as the benchmarks read it

NVIM = os.environ.get("AMP_NVIM", str(ROOT / ".venv" / "bin" / "nvim"))

# Every front-end with a listener this benchmark has a client for.
HTTP_AGENTS = ("gemini", "qwen", "mcp", "copilot")

MOVES = 50_000
PAIRS = 7

# Main-thread CPU and wall time of `n` cursor moves, each followed by CursorMoved.
LUA_MOVES = LUA_THREAD_CPU + r"""
local n = ...
local set, exec = vim.api.nvim_win_set_cursor, vim.api.nvim_exec_autocmds
local c0 = amp_bench_thread_cpu_ns()
for i = 1, n do
  set(0, { (i % 2) + 1, 0 })
  exec('CursorMoved', {})
end
return amp_bench_thread_cpu_ns() - c0
"""


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


class Editor:
    """A headless Neovim with the plugin, `agents` enabled, and one client
    of each enabled protocol connected and reading."""

    def __init__(self, agents: dict):
        self.agents = agents
        self.tmp = Path(tempfile.mkdtemp(prefix="agents-bench-"))
        env = dict(os.environ, HOME=str(self.tmp / "home"), XDG_DATA_HOME=str(self.tmp / "data"),
                   XDG_STATE_HOME=str(self.tmp / "state"), XDG_CONFIG_HOME=str(self.tmp / "config"),
                   TMPDIR=str(self.tmp))
        for d in ("home", "data", "state", "config"):
            (self.tmp / d).mkdir()
        f = self.tmp / "file.txt"
        f.write_text("".join(f"line {i} with some text\n" for i in range(1000)))
        sock = str(self.tmp / "nvim.sock")
        spec = ", ".join(f"{k} = {str(v).lower()}" for k, v in agents.items())
        self.proc = subprocess.Popen(
            # matchparen's CursorMoved costs ~30 µs a move: off, as in benches/bench.
            [NVIM, "--headless", "--clean", "--listen", sock, "--cmd", "let g:loaded_matchparen = 1",
             "--cmd", f"set rtp^={ROOT}",
             "-c", f"lua require('amp').setup({{ agents = {{ {spec} }} }})", str(f)],
            env=env, cwd=str(self.tmp), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not os.path.exists(sock):
            time.sleep(0.02)
            assert time.monotonic() < deadline, "nvim did not start"
        self.nvim = pynvim.attach("socket", path=sock)
        self.status = self._wait_ready(deadline)
        self.arrivals: dict[str, list] = {}
        self.sockets = []
        self.stop = threading.Event()
        self._connect_amp()
        if agents.get("claude") and os.environ.get("AMP_BENCH_NO_CLAUDE_CLIENT") != "1":
            self._connect_claude()
        for name in ("gemini", "qwen"):
            if agents.get(name):
                self._connect_http(name, "ide/contextUpdate")
        if agents.get("mcp"):
            self._connect_http("mcp", "notifications/resources/updated", subscribe="neovim://selection")
        if agents.get("copilot"):
            self._connect_http("copilot", "selection_changed")
        time.sleep(3.0)  # past the re-sends that follow a connection

    def _wait_ready(self, deadline):
        status = None
        while time.monotonic() < deadline:
            status = self.nvim.exec_lua("return require('amp').status()")
            ready = status.get("lockfile") and os.path.exists(status["lockfile"])
            for name in HTTP_AGENTS + ("claude",):
                info = (status.get("agents") or {}).get(name) or {}
                if self.agents.get(name) and not (info.get("port") or info.get("socket")):
                    ready = False
                elif self.agents.get(name) and not os.path.exists(info.get("discovery_file") or ""):
                    ready = False
            if ready:
                return status
            time.sleep(0.05)
        raise AssertionError(f"the servers did not start: {status!r}")

    def _reader(self, name, recv, marker):
        self.arrivals[name] = []

        def run():
            while not self.stop.is_set():
                try:
                    msg = recv()
                except TimeoutError:
                    continue
                except Exception:
                    return
                if msg and marker in msg:
                    self.arrivals[name].append(time.perf_counter())

        threading.Thread(target=run, daemon=True).start()

    def _connect_amp(self):
        lock = json.loads(Path(self.status["lockfile"]).read_text())
        ws = connect(f"ws://127.0.0.1:{self.status['port']}/?auth={urllib.parse.quote(lock['authToken'])}",
                     proxy=None, compression=None, legacy=True)
        self.sockets.append(ws)
        self._reader("amp", lambda: ws.recv(timeout=0.2), "selectionDidChange")

    def _connect_claude(self):
        info = self.status["agents"]["claude"]
        lock = json.loads(Path(info["lockfile"]).read_text())
        ws = connect(f"ws://127.0.0.1:{info['port']}/", proxy=None, compression=None, subprotocols=["mcp"],
                     legacy=True, additional_headers={"x-claude-code-ide-authorization": lock["authToken"]})
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                            "params": {"protocolVersion": "2025-11-25"}}))
        ws.send(json.dumps({"jsonrpc": "2.0", "method": "ide_connected", "params": {"pid": os.getpid()}}))
        self.sockets.append(ws)
        self._reader("claude", lambda: ws.recv(timeout=0.2), "selection_changed")

    def _connect_http(self, name, marker, subscribe=None):
        # Gemini CLI, Qwen Code, the MCP server and Copilot CLI: MCP over
        # streamable HTTP; notifications come on the GET /mcp event stream.
        # The discovery file has the port and a bearer token, or (Copilot)
        # the Unix socket and a Nonce header. The MCP server tells a session
        # of the selection only once it subscribed to neovim://selection.
        import http.client
        import socket
        info = self.status["agents"][name]
        discovery = json.loads(Path(info["discovery_file"]).read_text())
        if "socketPath" in discovery:
            auth = discovery["headers"]["Authorization"]
            host = "localhost"

            def dial():
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(discovery["socketPath"])
                return s
        else:
            auth = f"Bearer {discovery['authToken']}"
            host = f"127.0.0.1:{info['port']}"

            def dial():
                return socket.create_connection(("127.0.0.1", info["port"]))

        def post(body, session=None):
            conn = http.client.HTTPConnection("localhost", timeout=5)
            conn.sock = dial()
            conn.request("POST", "/mcp", json.dumps(body), {
                "Host": host, "Authorization": auth, "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream", **({"mcp-session-id": session} if session else {})})
            resp = conn.getresponse()
            resp.read()
            conn.close()
            return resp

        session = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}}).getheader("mcp-session-id")
        post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        if subscribe:
            post({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": subscribe}},
                 session)
        # The stream is read from the raw socket: http.client's response
        # refuses every read after one timed out ("cannot read from timed out
        # object"), and the reader polls with a timeout. Each event is one
        # chunk, so a chunk holds the whole method name.
        stream = dial()
        stream.sendall((f"GET /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: {auth}\r\n"
                        f"Accept: text/event-stream\r\nmcp-session-id: {session}\r\n\r\n").encode())
        stream.settimeout(0.2)
        self.sockets.append(stream)

        def recv():
            try:
                data = stream.recv(65536)
            except socket.timeout:
                raise TimeoutError from None
            if not data:
                raise EOFError("the event stream ended")
            return data.decode("utf-8", "replace")

        self._reader(name, recv, marker)

    def moves_cpu_us(self, n: int) -> float:
        return self.nvim.exec_lua(LUA_MOVES, n) / 1e3 / n

    def latency(self, samples: int) -> dict[str, list[float]]:
        lat = {k: [] for k in self.arrivals}
        for i in range(samples):
            key = "j" if i % 2 == 0 else "k"
            counts = {k: len(v) for k, v in self.arrivals.items()}
            t0 = time.perf_counter()
            self.nvim.request("nvim_input", key, async_=True)
            end = time.monotonic() + 2
            while time.monotonic() < end and any(len(self.arrivals[k]) <= counts[k] for k in self.arrivals):
                time.sleep(0.0001)
            for k in lat:
                if len(self.arrivals[k]) > counts[k]:
                    lat[k].append(self.arrivals[k][counts[k]] - t0)
            time.sleep(0.02)
        return lat

    def close(self):
        self.stop.set()
        for ws in self.sockets:
            try:
                ws.close()
            except Exception:
                pass
        try:
            self.nvim.command("qa!")
        except Exception:
            pass  # the connection ends with Neovim
        try:
            self.proc.wait(timeout=5)
        except Exception:
            self.proc.kill()


def main():
    samples = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    gemini = os.environ.get("AMP_BENCH_GEMINI", "1") != "0"
    every = {"amp": True, "claude": True}
    if gemini:
        every.update({name: True for name in HTTP_AGENTS})
        # Codex's sockets serve the hook and /ide on request: served, with
        # nothing to push per cursor move (no client of it here).
        every["codex"] = True
    if os.environ.get("AMP_BENCH_SAME") == "1":  # noise check: the same set-up twice
        every = {"amp": True}
    amp_only = Editor({"amp": True})
    try:
        all_of_them = Editor(every)
    except Exception:
        amp_only.close()
        raise
    try:
        for ed in (amp_only, all_of_them):
            # benches/bench/cursor_moves.py's two-line file: the moves alternate between its lines.
            moves = ed.tmp / "moves.txt"
            moves.write_text("first line é→😀\nsecond line\n", encoding="utf-8")
            ed.nvim.command("edit " + str(moves))
            ed.moves_cpu_us(MOVES // 5)  # warm-up
        pairs = []
        for _ in range(PAIRS):
            a = amp_only.moves_cpu_us(MOVES)
            b = all_of_them.moves_cpu_us(MOVES)
            pairs.append((a, b))
            time.sleep(0.02)
        a_med = statistics.median(a for a, _ in pairs)
        b_med = statistics.median(b for _, b in pairs)
        diff = statistics.median(b - a for a, b in pairs)
        names = ", ".join(k for k in every if k != "codex") + (", codex served" if every.get("codex") else "")
        print(f"main-thread CPU per cursor move: Amp only (1 client) {a_med:.2f} µs; {names} (one client each) "
              f"{b_med:.2f} µs; difference {diff:+.2f} µs (median of {PAIRS} pairs of {MOVES} moves)")
        for ed in (amp_only, all_of_them):
            ed.nvim.command("edit " + str(ed.tmp / "file.txt"))
        for name, values in all_of_them.latency(samples).items():
            print(f"{name}: keystroke -> selection notification p50 {pct(values, 50) * 1000:.2f} ms, "
                  f"p99 {pct(values, 99) * 1000:.2f} ms (n={len(values)})")
        for name, values in amp_only.latency(samples).items():
            print(f"{name} (Amp only): keystroke -> selection notification p50 {pct(values, 50) * 1000:.2f} ms, "
                  f"p99 {pct(values, 99) * 1000:.2f} ms (n={len(values)})")
    finally:
        amp_only.close()
        all_of_them.close()


if __name__ == "__main__":
    main()
