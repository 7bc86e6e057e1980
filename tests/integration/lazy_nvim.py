"""The real lazy.nvim for tests/integration/test_readme.py, offline.

lazy.nvim is a GitHub repository, and the tests reach no network but the
package registries. A PyPI package ships it: `retronvim` (a Neovim
configuration) carries lazy.nvim 11.17.5 unchanged under
`data/nvim/plugins/lazy.nvim/` (Apache-2.0). Its wheel is fetched with pip
(the ordinary client, pinned by version and SHA-256), and only that
directory is unpacked, into `.cache/lazy.nvim-11.17.5/` of the repository
(nothing of it is committed).

    .venv/bin/python tests/integration/lazy_nvim.py    # prints the directory
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VERSION = "11.17.5"
WHEEL = ("retronvim", "0.4.10", "bdeeb712c8396e85580b66bc39655ca1066d0d85d247cfb75368531745596443")
PREFIX = "data/nvim/plugins/lazy.nvim/"
DEST = REPO / ".cache" / f"lazy.nvim-{VERSION}"


def ensure() -> Path:
    """The directory of lazy.nvim, fetched and unpacked on first use."""
    if (DEST / "lua" / "lazy" / "init.lua").is_file():
        return DEST
    name, version, sha256 = WHEEL
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                        "--no-deps", "--only-binary=:all:", "--dest", tmp, f"{name}=={version}"],
                       check=True, timeout=300)
        wheel = next(Path(tmp).glob(f"{name}-{version}-*.whl"))
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if digest != sha256:
            raise RuntimeError(f"{wheel.name}: SHA-256 {digest}, expected {sha256}")
        unpacked = Path(tmp) / "lazy.nvim"
        with zipfile.ZipFile(wheel) as z:
            for member in z.namelist():
                if not member.startswith(PREFIX) or member.endswith("/"):
                    continue
                rel = Path(member[len(PREFIX):])
                if rel.is_absolute() or ".." in rel.parts:
                    raise RuntimeError(f"unexpected path in the wheel: {member}")
                target = unpacked / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(member))
        init = (unpacked / "lua" / "lazy" / "core" / "config.lua").read_text()
        if f'M.version = "{VERSION}"' not in init:
            raise RuntimeError(f"the wheel's lazy.nvim is not {VERSION}")
        DEST.parent.mkdir(parents=True, exist_ok=True)
        partial = DEST.with_name(DEST.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.move(str(unpacked), partial)
        partial.rename(DEST)
    return DEST


if __name__ == "__main__":
    print(ensure())
