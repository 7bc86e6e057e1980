"""lua/amp/config.lua in a real headless Neovim: the defaults, the merge of
the user's options over them (vim.tbl_deep_extend, lists replaced whole),
validation errors (one readable line naming the option) and unknown options
(ignored, with one warning).

One Neovim per test, started with auto_start = false: resolve() is pure Lua,
setup() is the real entry point a user's config calls.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from conftest import REPO, lua_literal, wait_for
from harness import Editor

# Every option and its default, as :help amp-config documents them (log_file
# is filled in by resolve(); checked separately). An empty Lua table comes
# over RPC as an empty list.
DEFAULTS = {
    "auto_start": True,
    "agents": {"amp": True, "claude": False, "gemini": False, "qwen": False, "mcp": False, "copilot": False,
               "codex": False, "tap": False},
    "codex": {"unofficial_ide_context": False},
    "tap": {"url": "ws://localhost:9400"},
    "notify": {"connections": True},
    "review": {
        "edit_file": False,
        "timeout_ms": 300000,
        "layout": "tab",
        "open_key": False,
        "keys": {"accept_hunk": "ga", "reject_hunk": "gr", "accept_all": "gA", "reject_all": "gR"},
    },
    "log_level": "info",
    "log_max_bytes": 10 * 1024 * 1024,
    "server": {
        "port": 0,
        "max_frame_bytes": 64 * 1024 * 1024,
        "max_clients": 32,
        "send_queue": 1024,
        "ping_interval_ms": 30000,
        "allowed_origins": [],
        "max_pending_handshakes": 16,
        "handshake_timeout_ms": 2000,
        "max_inflight_bytes": 256 * 1024 * 1024,
    },
    "selection": {"interval_ms": 10},
    "watch": {"enabled": True, "debounce_ms": 20},
    "edits": {"write_autocmds": "post", "max_file_bytes": 32 * 1024 * 1024},
    "install": [],
    "terminal": {
        "default": "amp",
        "position": "right",
        "size": 0.4,
        "cmd": {"amp": ["amp"], "claude": ["claude", "--permission-mode", "default"], "gemini": ["gemini"],
                "qwen": ["qwen", "--approval-mode", "default"], "copilot": ["copilot"],
                "opencode": ["opencode"], "codex": ["codex"], "cursor": ["cursor-agent"], "crush": ["crush"],
                "goose": ["goose", "session"], "kiro": ["kiro-cli", "chat"]},
    },
    "openctx": {
        "enabled": True,
        "providers": [],
        "timeout_ms": 2000,
        "startup_timeout_ms": 15000,
        "max_file_bytes": 1024 * 1024,
        "node_command": "node",
        "debounce_ms": 300,
    },
}

# resolve() returns (config, err, warning); nil becomes vim.NIL so that the
# list keeps its three places over RPC.
RESOLVE = """
local config, err, warning = require('amp.config').resolve(%s)
return { config == nil and vim.NIL or config, err == nil and vim.NIL or err,
         warning == nil and vim.NIL or warning }
