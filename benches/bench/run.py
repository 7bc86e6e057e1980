"""One run of the benchmarks: its options, its scratch directory, and what
the first benchmarks share (two Neovims and one WebSocket reader)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .clients import Poller
from .editor import Editor


class StepTimeout(Exception):
    """A benchmark ran past its time limit."""


@dataclass
class Run:
    quick: bool
    tmp: Path
    poller: Poller
    # Started before the benchmarks that share them (None when not needed or
    # when it failed to start), closed after the last of them.
    bare: Editor | None = None  # without the plugin
    ed: Editor | None = None  # with the plugin (64 clients allowed)

    def pick(self, quick: int, full: int) -> int:
        """A sample count: fewer with --quick."""
        return quick if self.quick else full

    def start_bare(self) -> None:
        self.bare = Editor(self.tmp / "bare", plugin=False)

    def start_plugin(self) -> None:
        self.ed = Editor(self.tmp / "main", plugin=True,
                         setup_opts="{ auto_start = true, server = { max_clients = 64 } }")

    @contextlib.contextmanager
    def own_editor(self, name: str, setup_opts: str = "{ auto_start = true }") -> Iterator[Editor]:
        """A Neovim with the plugin for one benchmark alone, closed after it."""
        ed = Editor(self.tmp / name, plugin=True, setup_opts=setup_opts)
        try:
            yield ed
        finally:
            ed.close()

    def close_shared(self) -> None:
        self.poller.stop()
        for e in (self.bare, self.ed):
            if e:
                e.close()
