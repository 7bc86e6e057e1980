"""A UI attached to the Neovim under test, so that it draws its screen and
sends it, as a user's Neovim does."""

from __future__ import annotations

import contextlib
import socket
import threading

UI_COLUMNS, UI_LINES = 200, 50


class UiDrain:
    """A UI attached to a Neovim over a socket of its own (as the TUI, a separate
    process, is), UI_COLUMNS x UI_LINES: Neovim draws its screen at that size and
    sends every redraw; a thread reads and drops them."""

    def __init__(self, sock_path: str, columns: int = UI_COLUMNS, lines: int = UI_LINES):
        import msgpack  # pynvim's dependency
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(sock_path)
        self.sock.sendall(msgpack.packb([0, 1, "nvim_ui_attach", [columns, lines, {"rgb": True, "ext_linegrid": True}]]))
        self.thread = threading.Thread(target=self._drain, name="ui-drain", daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        with contextlib.suppress(OSError):
            while self.sock.recv(1 << 16):
                pass

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join(timeout=5)
