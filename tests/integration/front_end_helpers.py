"""The editor's side of an agent front-end as its tests reach it: its entry
in `status().agents`, its discovery file once it is on disk, and a private
$TMPDIR for the front-ends that keep files there (Gemini's discovery
directory, Copilot's socket). The agents themselves (real CLIs, model
stand-ins) are in agents_helpers.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from conftest import wait_for
from mcp_clients import Http


def private_tmpdir(amp_env) -> dict[str, str]:
    """The environment of a Neovim whose $TMPDIR is the test's own
    (`<root>/tmp`), so no other test or user shares it."""
    tmp = amp_env.root / "tmp"
    tmp.mkdir(exist_ok=True)
    return {"TMPDIR": str(tmp)}


def start_with_private_tmpdir(nvim_factory, amp_env, setup: dict, **kw):
    """A Neovim set up with `setup` (overridden by `kw`) and a private
    $TMPDIR, added to any `_extra_env` given."""
    extra = private_tmpdir(amp_env)
    extra.update(kw.pop("_extra_env", {}))
    return nvim_factory(**{**setup, **kw}, _extra_env=extra)


def open_http_session(path: Path, file: dict, status: dict):
    """An initialized MCP session over HTTP with the token of a discovery
    file (`authToken`) on the port of the status, as `wait_discovery_file`
    gives them; with the file and the status."""
    c = Http(status["port"], file["authToken"])
    c.init = c.initialize()
    return c, file, status


def enter_visual_lines(ed, keys: str = "jVj"):
    """Types `keys` in the current window (by default: lines 2-3 selected
    in Visual line mode) and waits for Visual line mode."""
    ed.nvim.input(keys)
    wait_for(lambda: ed.lua("return vim.fn.mode()") == "V", 5, "Visual mode")


def agent_status(ed, agent: str):
    """`require('amp').status().agents[agent]` (None when there is none)."""
    return ed.lua(f"return require('amp').status().agents.{agent}")


def wait_started(ed, agent: str, listening: str, what: str) -> dict:
    """`agent`'s status once its front-end listens (its status has
    `listening`: "port", "socket")."""
    return wait_for(lambda: (agent_status(ed, agent) or {}).get(listening) and agent_status(ed, agent), 10,
                    what)


def wait_discovery_file(ed, agent: str, listening: str, where: Callable[[dict], Path],
                        server: str, file: str) -> tuple[Path, dict, dict]:
    """Waits for `agent`'s front-end to listen and its discovery file
    (`where(status)`) to be on disk: the file's path, its JSON and the
    status. `server`, `file`: what a timeout names."""
    status = wait_started(ed, agent, listening, server)
    path = where(status)
    wait_for(path.exists, 10, f"{file} {path}")
    return path, json.loads(path.read_text()), status
