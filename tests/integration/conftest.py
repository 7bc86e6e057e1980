"""Real-parts integration harness for the amp.nvim-rs server.

Every test gets a fresh temporary tree (HOME and the XDG directories), a real
headless Neovim that loads this repository with ``require('amp').setup(...)``,
the real lockfile that Neovim writes, and real WebSocket clients talking to the
real server.  Nothing is mocked.

The pieces (Editor, AmpEnv, Client, lockfile and handshake helpers, ...) live
in harness.py, which benches/bench/ uses too; this file holds the pytest
fixtures and re-exports the harness, so ``from conftest import X`` keeps
working in the test modules.

Environment:
  AMP_NVIM        the nvim binary (default: <repo>/.venv/bin/nvim)
  AMP_TEST_TIMEOUT  per-test wall clock limit in seconds (default 90)
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Callable

import pytest

from harness import *  # noqa: F401,F403 - the test modules import these from conftest
from harness import (LIBRARY, NVIM, REPO, AmpEnv, Client, Editor, TestTimeout, _dump_logs, tighter_time_bound,
                     time_limit)

# --------------------------------------------------------------------------
# global guards
# --------------------------------------------------------------------------


def pytest_configure(config):
    # scripts/test runs the real agent CLIs on one Neovim only (-m).
    config.addinivalue_line("markers", "real_agent: drives a real agent CLI from npm, offline")


@pytest.fixture(scope="session", autouse=True)
def _require_built_library():
    if not Path(NVIM).exists():
        pytest.fail(
            f"nvim binary not found at {NVIM!r} (set AMP_NVIM to a Neovim 0.11 binary)",
            pytrace=False,
        )
    if not LIBRARY.exists():
        pytest.fail(
            f"native library {LIBRARY} does not exist: run `cargo build --release` in {REPO} first",
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def _bounded_test_time():
    """Every test is bounded in wall clock time (SIGALRM in the main thread)."""
    limit = float(os.environ.get("AMP_TEST_TIMEOUT", "90"))
    with time_limit(limit, TestTimeout(f"test exceeded {limit:.0f} s")):
        yield


def tighter_time_bound_fixture(limit: float, what: str):
    """An autouse fixture for a test module whose tests must each finish within
    `limit` seconds (tighter than the default): `_bound = tighter_time_bound_fixture(60, "x test")`."""
    @pytest.fixture(autouse=True)
    def bound(_bounded_test_time):
        with tighter_time_bound(limit, what):
            yield
    return bound


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


@pytest.fixture
def env_factory(tmp_path) -> Callable[..., AmpEnv]:
    counter = itertools.count()

    def make(workspace_name: str = "workspace") -> AmpEnv:
        return AmpEnv(tmp_path / f"env{next(counter)}", workspace_name)

    return make


@pytest.fixture
def amp_env(env_factory) -> AmpEnv:
    return env_factory()


@pytest.fixture
def nvim_factory(request, amp_env):
    """nvim_factory(**setup_opts) -> Editor.

    Reserved keyword arguments (not passed to setup):
      _env        AmpEnv to use (default: the test's amp_env)
      _cwd        working directory (default: the env's workspace)
      _extra_env  environment overrides ({"AMP_DATA_HOME": ...}, None removes)
      _wait       wait for the lockfile before returning (default True)
    """
    editors: list[Editor] = []
    envs: set[Path] = set()

    def start(**kw) -> Editor:
        env = kw.pop("_env", None) or amp_env
        cwd = kw.pop("_cwd", None) or env.workspace
        extra_env = kw.pop("_extra_env", None)
        wait = kw.pop("_wait", True)
        opts = {"auto_start": True, "log_level": "debug"}
        opts.update(kw)
        editor = Editor(env, cwd, opts, extra_env)
        editors.append(editor)
        envs.add(env.root)
        if wait:
            editor.wait_lockfile()
        return editor

    yield start

    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for e in editors:
        if failed and e.proc.poll() is None:
            print(f"----- :messages of nvim {e.pid} -----")
            print(e.messages())
    for e in editors:
        e.shutdown()
    if failed:
        for e in editors:
            print(f"----- stderr of nvim {e.pid} -----")
            print(e.stderr())
        for root in envs:
            _dump_logs(root)


@pytest.fixture
def editor(nvim_factory) -> Editor:
    return nvim_factory()


@pytest.fixture
def client(editor) -> Client:
    return editor.connect()
