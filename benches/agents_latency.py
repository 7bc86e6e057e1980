#!/usr/bin/env python3
"""Keystroke -> selection notification at an Amp client and at a Claude
client, both connected to the same Neovim (agents = { amp, claude }): one
published selection serves both protocols.

    AMP_NVIM=.venv/bin/nvim .venv/bin/python benches/agents_latency.py [samples] [amp-only]

The keystroke is an `nvim_input` RPC notification (one way); each client
records when its notification arrives. Prints p50/p99 per protocol.
"""

import json
import os
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

import pynvim
from websockets.sync.client import connect

ROOT = Path(__file__).resolve().parents[1]
NVIM = os.environ.get("AMP_NVIM", str(ROOT / ".venv" / "bin" / "nvim"))


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def main():
    samples = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with_claude = "amp-only" not in sys.argv[2:]
    tmp = Path(tempfile.mkdtemp(prefix="agents-bench-"))
    env = dict(os.environ, HOME=str(tmp / "home"), XDG_DATA_HOME=str(tmp / "data"),
               XDG_STATE_HOME=str(tmp / "state"), XDG_CONFIG_HOME=str(tmp / "config"))
    for d in ("home", "data", "state", "config"):
        (tmp / d).mkdir()
    f = tmp / "file.txt"
    f.write_text("".join(f"line {i} with some text\n" for i in range(1000)))
    sock = str(tmp / "nvim.sock")
    import subprocess
    proc = subprocess.Popen([NVIM, "--headless", "--clean", "--listen", sock, "--cmd", f"set rtp^={ROOT}",
                             "-c", f"lua require('amp').setup({{ agents = {{ amp = true, claude = {str(with_claude).lower()} }} }})", str(f)],
                            env=env, cwd=str(tmp), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(sock):
            time.sleep(0.02)
            assert time.monotonic() < deadline, "nvim did not start"
        nvim = pynvim.attach("socket", path=sock)
        status = None
        while time.monotonic() < deadline:
            status = nvim.exec_lua("return require('amp').status()")
            claude = (status.get("agents") or {}).get("claude") or {}
            if status.get("lockfile") and os.path.exists(status["lockfile"]) and (not with_claude or (
                    claude.get("lockfile") and os.path.exists(claude["lockfile"]))):
                break
            time.sleep(0.05)
        amp_lock = json.loads(Path(status["lockfile"]).read_text())
        amp = connect(f"ws://127.0.0.1:{status['port']}/?auth={urllib.parse.quote(amp_lock['authToken'])}",
                      proxy=None, compression=None, legacy=True)
        arrivals = {"amp": []}
        readers = [("amp", amp, "selectionDidChange")]
        if with_claude:
            claude_lock = json.loads(Path(status["agents"]["claude"]["lockfile"]).read_text())
            cl = connect(f"ws://127.0.0.1:{status['agents']['claude']['port']}/", proxy=None, compression=None,
                         subprotocols=["mcp"], legacy=True,
                         additional_headers={"x-claude-code-ide-authorization": claude_lock["authToken"]})
            cl.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}))
            cl.send(json.dumps({"jsonrpc": "2.0", "method": "ide_connected", "params": {"pid": os.getpid()}}))
            arrivals["claude"] = []
            readers.append(("claude", cl, "selection_changed"))
        stop = threading.Event()

        def reader(name, ws, marker):
            while not stop.is_set():
                try:
                    msg = ws.recv(timeout=0.2)
                except TimeoutError:
                    continue
                except Exception:
                    return
                if marker in msg:
                    arrivals[name].append((time.perf_counter(), msg))

        threads = [threading.Thread(target=reader, args=r, daemon=True) for r in readers]
        for t in threads:
            t.start()
        time.sleep(3.0)  # past the Claude front-end's re-sends after connect
        lat = {k: [] for k in arrivals}
        for i in range(samples):
            key = "j" if i % 2 == 0 else "k"
            counts = {k: len(v) for k, v in arrivals.items()}
            t0 = time.perf_counter()
            nvim.request("nvim_input", key, async_=True)
            end = time.monotonic() + 2
            while time.monotonic() < end and any(len(arrivals[k]) <= counts[k] for k in arrivals):
                time.sleep(0.0001)
            for k in lat:
                if len(arrivals[k]) > counts[k]:
                    lat[k].append(arrivals[k][counts[k]][0] - t0)
            time.sleep(0.02)
        stop.set()
        for k, v in lat.items():
            print(f"{k}: keystroke -> selection notification p50 {pct(v, 50) * 1000:.2f} ms, "
                  f"p99 {pct(v, 99) * 1000:.2f} ms (n={len(v)})")
        for _, ws, _ in readers:
            ws.close()
        try:
            nvim.command("qa!")
        except Exception:
            pass  # the connection ends with Neovim
    finally:
        try:
            proc.wait(timeout=5)
        except Exception:
            proc.kill()


if __name__ == "__main__":
    main()
