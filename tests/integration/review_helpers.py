"""Helpers for tests of reviews (lua/amp/review/): a proposal arrives
without being shown, and the user opens it with :Amp review."""

from conftest import wait_for


def proposals(ed) -> list[dict]:
    """The proposals waiting, oldest first: name, rel, agent, shown."""
    return ed.lua("""
        return vim.tbl_map(function(i)
          return { name = i.name, rel = i.rel, agent = i.agent, shown = i.review ~= nil }
        end, require('amp.review').proposals())""")


def wait_proposals(ed, n: int, timeout: float = 10) -> list[dict]:
    return wait_for(lambda: len(proposals(ed)) == n and proposals(ed), timeout, f"{n} proposal(s) waiting")


def shown_window(ed, suffix: str, timeout: float = 10) -> int:
    """The window of the shown review buffer whose name ends with `suffix`,
    once its texts are in (the view started)."""
    return wait_for(lambda: ed.lua("""
        local suffix = ...
        for _, review in pairs(require('amp.review').reviews) do
          for _, win in ipairs(vim.api.nvim_list_wins()) do
            local buf = vim.api.nvim_win_get_buf(win)
            if review.started and (buf == review.left or buf == review.right)
                and vim.endswith(vim.api.nvim_buf_get_name(buf), suffix) then
              return win
            end
          end
        end
        return false""", suffix), timeout, f"a review window of {suffix!r}")


def open_review(ed, suffix: str, pick: str | None = None, arg: str = "") -> int:
    """Runs :Amp review [arg] as the user would (choosing the entry whose
    label contains `pick` when it offers several) and returns the window
    of the review buffer whose name ends with `suffix`. Waits until there
    is something to review (a proposal arrives a moment after its request)."""
    wait_for(lambda: ed.lua("return #require('amp.review').entries() > 0"), 10, "something to review")
    ed.lua("""
        local pick = ...
        vim.ui.select = function(items, opts, on_choice)
          for _, item in ipairs(items) do
            if pick and opts.format_item(item):find(pick, 1, true) then return on_choice(item) end
          end
          on_choice(items[1])
        end""", pick)
    ed.nvim.command("Amp review" + (" " + arg if arg else ""))
    return shown_window(ed, suffix)


def winbar(ed, win: int) -> str:
    """The text the winbar of review window `win` shows (before it is cut
    to the window's width)."""
    return ed.lua("return require('amp.review.view').winbar_text(...)", win)


def messages(ed) -> str:
    """:messages, read with execute(): Neovim 0.10's nvim_exec2 gives ""
    while the command-line window is open."""
    return ed.lua("return vim.fn.execute('messages')")


def tabs(ed) -> int:
    return ed.lua("return #vim.api.nvim_list_tabpages()")


def press(ed, win: int, row: int, keys: str) -> None:
    """Puts the cursor of `win` on `row` and types `keys` (mappings apply)."""
    ed.lua("vim.api.nvim_set_current_win(...)", win)
    ed.lua("vim.api.nvim_win_set_cursor(0, { ..., 0 })", row)
    ed.nvim.command("normal " + keys)


def buffer_count(ed) -> int:
    return ed.lua("return #vim.api.nvim_list_bufs()")


def where_the_user_is(ed) -> dict:
    """The current tab, window, buffer, mode and cursor."""
    return ed.lua("""
        return { tab = vim.api.nvim_get_current_tabpage(), win = vim.api.nvim_get_current_win(),
                 buf = vim.api.nvim_get_current_buf(), mode = vim.api.nvim_get_mode().mode,
                 cursor = vim.api.nvim_win_get_cursor(0) }""")


class TuiEditor:
    """A real Neovim TUI in a private tmux (its own socket under the test's
    tree), loading this repository with `setup(opts)` and editing `file`,
    with an RPC socket for looking inside. Keys go through tmux, as a
    person types them."""

    def __init__(self, env, opts: dict, file, width: int = 80, height: int = 24):
        import os
        import tempfile
        import time

        import pynvim

        import agents_helpers as ah
        from harness import NVIM, REPO, lua_literal

        self.env = env
        self.cwd = env.workspace
        self.sock_dir = tempfile.mkdtemp(prefix="amptui-")
        self.sock = os.path.join(self.sock_dir, "nvim.sock")
        argv = [NVIM, "--clean", "--listen", self.sock, "--cmd", f"set rtp^={REPO}",
                "-c", f"lua require('amp').setup({lua_literal(opts)})", str(file)]
        names = ("HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "NVIM_LOG_FILE")
        tui_env = {k: env.environ[k] for k in names}
        tui_env["TERM"] = "xterm-256color"
        self.tmux = ah.Tmux(env.root, argv, tui_env, env.workspace, width=width, height=height)
        deadline = time.monotonic() + 15
        while True:
            try:
                self.nvim = pynvim.attach("socket", path=self.sock)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError("the TUI's socket never came:\n" + self.tmux.screen())
                time.sleep(0.05)

    def lua(self, code: str, *args):
        return self.nvim.exec_lua(code, *args)

    def keys(self, *keys: str, literal: bool = False) -> None:
        self.tmux.keys(*keys, literal=literal)

    def screen(self) -> str:
        return self.tmux.screen()

    def messages(self) -> str:
        return self.nvim.command_output("messages")

    def close(self) -> None:
        import shutil
        try:
            self.nvim.close()
        except Exception:
            pass
        self.tmux.close()
        shutil.rmtree(self.sock_dir, ignore_errors=True)
