"""What start-up loads, and what waits for the editor's first event or
the first agent.

The modules that feed editor events to the server (lua/amp/context.lua,
lua/amp/files.lua) are not loaded at start-up: core.lua gives their
autocmd groups one autocmd for all of their events, which loads and
attaches the module on the first of them and runs that event again for
the module's own autocmds. These tests start a real headless Neovim with
the plugin and check, end to end, that the first event of each kind is
still reported (a cursor move, to a connected client) or handled (a file
opened is watched), and that the lists of events in
core.lua cover every event the modules' autocmds are for.

`setup({})` loads only the start path (amp.native, amp.core: not the
configuration's modules, whose defaults the library has), and the
server's start does not read the selection and the
visible files: the first client's connection has them read, and its first
notifications carry them (src/core/published.rs, `context_ready`).
"""

from __future__ import annotations

import os
import time

import pytest

from context_helpers import connect_recorder, cursor_payload, feed, visible_payload
from filewatch_helpers import install_probes, timed_reload, wait_event
from harness import REPO, Editor

FEATURES = {"amp.context": "AmpEditorContext", "amp.files": "AmpFileWatch"}
# Modules `setup({})` and the server's start do without: the options'
# schema and defaults, what options set besides the start, the version check, the buffer rule (the helpers' first use), the
# agents' environment (Amp alone needs none), the library's age check (2 s
# later), the connection notices.
NOT_AT_START = ("amp.config", "amp.config.schema", "amp.config.defaults", "amp.configure", "amp.version",
                "amp.buffer", "amp.agent_env", "amp.native.stale", "amp.connection", "amp.notify")
LINES = ["first line", "second line", "third line"]
TEXT = "".join(line + "\n" for line in LINES)


@pytest.fixture
def editor_on_a_file(amp_env):
    """A Neovim whose buffer holds a file before the plugin starts (as
    `nvim file`), and that has had no editor event since."""
    editors = []

    def start(name: str) -> tuple[Editor, object]:
        path = amp_env.workspace / name
        path.write_text(TEXT, encoding="utf-8")
        ed = Editor(amp_env, amp_env.workspace, {"log_level": "debug"}, None,
                    extra_cmds=(f"edit {path}",))
        editors.append(ed)
        ed.wait_lockfile()
        return ed, path

    yield start
    for ed in editors:
        ed.shutdown()


def group_events(ed: Editor, group: str) -> set[str]:
    return set(ed.lua("""
        local ok, list = pcall(vim.api.nvim_get_autocmds, { group = ... })
        local events = {}
        for _, autocmd in ipairs(ok and list or {}) do events[#events + 1] = autocmd.event end
        return events
    """, group))


def loaded(ed: Editor, module: str) -> bool:
    return ed.lua("return package.loaded[...] ~= nil", module)


def test_event_modules_wait_for_their_first_event_and_cover_their_events(nvim_factory):
    ed = nvim_factory()
    time.sleep(0.3)  # the start-up's slices are done
    waiting = {}
    for module, group in FEATURES.items():
        assert not loaded(ed, module), f"{module} was loaded at start-up"
        waiting[group] = group_events(ed, group)
        assert waiting[group], f"no autocmd waits for {module}'s first event"
    # A file opened: both modules' events (BufReadPost among them).
    path = ed.env.workspace / "opened.txt"
    path.write_text(TEXT, encoding="utf-8")
    ed.edit(path)
    for module, group in FEATURES.items():
        assert loaded(ed, module), f"{module} was not loaded by its first event"
        own = group_events(ed, group)
        # core.lua's list names every event the module's autocmds are for
        # (the buffer-local keystroke ones included).
        assert own and own <= waiting[group], (module, sorted(own - waiting[group]))


def test_setup_with_no_options_loads_only_the_start_path(amp_env):
    ed = Editor(amp_env, amp_env.workspace, {}, None)
    try:
        ed.wait_lockfile()
        time.sleep(0.3)  # the start-up's slices are done
        for module in ("amp.native", "amp.core"):
            assert loaded(ed, module), module
        # (Without the C API the library reads the version through amp.version.)
        c_api_off = os.environ.get("AMP_NVIM_C_API") == "0"
        for module in NOT_AT_START:
            if not (c_api_off and module == "amp.version"):
                assert not loaded(ed, module), f"{module} was loaded at start-up"
        # The first client has the editor's state read (no file is shown):
        # the buffer rule the helpers use (amp.buffer) loads then.
        rec = connect_recorder(ed)
        rec.wait_payload("visibleFilesDidChange", visible_payload())
        assert loaded(ed, "amp.buffer")
    finally:
        ed.shutdown()