"""


@pytest.fixture
def ed(nvim_factory):
    return nvim_factory(auto_start=False, _wait=False)


def resolve(ed, lua_opts: str):
    """resolve() of the Lua expression ``lua_opts``: (config, err, warning)."""
    return tuple(ed.lua(RESOLVE % lua_opts))


def resolve_ok(ed, opts) -> dict:
    config, err, warning = resolve(ed, lua_literal(opts))
    assert err is None, err
    assert warning is None, warning
    return config


# ------------------------------------------------------------ defaults


def test_defaults_are_the_documented_ones(ed):
    # (lua/amp/core.lua relies on three of them: setup({}) as the first
    # setup() starts the server and maps no key and no OpenCtx provider.)
    config = resolve_ok(ed, {})
    log_file = config.pop("log_file")
    assert config == DEFAULTS
    assert log_file == ed.lua("return vim.fs.joinpath(vim.fn.stdpath('log'), 'amp.log')")
    assert log_file.startswith(str(ed.env.state_home)), log_file
    # nil and {} are the same; get_config() before any setup() is the defaults too.
    assert resolve(ed, "nil") == (dict(config, log_file=log_file), None, None)
    fresh = ed.lua("""
        package.loaded['amp'] = nil
        package.loaded['amp.core'] = nil
        return require('amp').get_config()
    """)
    assert fresh == dict(config, log_file=log_file)


def test_the_defaults_pass_validation(ed):
    """resolve({}) and resolve(nil) return the defaults without checking
    them (setup({})'s start-up work is a copy): they must be valid, and
    name no option the schema does not have."""
    assert ed.lua("return { require('amp.config').validate(require('amp.config').defaults) }") == [True]
    assert ed.lua("return require('amp.config').unknown(require('amp.config').defaults)") == []
    # A key the user gives is checked as before, however small the table.
    config, err, _ = resolve(ed, "{ log_level = 'loud' }")
    assert config is None and "log_level" in err


def test_resolve_does_not_change_the_defaults(ed):
    before = ed.lua("return require('amp.config').defaults")
    resolve_ok(ed, {"log_level": "DEBUG", "server": {"allowed_origins": ["https://a.test"],
                                                     "port_range": [3000, 3001], "max_clients": 3},
                    "openctx": {"providers": {"https://p.test": True}}})
    assert ed.lua("return require('amp.config').defaults") == before
    assert before["server"]["allowed_origins"] == [] and before["openctx"]["providers"] == []


# ------------------------------------------------------------ merging


def test_nested_options_merge_over_the_defaults(ed):
    config = resolve_ok(ed, {"server": {"max_clients": 5}, "watch": {"enabled": False},
                             "openctx": {"providers": {"https://p.test": {"x": 1}}}})
    assert config["server"] == dict(DEFAULTS["server"], max_clients=5)
    assert config["watch"] == {"enabled": False, "debounce_ms": 20}
    assert config["openctx"] == dict(DEFAULTS["openctx"], providers={"https://p.test": {"x": 1}})
    for key in ("selection", "edits", "install"):
        assert config[key] == DEFAULTS[key], key
    # An empty section keeps every default of it.
    assert resolve_ok(ed, {"server": {}})["server"] == DEFAULTS["server"]


def test_lists_replace_the_default_whole(ed):
    config = resolve_ok(ed, {"server": {"allowed_origins": ["https://a.test", "https://b.test"]}})
    assert config["server"]["allowed_origins"] == ["https://a.test", "https://b.test"]
    # A shorter list is not merged index by index into a longer one.
    ed.lua("require('amp.config').defaults.server.allowed_origins = { 'x', 'y', 'z' }")
    config = resolve_ok(ed, {"server": {"allowed_origins": ["only"]}})
    assert config["server"]["allowed_origins"] == ["only"]
    # An agent's command too; the other agents keep theirs.
    ed.lua("require('amp.config').defaults.terminal.cmd.claude = { 'claude', '--flag', 'x' }")
    config = resolve_ok(ed, {"terminal": {"cmd": {"claude": ["/opt/claude"]}, "position": "float"}})
    assert config["terminal"]["cmd"] == dict(DEFAULTS["terminal"]["cmd"], claude=["/opt/claude"])
    assert config["terminal"]["position"] == "float" and config["terminal"]["size"] == 0.4


def test_port_range_forms(ed):
    assert resolve_ok(ed, {"server": {"port_range": [4000, 4010]}})["server"]["port_range"] == [4000, 4010]
    config = resolve_ok(ed, {"server": {"port_range": {"min": 5000, "max": 5001}}})
    assert config["server"]["port_range"] == [5000, 5001]
    # amp.nvim's top-level port_range is taken as server.port_range, and not reported as unknown.
    config = resolve_ok(ed, {"port_range": [6000, 6002]})
    assert config["server"]["port_range"] == [6000, 6002]
    assert "port_range" not in config
    # server.port_range wins over the top-level one.
    config, err, warning = resolve(ed, lua_literal({"port_range": [1, 2], "server": {"port_range": [7000, 7001]}}))
    assert err is None and config["server"]["port_range"] == [7000, 7001]
    assert warning == "amp: setup: ignoring unknown option port_range (see :help amp-config)"


def test_the_log_directory_is_there_when_setup_returns(ed, amp_env):
    """The log's directory is made by the call that names the log
    (configure_log, start), on Neovim's main thread: Neovim makes its state
    directory (swap files, where the log goes by default) on that thread
    too, and its `mkdir -p` raced by another thread fails with E303 "file
    already exists". (Which thread makes it: src/core/log.rs's unit test.)"""
    configured, started = amp_env.root / "logs-a" / "deep", amp_env.root / "logs-b" / "deep"
    made = ed.lua("""
        local configured, started = ...
        local amp = require('amp')
        amp.setup({ auto_start = false, log_file = configured .. '/amp.log' })
        local first = vim.fn.isdirectory(configured)
        amp.setup({ log_file = started .. '/amp.log' })
        return { first, vim.fn.isdirectory(started), amp.is_running() }
    """, str(configured), str(started))
    assert made == [1, 1, True]


def test_log_level_and_log_file_are_normalized(ed):
    config = resolve_ok(ed, {"log_level": "WARN", "log_file": "logs/amp.log"})
    assert config["log_level"] == "warn"
    cwd = ed.nvim.funcs.getcwd()
    assert config["log_file"] == f"{cwd}/logs/amp.log"
    home = ed.env.home
    assert resolve_ok(ed, {"log_file": "~/x/amp.log"})["log_file"] == f"{home}/x/amp.log"


def test_log_file_paths_are_normalized_whether_or_not_they_look_plain(ed):
    """H.normalize skips vim.fs for a path that is already normal (the
    start-up's stdpath()); every other form still goes through it."""
    cwd = ed.nvim.funcs.getcwd()
    for given, expected in [("/tmp/a/amp.log", "/tmp/a/amp.log"), ("/tmp//a/amp.log", "/tmp/a/amp.log"),
                            ("/tmp/./a/amp.log", "/tmp/a/amp.log"), ("/tmp/b/../a/amp.log", "/tmp/a/amp.log"),
                            ("/tmp/a/amp.log/", "/tmp/a/amp.log"), ("/tmp/.hidden/amp.log", "/tmp/.hidden/amp.log"),
                            ("amp.log", f"{cwd}/amp.log")]:
        got = resolve_ok(ed, {"log_file": given})["log_file"]
        assert got == expected, (given, got)
        assert got == ed.lua("return vim.fn.fnamemodify(vim.fs.normalize(...), ':p')", given).rstrip("/")


def test_the_generated_defaults_file_is_current(ed):
    """lua/amp/config/defaults.lua (what setup({}) reads at start-up) is
    what scripts/config-defaults.lua makes from the schema now."""
    nvim = ed.lua("return vim.v.progpath")
    done = subprocess.run([nvim, "--headless", "-u", "NONE", "-l", str(REPO / "scripts" / "config-defaults.lua"),
                           "--check"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def test_setup_with_no_options_reads_no_schema_and_gives_the_schema_defaults(ed):
    """resolve({}) (setup({}) at start-up) builds no schema; its result and
    its native options are those the schema gives, for the defaults and
    for a configuration with every kind of value changed."""
    got = ed.lua("""
        for name in pairs(package.loaded) do
          if name:match('^amp') then package.loaded[name] = nil end
        end
        local config = require('amp.config')
        local resolved = config.resolve({})
        local native = config.native_options(resolved)
        return { resolved, native, package.loaded['amp.config.schema'] ~= nil }
    """)
    resolved, native, schema_loaded = got
    assert schema_loaded is False
    assert resolved == resolve_ok(ed, {})
    # The reference: each option's `rust` name, straight from the schema.
    reference = ed.lua("""
        local config = require('amp.config')
        local function native_of(c)
          local out = {}
          for _, option in ipairs(config.schema) do
            if option.rust then
              local value = c
              for part in option.name:gmatch('[^.]+') do value = value[part] end
              local node, parts = out, vim.split(option.rust, '.', { plain = true })
              for i = 1, #parts - 1 do node[parts[i]] = node[parts[i]] or {}; node = node[parts[i]] end
              node[parts[#parts]] = value
            end
          end
          return out
        end
        local changed = assert(config.resolve({ log_level = 'debug', agents = { claude = true, codex = true },
          server = { port_range = { 7000, 7009 }, allowed_origins = { 'https://a.test' }, max_clients = 3 },
          review = { edit_file = true }, watch = { enabled = false }, edits = { write_autocmds = 'all' },
          tap = { url = 'ws://127.0.0.1:9' }, codex = { unofficial_ide_context = true } }))
        local defaults = config.resolve({})
        return { native_of(defaults), config.native_options(defaults), native_of(changed), config.native_options(changed) }
    """)
    assert reference[1] == reference[0] == native
    assert reference[3] == reference[2]
    assert reference[3]["port_range"] == [7000, 7009] and reference[3]["agents"]["claude"] is True


def test_the_server_enforces_the_schema_defaults_and_restarts_only_for_a_change(ed):
    """setup({}) starts the server with the library's own defaults (`start`
    gets the session's fields alone, the log file is the library's too);
    status().options, what it enforces, is the schema's defaults. Options
    that change a native option restart it with them; the same options
    again do not. setup({}) after options undoes what they set besides (the
    review key)."""
    got = ed.lua("""
        local defaults = require('amp.config.defaults')
        local amp = require('amp')
        -- (fired by native stop, before a restart starts it again)
        local stops = 0
        vim.api.nvim_create_autocmd('User', { pattern = 'AmpServerStopped', callback = function() stops = stops + 1 end })
        local function options() return amp.status().options end
        local out = {}
        local function step(opts)
          amp.setup(opts)
          assert(vim.wait(5000, function() return amp.is_running() end), 'no server')
          table.insert(out, { options(), stops, vim.fn.maparg('<F7>', 'n') })
        end
        step({})
        step({})
        local changed = { server = { max_clients = 3 }, agents = { claude = true }, watch = { enabled = false },
          review = { open_key = '<F7>' } }
        step(changed)
        step(changed)
        step({})
        return { out, defaults.native(defaults.resolved()), defaults.native(require('amp.config').resolve(changed)) }
    """)
    steps, schema_defaults, schema_changed = got
    assert schema_defaults["max_clients"] == 32 and schema_changed["max_clients"] == 3
    assert steps[0][0] == schema_defaults
    assert steps[2][0] == schema_changed
    assert steps[4][0] == schema_defaults
    # Restarted for the change and for the defaults again, not for the same
    # options twice.
    assert [stops for _, stops, _ in steps] == [0, 0, 1, 1, 2]
    # The review key of the options, and none with the defaults again.
    assert [key for _, _, key in steps] == ["", "", "<Cmd>Amp review<CR>", "<Cmd>Amp review<CR>", ""]


@pytest.mark.parametrize("state_home", ["plain", "not normal"])
def test_setup_with_no_options_logs_where_the_configuration_says(amp_env, state_home):
    """With setup({}) the library makes the default log file itself (no
    configuration module is loaded to start): the file get_config() names,
    and the log is written there. With an $XDG_STATE_HOME that is not
    normal (`//`, `/./`), stdpath() is not either, and the library takes
    the configuration's own resolution."""
    home = amp_env.state_home
    extra = None
    if state_home == "not normal":
        extra = {"XDG_STATE_HOME": f"{home.parent}//./{home.name}"}
    ed = Editor(amp_env, amp_env.workspace, {}, extra)
    try:
        ed.wait_lockfile()
        served, configured = ed.lua("local amp = require('amp') "
                                    "return { amp.status().options.log_file, amp.get_config().log_file }")
        log = home / "nvim" / "amp.log"
        assert served == configured == str(log)
        ed.lua("require('amp.native').call('log', 'info', 'the default log file')")
        wait_for(lambda: log.exists() and "the default log file" in log.read_text(), 5, "the line in the log")
    finally:
        ed.shutdown()


# ------------------------------------------------------------ validation

# (options as a Lua expression, the whole error message)
INVALID = [
    ("5", "amp: setup: options must be a table, got 5"),
    ("'all'", 'amp: setup: options must be a table, got "all"'),
    ("{ server = 5 }", "amp: setup: server must be a table, got 5"),
    ("{ openctx = true }", "amp: setup: openctx must be a table, got true"),
    ("{ watch = 'off' }", 'amp: setup: watch must be a table, got "off"'),
    ("{ auto_start = 'yes' }", 'amp: setup: auto_start must be a boolean, got "yes"'),
    ("{ log_level = 'loud' }", 'amp: setup: log_level must be one of trace|debug|info|warn|error, got "loud"'),
    ("{ log_level = 3 }", "amp: setup: log_level must be one of trace|debug|info|warn|error, got 3"),
    ("{ log_file = '' }", 'amp: setup: log_file must be nil or a file path, got ""'),
    ("{ log_max_bytes = 100 }", "amp: setup: log_max_bytes must be at least 4096, got 100"),
    ("{ server = { port = 70000 } }", "amp: setup: server.port must be an integer between 0 and 65535, got 70000"),
    ("{ server = { port = 1.5 } }", "amp: setup: server.port must be an integer between 0 and 65535, got 1.5"),
    ("{ server = { port = '8080' } }", 'amp: setup: server.port must be an integer between 0 and 65535, got "8080"'),
    ("{ server = { port_range = { 10, 5 } } }",
     "amp: setup: server.port_range must be nil or { min, max } with 1 <= min <= max <= 65535, got { 10, 5 }"),
    ("{ server = { port_range = { 0, 5 } } }",
     "amp: setup: server.port_range must be nil or { min, max } with 1 <= min <= max <= 65535, got { 0, 5 }"),
    ("{ server = { max_clients = -1 } }", "amp: setup: server.max_clients must be a positive integer, got -1"),
    ("{ server = { max_clients = 10001 } }", "amp: setup: server.max_clients must be at most 10000, got 10001"),
    ("{ server = { max_frame_bytes = math.huge } }",
     "amp: setup: server.max_frame_bytes must be a positive integer, got inf"),
    ("{ server = { ping_interval_ms = 99 } }", "amp: setup: server.ping_interval_ms must be at least 100, got 99"),
    ("{ server = { allowed_origins = 'https://a.test' } }",
     'amp: setup: server.allowed_origins must be a list of strings, got "https://a.test"'),
    ("{ server = { allowed_origins = { 1 } } }", "amp: setup: server.allowed_origins must be a list of strings, got { 1 }"),
    ("{ selection = { interval_ms = -5 } }",
     "amp: setup: selection.interval_ms must be a non-negative integer, got -5"),
    ("{ watch = { enabled = 1 } }", "amp: setup: watch.enabled must be a boolean, got 1"),
    ("{ agents = { gemini = 'yes' } }", 'amp: setup: agents.gemini must be a boolean, got "yes"'),
    ("{ agents = { codex = 1 } }", "amp: setup: agents.codex must be a boolean, got 1"),
    ("{ codex = { unofficial_ide_context = 'yes' } }",
     'amp: setup: codex.unofficial_ide_context must be a boolean, got "yes"'),
    ("{ codex = true }", "amp: setup: codex must be a table, got true"),
    ("{ edits = { write_autocmds = 'pre' } }",
     'amp: setup: edits.write_autocmds must be "all", "post" or "none", got "pre"'),
    ("{ review = { edit_file = 'yes' } }", 'amp: setup: review.edit_file must be a boolean, got "yes"'),
    ("{ review = { timeout_ms = 10 } }", "amp: setup: review.timeout_ms must be at least 1000, got 10"),
    ("{ review = { keys = { accept_hunk = 1 } } }",
     "amp: setup: review.keys must be a table of key names to keys (strings) or false, "
     'got { accept_all = "gA", accept_hunk = 1, reject_all = "gR", reject_hunk = "gr" }'),
    ("{ review = { layout = 'float' } }", 'amp: setup: review.layout must be one of tab|split|inline, got "float"'),
    ("{ review = { open_key = '' } }", 'amp: setup: review.open_key must be a key (a non-empty string) or false, got ""'),
    ("{ review = { open_key = true } }",
     "amp: setup: review.open_key must be a key (a non-empty string) or false, got true"),
    ("{ install = { url = '' } }", 'amp: setup: install.url must be nil or a URL, got ""'),
    ("{ openctx = { providers = 'https://p.test' } }",
     'amp: setup: openctx.providers must be a table of provider URI = true|false|{settings}, got "https://p.test"'),
    ("{ openctx = { node_command = '' } }", 'amp: setup: openctx.node_command must be a command name or path, got ""'),
    ("{ openctx = { timeout_ms = 600001 } }", "amp: setup: openctx.timeout_ms must be at most 600000, got 600001"),
    ("{ terminal = 'right' }", 'amp: setup: terminal must be a table, got "right"'),
    ("{ terminal = { default = 'nano' } }",
     'amp: setup: terminal.default must be an agent named in terminal.cmd '
     '(amp|claude|gemini|qwen|copilot|opencode|codex|crush|cursor|goose|kiro), got "nano"'),
    ("{ terminal = { cmd = { aider = 'aider' } } }",
     'amp: setup: terminal.cmd.aider must be a non-empty list of strings, got "aider"'),
    ("{ terminal = { position = 'middle' } }",
     'amp: setup: terminal.position must be one of right|left|bottom|top|float, got "middle"'),
    ("{ terminal = { size = 0 } }", "amp: setup: terminal.size must be a positive number, got 0"),
    ("{ terminal = { cmd = 'amp' } }", 'amp: setup: terminal.cmd must be a table, got "amp"'),
    ("{ terminal = { cmd = { claude = {} } } }",
     "amp: setup: terminal.cmd.claude must be a non-empty list of strings, got {}"),
    ("{ terminal = { cmd = { amp = { 'amp', 1 } } } }",
     'amp: setup: terminal.cmd.amp must be a non-empty list of strings, got { "amp", 1 }'),
]


@pytest.mark.parametrize(("lua_opts", "expected"), INVALID, ids=[o for o, _ in INVALID])
def test_invalid_options_are_one_readable_line(ed, lua_opts, expected):
    config, err, warning = resolve(ed, lua_opts)
    assert (config, warning) == (None, None)
    assert err == expected
    assert "\n" not in err, err


def test_a_value_with_a_newline_is_shown_on_one_line(ed):
    _, err, _ = resolve(ed, "{ log_level = 'a\\nb' }")
    assert err == 'amp: setup: log_level must be one of trace|debug|info|warn|error, got "a\\nb"'


def test_the_first_invalid_option_is_named(ed):
    _, err, _ = resolve(ed, "{ server = { max_clients = 0 }, auto_start = 'no', bogus = 1 }")
    # (and the unknown option on the same line)
    assert err == 'amp: setup: auto_start must be a boolean, got "no"; unknown: bogus'


def test_setup_raises_the_message_and_keeps_the_previous_config(ed):
    ed.lua("require('amp').setup({ auto_start = false, server = { max_clients = 7 } })")
    got = ed.lua("""
        local ok, err = pcall(require('amp').setup, { server = { max_clients = -1 } })
        return { ok, err }
    """)
    assert got == [False, "amp: setup: server.max_clients must be a positive integer, got -1"]
    assert ed.lua("return require('amp').get_config().server.max_clients") == 7
    # Called from a user's Lua file, the error points at the caller's line.
    err = ed.lua("""
        local chunk = loadstring("require('amp').setup({ log_level = 'loud' })", '@init.lua')
        local ok, err = pcall(chunk)
        return err
    """)
    assert err == 'init.lua:1: amp: setup: log_level must be one of trace|debug|info|warn|error, got "loud"'
    assert ed.lua("return require('amp').is_running()") is False


# ------------------------------------------------------------ unknown options


def test_unknown_options_are_named_in_one_warning(ed):
    config, err, warning = resolve(ed, lua_literal({
        "prot": 1, "server": {"prot": 2, "max_clients": 4}, "watch": {"enable": False},
        "openctx": {"providers": {"https://any-name.test": True}}}))
    assert err is None
    assert warning == ("amp: setup: ignoring unknown options prot, server.prot, watch.enable "
                       "(see :help amp-config)")
    # Known options still apply; unknown ones are carried along, not acted on.
    assert config["server"]["max_clients"] == 4
    assert config["watch"]["enabled"] is True
    _, _, warning = resolve(ed, "{ foo = true }")
    assert warning == "amp: setup: ignoring unknown option foo (see :help amp-config)"
    # Options whose default is nil are known.
    assert resolve(ed, "{ log_file = '/tmp/amp-x.log', install = { url = 'https://x.test/{version}' } }")[2] is None


def test_setup_warns_once_about_unknown_options_and_applies_the_rest(ed):
    ed.lua("""
        amp_notes = {}
        vim.notify = function(msg, level) table.insert(amp_notes, { msg = msg, level = level }) end
        require('amp').setup({ auto_start = false, log_levle = 'debug', server = { max_clients = 9 } })
    """)
    notes = wait_for(lambda: ed.lua("return amp_notes"), 5, "the warning")
    assert notes == [{"msg": "amp: setup: ignoring unknown option log_levle (see :help amp-config)",
                      "level": ed.lua("return vim.log.levels.WARN")}]
    assert ed.lua("return require('amp').get_config().server.max_clients") == 9


def test_an_invalid_option_and_an_unknown_one_are_one_line(ed):
    """A mistyped key beside an invalid value: both in the one error line
    (a warning before it would be replaced by the error at once)."""
    config, err, warning = resolve(ed, "{ servr = {}, server = { port = -1 } }")
    assert config is None and warning is None
    assert err == "amp: setup: server.port must be an integer between 0 and 65535, got -1; unknown: servr"
    ed.lua("""
        amp_notes = {}
        vim.notify = function(msg, level) table.insert(amp_notes, { msg = msg, level = level }) end
    """)
    got = ed.lua("return { pcall(require('amp').setup, { log_levle = 'x', log_level = 'loud' }) }")
    assert got[0] is False and got[1].endswith('got "loud"; unknown: log_levle'), got
    assert ed.lua("return amp_notes") == []  # no warning to hide it


# ------------------------------------------------------------ the schema and :help amp-config

HELP = REPO / "doc" / "amp.txt"

# The Defaults block of :help amp-config, run as Lua: its table.
DEFAULTS_BLOCK = """
local lines, block = vim.fn.readfile(...), nil
for i, line in ipairs(lines) do
  if block == nil and line == 'Defaults:' and lines[i + 1] == '>lua' then
    block = {}
  elseif block and line:match('^<') then
    break
  elseif block and line ~= '>lua' then
    block[#block + 1] = line
  end
end
assert(block and #block > 0, 'no Defaults block')
local text = table.concat(block, '\\n'):gsub('^%s*require%("amp"%)%.setup%(', 'return (', 1)
return assert(loadstring(text, '=Defaults'))()
"""

# Each option of the schema: name, default (vim.NIL when none), whether
# the default is nil.
SCHEMA = """
local out = {}
for _, option in ipairs(require('amp.config').schema) do
  out[#out + 1] = { option.name, option.default == nil and vim.NIL or option.default,
                    option.default == nil, type(option.help) == 'string' and option.help or vim.NIL }
end
return out
"""


def help_entries() -> dict[str, str]:
    """Each `*amp-config-...*` tag of doc/amp.txt and the text of its entry
    (its line and the indented lines under it)."""
    lines = HELP.read_text(encoding="utf-8").splitlines()
    entries: dict[str, str] = {}
    for i, line in enumerate(lines):
        for tag in re.findall(r"\*amp-config-([^*\s]+)\*", line):
            body = [line]
            for nxt in lines[i + 1:]:
                if nxt and not nxt.startswith(" ") or re.search(r"\*amp-config-[^*\s]+\*", nxt):
                    break
                body.append(nxt)
            entries[tag] = "\n".join(body)
    return entries


def shown(value, is_nil: bool) -> str:
    """An option's default as :help writes it (a Lua literal)."""
    if is_nil:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if value == []:
        return "{}"
    return repr(value)


def test_the_help_documents_every_option_of_the_schema_with_its_default(ed):
    # The Defaults block of :help amp-config is the schema's defaults, whole.
    documented = ed.lua(DEFAULTS_BLOCK, str(HELP))
    defaults = ed.lua("return require('amp.config').defaults")
    assert documented == defaults
    # Each option has its own entry (its tag, or its line under its
    # section's tag), or is named in its section's entry; an entry of its
    # own says its default.
    entries = help_entries()
    options = ed.lua(SCHEMA)
    assert len(options) > 40
    for name, default, is_nil, help_line in options:
        assert isinstance(help_line, str) and help_line and "\n" not in help_line, name
        own = entries.get(name)
        if own is None:
            parts = name.split(".")
            section = next((".".join(parts[:n]) for n in range(len(parts) - 1, 0, -1)
                            if ".".join(parts[:n]) in entries), None)
            assert section is not None, f"{name}: no *amp-config-{name}* tag nor a section's"
            entry = entries[section]
            if entry.startswith(name + " "):
                own = entry
            else:
                assert re.search(rf"\b{re.escape(parts[-1])}\b", entry), f"{name}: not in *amp-config-{section}*"
        if own is not None and (not isinstance(default, (dict, list)) or default == []):
            text = " ".join(own.split())
            want = shown(default, is_nil)
            assert (f"default `{want}`" in text or f"`{want}` (default)" in text
                    or (is_nil and "default nil" in text)), f"{name}: its entry does not say default {want}"
