"""The files the benchmarks edit."""

from __future__ import annotations

from pathlib import Path


def make_file(path: Path, lines: int) -> None:
    path.write_text("".join(f"line {i:06d} the quick brown fox jumps over the lazy dog é→😀\n" for i in range(lines)),
                    encoding="utf-8")


LUA_BIG_BUFFER = r"""
local lines, width = ...
local t = {}
local tail = ' lorem ipsum dolor sit amet, consectetur adipiscing elit é→😀 '
for i = 1, lines do
  local s = string.format('%08d', i) .. tail
  t[i] = s .. string.rep('x', width - #s)
end
vim.api.nvim_buf_set_lines(0, 0, -1, false, t)
return #t
"""


def five_lines_edited(base: list[str], lines: int, r: int, first: int) -> list[str]:
    """`base` with 5 of its first `lines` lines changed, spread over the file
    from line `first`; each `r` changes other lines."""
    mod = list(base)
    for k in range(5):
        j = (k * lines // 5 + 7 * r + first) % lines
        mod[j] = mod[j][:20] + f" edited {r}-{k} " + mod[j][35:]
    return mod


def big_text(lines: int, width: int, variant: int = 0) -> str:
    tail = " lorem ipsum dolor sit amet, consectetur adipiscing elit é→😀 "
    out = []
    for i in range(1, lines + 1):
        s = f"{i:08d}" + tail
        out.append(s + ("x" if variant == 0 else "y") * (width - len(s.encode("utf-8"))))
    return "\n".join(out) + "\n"