def test_the_first_client_gets_the_state_read_when_it_connects(editor_on_a_file):
    ed, path = editor_on_a_file("shown.txt")
    time.sleep(0.3)
    assert not loaded(ed, "amp.context")
    rec = connect_recorder(ed)
    # Its very first notifications: the file shown and the cursor at 1:1,
    # read when it connected (no editor event since start-up), with no
    # empty list before them.
    rec.wait_payload("selectionDidChange", cursor_payload(path, 0, 0, LINES[0]))
    first = rec.notes(name="visibleFilesDidChange")[0]
    assert first.payload == visible_payload(path), first
    assert not loaded(ed, "amp.context")


def test_a_cursor_move_as_the_first_event_reaches_the_agent(editor_on_a_file):
    ed, path = editor_on_a_file("moved.txt")
    assert not loaded(ed, "amp.context")
    rec = connect_recorder(ed)
    # The state start() read: the file at 1:1.
    rec.wait_payload("selectionDidChange", cursor_payload(path, 0, 0, LINES[0]))
    feed(ed, "j")  # the first event since start-up: one CursorMoved
    rec.wait_payload("selectionDidChange", cursor_payload(path, 1, 0, LINES[1]))
    assert loaded(ed, "amp.context")


def test_a_file_opened_as_the_first_event_is_watched(editor_on_a_file):
    ed, _ = editor_on_a_file("first.txt")
    install_probes(ed)
    assert not loaded(ed, "amp.files")
    other = ed.env.workspace / "other.txt"
    other.write_text(TEXT, encoding="utf-8")
    ed.nvim.command(f"edit {other}")  # the first event since start-up: BufReadPost
    assert loaded(ed, "amp.files")
    time.sleep(0.3)  # the watcher has been told about it
    # An outside change to the file just opened reloads its buffer.
    timed_reload(ed, other, "from the agent\n")
    wait_event(ed, other, "reloaded")


# Records the modules `require` found in package.preload (the byte code
# compiled on the mapping thread), and holds VimEnter until that code has
# arrived, so the race with the thread is decided for the test (it has
# always arrived by then in use: the thread starts with setup(), before the
# rest of start-up).
PRELOAD_PROBE = (
    "lua local searcher = package.loaders[1]; _G.amp_test_preloaded = {}; "
    "package.loaders[1] = function(name) local found = searcher(name); "
    "if type(found) == 'function' and name:find('^amp') then table.insert(_G.amp_test_preloaded, name) end; "
    "return found end; "
    "vim.api.nvim_create_autocmd('VimEnter', { once = true, callback = function() "
    "_G.amp_test_arrived = vim.wait(5000, function() return package.preload['amp.core'] ~= nil end, 5) end })"
)
COMPILED_WITH_OPTIONS = {"amp.config", "amp.config.schema", "amp.config.defaults", "amp.configure"}


@pytest.mark.parametrize("opts", [{}, {"log_level": "debug"}])
def test_the_start_paths_modules_are_compiled_off_the_main_thread(amp_env, opts):
    """setup() during start-up has the modules it loads after VimEnter
    compiled on the thread that maps the library (lua/amp/init.lua): the
    main thread loads their byte code, found first by `require`, once each
    (nothing is left in package.preload), and they are the files' own (the
    library is found from amp.native's path, the chunk names are the
    files')."""
    ed = Editor(amp_env, amp_env.workspace, opts, None, plugin_before=PRELOAD_PROBE)
    try:
        ed.wait_lockfile()
        time.sleep(0.3)  # the start-up's slices are done
        arrived, preloaded, left, source = ed.lua("""
            local left = {}
            for name in pairs(package.preload) do
              if name:find('^amp') then left[#left + 1] = name end
            end
            return { _G.amp_test_arrived, _G.amp_test_preloaded, left,
                     debug.getinfo(require('amp.core').setup, 'S').source }
        """)
        assert arrived is True
        assert set(preloaded) == {"amp.native", "amp.core"} | (COMPILED_WITH_OPTIONS if opts else set()), preloaded
        assert len(preloaded) == len(set(preloaded)) and left == [], (preloaded, left)
        assert source == "@" + os.path.realpath(REPO / "lua" / "amp" / "core.lua")
        assert ed.lua("return require('amp').is_running()") is True
    finally:
        ed.shutdown()
