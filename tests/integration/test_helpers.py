"""The Lua helpers compiled into the library (src/nvim/helpers/*.lua), as
src/nvim/lua.rs loads them: one file per Rust module that calls them, each
compiled when a helper of it is first asked for.

Because a file is compiled only when needed, a name defined in two files
would be caught only once both had run; these tests compile every file in a
real Neovim, as the library's loader does, and check the layout the lazy
loading relies on: a module's helpers are in its own file or in shared.lua.
"""

from __future__ import annotations

import json
import re
import subprocess

from conftest import REPO
from harness import NVIM

LUA_RS = REPO / "src" / "nvim" / "lua.rs"
HELPERS_DIR = REPO / "src" / "nvim" / "helpers"

# Compiles each file in order with one shared table, as lua.rs's loader
# does, and prints every file's names as JSON (or the error).
COMPILE_ALL = r"""
local repo, order = _G.arg[1], vim.split(_G.arg[2], ",")
local dir = repo .. "/src/nvim/helpers"
vim.o.runtimepath = repo .. "," .. vim.o.runtimepath -- the helpers require amp.* modules
local all, names = {}, {}
for _, file in ipairs(order) do
  local chunk = assert(loadfile(dir .. "/" .. file .. ".lua"))
  local helpers = chunk(all)
  names[file] = {}
  for name, helper in pairs(helpers) do
    assert(type(helper) == "function", file .. ": " .. name .. " is not a function")
    table.insert(names[file], name)
    all[name] = helper
  end
end
io.stdout:write(vim.json.encode(names))
"""


def declared() -> list[tuple[str, str]]:
    """lua.rs's HELPERS: (name, file) in the order they are compiled."""
    return re.findall(r'\("(\w+)", include_str!\("helpers/(\w+)\.lua"\)\)', LUA_RS.read_text())


def declared_files() -> list[str]:
    return [name for name, _ in declared()]


def compiled_names(tmp_path) -> dict[str, list[str]]:
    script = tmp_path / "compile_all.lua"
    script.write_text(COMPILE_ALL)
    out = subprocess.run([NVIM, "--clean", "-l", str(script), str(REPO), ",".join(declared_files())],
                         capture_output=True, text=True, timeout=30, check=True)
    return json.loads(out.stdout)


def test_every_helper_file_is_declared_once_shared_first():
    pairs = declared()
    assert all(name == file for name, file in pairs), pairs
    names = [name for name, _ in pairs]
    assert names[0] == "shared", "shared.lua is compiled first (the others use its helpers)"
    assert sorted(names) == sorted(p.stem for p in HELPERS_DIR.glob("*.lua"))
    assert len(set(names)) == len(names)


def test_no_helper_is_defined_in_two_files(tmp_path):
    names = compiled_names(tmp_path)
    seen: dict[str, str] = {}
    for file, helpers in names.items():
        assert helpers, f"helpers/{file}.lua defines no helper"
        for name in helpers:
            assert name not in seen, f"{name} is defined in helpers/{seen[name]}.lua and helpers/{file}.lua"
            seen[name] = file


def test_each_module_calls_its_own_helpers_or_shared_ones(tmp_path):
    """`lua::helper` compiles the calling module's file first, then falls
    back to compiling the others in order: a helper outside its caller's
    file and shared.lua would still be found, but by compiling files start-up
    does not need."""
    names = compiled_names(tmp_path)
    calls = 0
    for source in (REPO / "src" / "nvim").glob("*.rs"):
        for name in re.findall(r'helper(?:::<[^>]*>)?\("(\w+)"', source.read_text()):
            calls += 1
            own = names.get(source.stem, [])
            assert name in own or name in names["shared"], (
                f"{source.name} calls helper {name!r}, defined in neither helpers/{source.stem}.lua nor shared.lua")
    assert calls > 30  # the pattern still finds the call sites
