"""Which Neovim the plugin runs on, and its help.

Run against every Neovim that scripts/test runs the suite with (AMP_NVIM:
0.10.4, 0.11.4, 0.12.4) and, for the "too old" case, a real Neovim 0.7.2
(AMP_NVIM_OLD, which scripts/test installs with scripts/nvim-versions).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import NVIM, REPO, lua_string

HELP = REPO / "doc" / "amp.txt"


def nvim_version(binary: str) -> tuple[int, int, int]:
    first = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout
    m = re.match(r"NVIM v(\d+)\.(\d+)\.(\d+)", first)
    assert m, first
    return tuple(int(x) for x in m.groups())


def run_headless(binary: str, env, *commands: str, timeout: float = 30) -> subprocess.CompletedProcess:
    """Runs `commands` (Ex commands, one a line: Neovim takes at most ten
    `-c`) in a headless Neovim with this repository on 'runtimepath'."""
    script = env.root / "commands.vim"
    script.write_text("\n".join([*commands, "qa!"]) + "\n", "utf-8")
    argv = [binary, "--headless", "--clean", "--cmd", f"set rtp^={REPO}", "-S", str(script)]
    return subprocess.run(argv, cwd=str(env.workspace), env=env.environ, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


# ------------------------------------------------------------ old Neovim


def test_older_neovim_gets_one_line_and_nothing_else(amp_env, tmp_path):
    old = os.environ.get("AMP_NVIM_OLD")
    if not old:
        pytest.skip("AMP_NVIM_OLD is not set (scripts/test sets it to a Neovim 0.7.2)")
    major, minor, patch = nvim_version(old)
    assert (major, minor) < (0, 10), f"AMP_NVIM_OLD must be older than 0.10, is {major}.{minor}"
    out = tmp_path / "out"
    out.mkdir()
    # The plugin loads as a user's does (plugin/amp.lua from 'runtimepath' at
    # startup), then the user's config calls setup(), the user tries :Amp,
    # start() and :checkhealth amp.
    proc = run_headless(
        old, amp_env,
        "lua require('amp').setup({ auto_start = true })",
        "lua require('amp').start()",
        "lua require('amp').setup({})",
        f"redir! > {out}/messages",
        "silent messages",
        "redir END",
        "silent! Amp status",
        f"lua vim.fn.writefile({{tostring(vim.fn.exists(':Amp'))}}, {lua_string(str(out / 'has_command'))})",
        "checkhealth amp",
        f"write! {out}/health",
    )
    messages = [l for l in (out / "messages").read_text().splitlines() if l.strip()]
    assert messages == [
        f"amp: needs Neovim 0.10 or newer; this is {major}.{minor}.{patch}, so the plugin is off"
    ], f"messages: {messages!r}\nstderr: {proc.stderr}"
    assert (out / "has_command").read_text().strip() == "0", "no :Amp command on an old Neovim"
    assert proc.returncode == 0, proc.stderr
    assert "Error" not in proc.stderr and "stack traceback" not in proc.stderr, proc.stderr
    assert "Press ENTER" not in proc.stderr, proc.stderr
    health = (out / "health").read_text()
    assert re.search(rf"ERROR.*Neovim {major}\.{minor}\.{patch} is too old.*needs Neovim 0\.10 or newer", health), health
    assert "native library" not in health, health
    # Nothing was started: no lockfile, no log.
    assert not amp_env.lockfile_dir.exists() or not list(amp_env.lockfile_dir.iterdir())


# ------------------------------------------------------------ checkhealth


def test_checkhealth_names_the_running_version_and_the_supported_range(nvim_factory):
    ed = nvim_factory()
    major, minor, patch = nvim_version(NVIM)
    ed.nvim.command("checkhealth amp")
    lines = ed.nvim.api.buf_get_lines(0, 0, -1, False)
    report = "\n".join(lines)
    line = next((l for l in lines if f"Neovim {major}.{minor}.{patch}" in l), None)
    assert line is not None, report
    if (major, minor) <= (0, 12):
        assert re.search(r"\bOK\b", line) and "supported: 0.10 to 0.12" in line, report
    else:
        assert re.search(r"\bWARNING\b", line) and "untested" in line, report


# ------------------------------------------------------------ Visual regions on 0.10

# Lines with what makes columns hard: tabs, multibyte and double-width
# characters, a composing character, empty and short lines.
REGION_LINES = ["hello world", "", "\tab\tc", "é→😀x wide 漢字 end", "e\u0301 composing",
                "short", "a much longer line here ok"]

REGION_COMPARE = r"""
local compat = require("amp.compat")
local lines = ...
vim.api.nvim_buf_set_lines(0, 0, -1, true, lines)
local positions = {}
for l, text in ipairs(lines) do
  for c = 1, #text + 1 do
    local b = text:byte(c)
    if c == #text + 1 or b < 0x80 or b >= 0xC0 then
      positions[#positions + 1] = { 0, l, c, 0 }
    end
  end
end
local cases, diffs = 0, {}
for _, selection in ipairs({ "inclusive", "exclusive" }) do
  vim.o.selection = selection
  for _, kind in ipairs({ "v", "V", "\22" }) do
    for i = 1, #positions, 2 do
      for j = 1, #positions do
        local a, b = positions[i], positions[j]
        local opts = { type = kind, eol = true }
        local real = vim.fn.getregionpos(a, b, opts)
        local emulated = compat.emulated_getregionpos(a, b, opts)
        -- the offsets ('virtualedit' columns) are not emulated
        for _, t in ipairs({ real, emulated }) do
          for _, seg in ipairs(t) do
            seg[1][4], seg[2][4] = 0, 0
          end
        end
        cases = cases + 1
        if not vim.deep_equal(real, emulated) and #diffs < 5 then
          diffs[#diffs + 1] = vim.inspect({ selection, kind, a, b, real = real, emulated = emulated }, { newline = " " })
        end
      end
    end
  end
end
vim.bo.modified = false
return { cases, diffs }
"""


def test_the_0_10_region_code_gives_what_getregionpos_does(editor):
    # On 0.11 and later, the 0.10 emulation is compared with Neovim's own
    # getregionpos(); on 0.10 there is none (the Visual selection tests of
    # test_context.py run that code there).
    if not editor.nvim.funcs.exists("*getregionpos"):
        pytest.skip("this Neovim has no getregionpos() to compare with")
    cases, diffs = editor.lua(REGION_COMPARE, REGION_LINES)
    assert cases > 5000
    assert diffs == [], "\n".join(diffs)


# ------------------------------------------------------------ C API path


def test_c_api_path_is_on_for_verified_versions_and_can_be_turned_off(nvim_factory, env_factory):
    major, minor, _ = nvim_version(NVIM)
    ed = nvim_factory(_extra_env={"AMP_NVIM_C_API": None})
    on = ed.lua("return require('amp.native').call('bulk_c_api')")
    assert on is ((major, minor) >= (0, 10) and (major, minor) <= (0, 12))
    forced = nvim_factory(_env=env_factory("other"), _extra_env={"AMP_NVIM_C_API": "0"})
    assert forced.lua("return require('amp.native').call('bulk_c_api')") is False
    # The vim.api path gives the same answers (scripts/test also runs the
    # read/edit, context and OpenCtx tests with AMP_NVIM_C_API=0).
    p = forced.env.workspace / "f.txt"
    p.write_text("one\ntwo\n")
    forced.edit(p)
    forced.nvim.command("normal! jAé")
    c = forced.connect()
    read = c.call("readFile", {"path": str(p)})
    assert read.get("content") == "one\ntwoé\n", read
    forced.nvim.command("checkhealth amp")
    report = "\n".join(forced.nvim.api.buf_get_lines(0, 0, -1, False))
    assert "go through vim.api" in report, report


# ------------------------------------------------------------ :help amp


def help_tags_and_links() -> tuple[list[str], list[str]]:
    text = HELP.read_text("utf-8")
    tags, links = [], []
    for line in text.splitlines():
        # Code examples (lines indented under a `>` line) hold no tags; the
        # plain-text rules of |help-writing| are enough for this file.
        tags += re.findall(r"(?:^|\s)\*([^*\s|]+)\*(?=\s|$)", line)
        links += re.findall(r"(?:^|[\s(])\|([^|\s]+)\|(?=[\s.,;:)]|$)", line)
    return sorted(set(tags)), sorted(set(links))


def test_doc_tags_is_up_to_date(tmp_path):
    doc = tmp_path / "doc"
    doc.mkdir()
    shutil.copy(HELP, doc / "amp.txt")
    subprocess.run([NVIM, "--headless", "--clean", "-c", f"helptags {doc}", "-c", "q"],
                   check=True, capture_output=True, timeout=30)
    committed = (REPO / "doc" / "tags").read_text("utf-8")
    assert committed == (doc / "tags").read_text("utf-8"), \
        "doc/tags is stale: run  nvim --headless -c 'helptags doc' -c q"


def test_help_file_ends_with_its_modeline_and_fits_78_columns():
    """|help-writing|: the modeline is the file's last line (Neovim reads
    modelines only near the end), and no line is wider than 'textwidth' 78
    (display cells, tabs at 8), so the help reads in an 80-column window."""
    import unicodedata
    lines = HELP.read_text("utf-8").rstrip("\n").split("\n")
    assert re.fullmatch(r"\s*vim:tw=78:ts=8:ft=help:norl:", lines[-1]), lines[-3:]
    assert sum(1 for l in lines if "vim:tw=78" in l) == 1
    def width(line: str) -> int:
        return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line.expandtabs(8))
    wide = [(n, width(l), l) for n, l in enumerate(lines, 1) if width(l) > 78]
    assert not wide, wide


def test_every_help_tag_and_link_resolves(amp_env, tmp_path):
    tags, links = help_tags_and_links()
    assert "amp" in tags and "amp-config" in tags, tags
    assert len(links) >= 10, links
    out = tmp_path / "resolved.json"
    # :help {tag} jumps to the line that defines *{tag}* (exactly that tag:
    # :help also accepts a prefix, so the line is checked).
    code = f"""
      local results = {{}}
      for _, tag in ipairs(vim.json.decode({lua_string(json.dumps(tags + links))})) do
        local ok, err = pcall(vim.cmd, 'help ' .. vim.fn.escape(tag, ' |'))
        local line = ok and vim.api.nvim_get_current_line() or ''
        local found = ok and vim.bo.buftype == 'help'
          and line:find('*' .. tag .. '*', 1, true) ~= nil
        results[tag] = found and vim.fn.expand('%:t') or ('unresolved: ' .. tostring(err or line))
        pcall(vim.cmd, 'helpclose')
      end
      vim.fn.writefile({{ vim.json.encode(results) }}, {lua_string(str(out))})
    """
    proc = run_headless(NVIM, amp_env, f"lua {' '.join(code.split())}")
    assert out.exists(), proc.stderr
    results = json.loads(out.read_text())
    unresolved = {t: r for t, r in results.items() if r.startswith("unresolved")}
    assert not unresolved, unresolved
    # The plugin's own tags come from its doc/amp.txt.
    for tag in tags:
        assert results[tag] == "amp.txt", (tag, results[tag])
    assert results["amp-config"] == "amp.txt"


# ------------------------------------------------------------ first start, :Amp build


def test_first_start_without_the_library_says_what_to_run_in_one_line(amp_env, tmp_path):
    # The plugin as installed before its build step ran: no target/.
    plugin = tmp_path / "amp.nvim-rs"
    for part in ("lua", "plugin", "doc", "node"):
        shutil.copytree(REPO / part, plugin / part)
    out = tmp_path / "out"
    out.mkdir()
    argv = [NVIM, "--headless", "--clean", "--cmd", f"set rtp^={plugin}"]
    script = amp_env.root / "first.vim"
    script.write_text("\n".join([
        "lua require('amp').setup({ auto_start = true, openctx = { providers = { ['https://example.invalid/x'] = true } } })",
        "lua require('amp').setup({ auto_start = true })",
        "Amp start",
        f"redir! > {out}/messages",
        "silent messages",
        "redir END",
        f"lua vim.fn.writefile({{vim.inspect(require('amp').status())}}, {lua_string(str(out / 'status'))})",
        f"redir! > {out}/status_line",
        "Amp status",
        "redir END",
        "checkhealth amp",
        f"write! {out}/health",
        "qa!",
    ]) + "\n")
    proc = subprocess.run(argv + ["-S", str(script)], cwd=str(amp_env.workspace), env=amp_env.environ,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    messages = [l for l in (out / "messages").read_text().splitlines() if l.strip()]
    # setup() twice and :Amp start: the same single line each time it is
    # an explicit command, once for setup()'s automatic start.
    assert messages and set(messages) == {"amp: run :Amp build or :Amp install: the native library is not built yet"}, \
        messages
    assert messages.count(messages[0]) == 2, messages  # setup() once, :Amp start once
    assert "stack traceback" not in proc.stderr, proc.stderr
    assert "running = false" in (out / "status").read_text()
    # :Amp status: no version of a library that is not there ("vnil").
    status_line = [l for l in (out / "status_line").read_text().splitlines() if l.strip()]
    assert status_line == ["amp: not running, last error: run :Amp build or :Amp install: the native library is "
                           "not built yet"], \
        status_line
    health = (out / "health").read_text()
    assert "looked in" in health and "target/release/libamp_core.so" in health, health
    # The Amp CLI's npm package is @ampcode/cli (it was @sourcegraph/amp).
    assert "sourcegraph" not in health
    if "amp (the Amp CLI) not found" in health:
        assert "npm install -g @ampcode/cli" in health, health
    assert "cargo build --release" in health, health


def test_amp_build_runs_cargo_in_the_background_and_reports_in_one_line(nvim_factory):
    if not shutil.which("cargo"):
        pytest.fail("cargo is needed (the library is built with it)")
    # The tests give Neovim a HOME of its own: cargo and rustup keep theirs.
    home = Path(os.path.expanduser("~"))
    ed = nvim_factory(_extra_env={
        "CARGO_HOME": os.environ.get("CARGO_HOME") or str(home / ".cargo"),
        "RUSTUP_HOME": os.environ.get("RUSTUP_HOME") or str(home / ".rustup"),
    })
    ed.nvim.command("Amp build")
    assert ed.lua("return require('amp.build').running()") is True
    # The editor answers while cargo runs.
    assert ed.nvim.eval("1 + 1") == 2
    deadline = time.monotonic() + 300
    while ed.lua("return require('amp.build').running()") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not ed.lua("return require('amp.build').running()"), "cargo build took over 5 minutes"
    messages = [l for l in ed.messages().splitlines() if l.startswith("amp:")]
    assert re.fullmatch(r"amp: restart Neovim to use the new library: built in [\d.]+ s", messages[-1]), messages
    # The server kept running.
    ed.connect().ping()
