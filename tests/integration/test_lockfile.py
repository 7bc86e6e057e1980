"""The lockfile: where, what, permissions, atomicity, lifecycle, stale cleanup."""

import json
import os
import stat
import time

from conftest import (TOKEN_RE, dead_pid, lockfile_names_ok, port_accepts,
                      read_lockfiles, wait_for)


def test_lockfile_fields(nvim_factory, env_factory):
    env = env_factory("wörk space ✓")
    ed = nvim_factory(_env=env)
    path, lock = ed.wait_lockfile()

    assert path.parent == env.data_home / "amp" / "ide"
    assert path.name == f"{lock['port']}.json"
    assert isinstance(lock["port"], int) and 0 < lock["port"] < 65536
    assert isinstance(lock["authToken"], str) and TOKEN_RE.match(lock["authToken"]), lock["authToken"]
    assert lock["pid"] == ed.pid == ed.nvim.funcs.getpid()
    assert lock["workspaceFolders"] == [str(env.workspace)]
    assert lock["workspaceFolders"] == [ed.nvim.funcs.getcwd()]
    assert isinstance(lock["ideName"], str)
    # The running version exactly (read through the FFI where the tests run,
    # from :version elsewhere): vim.version() is the reference.
    version = ed.lua("local v = vim.version(); return ('%d.%d.%d'):format(v.major, v.minor, v.patch)")
    assert lock["ideName"] == f"Neovim (nvim {version})", lock["ideName"]
    # the file is plain UTF-8 JSON readable by any client
    assert json.loads(path.read_bytes().decode("utf-8")) == lock
    # and the advertised port is the one that works
    ed.connect().ping()


def test_lockfile_permissions(editor):
    path, _ = editor.wait_lockfile()
    dir_mode = stat.S_IMODE(os.stat(path.parent).st_mode)
    file_mode = stat.S_IMODE(os.stat(path).st_mode)
    assert dir_mode == 0o700, oct(dir_mode)
    assert file_mode == 0o600, oct(file_mode)


def test_lockfile_dir_tightened_if_it_already_exists(nvim_factory, amp_env):
    # an existing, too-open directory is not trusted as is
    d = amp_env.data_home / "amp" / "ide"
    d.mkdir(parents=True)
    os.chmod(d, 0o755)
    ed = nvim_factory()
    path, _ = ed.wait_lockfile()
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_amp_data_home_overrides_xdg(nvim_factory, amp_env, tmp_path):
    amp_home = tmp_path / "amp data hömé"
    ed = nvim_factory(_extra_env={"AMP_DATA_HOME": str(amp_home)})
    path, lock = ed.wait_lockfile()
    assert path.parent == amp_home / "amp" / "ide"
    assert not (amp_env.data_home / "amp" / "ide").exists() or \
        not list((amp_env.data_home / "amp" / "ide").glob("*.json"))
    ed.connect().ping()


def test_no_temp_files_left_behind(editor):
    path, _ = editor.wait_lockfile()
    assert lockfile_names_ok(path.parent) == []


def test_tokens_differ_and_instances_coexist(nvim_factory, amp_env):
    a = nvim_factory()
    b = nvim_factory()
    pa, la = a.wait_lockfile()
    pb, lb = b.wait_lockfile()
    assert pa != pb and la["port"] != lb["port"]
    assert la["authToken"] != lb["authToken"]
    # starting b (stale cleanup) did not remove a's live lockfile
    assert pa.exists()
    a.connect().ping()
    b.connect().ping()
    # b's token does not open a
    ca = a.connect(token=lb["authToken"])
    code, reason, _ = ca.wait_closed()
    assert (code, reason) == (1000, "Authentication failed")
    # a exits: its lockfile goes, b's stays
    a.quit()
    assert not pa.exists()
    assert pb.exists()
    b.connect().ping()


def test_lockfile_removed_on_qa(editor):
    path, lock = editor.wait_lockfile()
    rc = editor.quit("qa")
    assert rc == 0
    assert not path.exists()
    assert lockfile_names_ok(path.parent) == []
    assert not port_accepts(lock["port"])


def test_lockfile_removed_on_amp_stop_command(editor):
    path, lock = editor.wait_lockfile()
    c = editor.connect()
    c.ping()
    editor.nvim.command("Amp stop")
    wait_for(lambda: not path.exists(), 5, "lockfile removal after :Amp stop")
    wait_for(lambda: not port_accepts(lock["port"]), 5, "port closed after :Amp stop")
    # the connected client was disconnected
    c.wait_closed(timeout=5)
    # nvim itself is still fine
    assert editor.nvim.eval("1 + 1") == 2


def test_lockfile_removed_on_lua_stop_and_start_again(editor):
    path, lock = editor.wait_lockfile()
    editor.lua("require('amp').stop()")
    wait_for(lambda: not path.exists(), 5, "lockfile removal after require('amp').stop()")
    wait_for(lambda: not port_accepts(lock["port"]), 5, "port closed after stop()")
    assert editor.own_lockfiles() == {}
    # stop is idempotent
    editor.lua("require('amp').stop()")
    editor.lua("require('amp').start()")
    path2, lock2 = editor.wait_lockfile()
    assert lock2["ideName"] == lock["ideName"]
    editor.connect().ping()


def test_restart_keeps_ide_name(editor):
    path, lock = editor.wait_lockfile()
    editor.nvim.command("Amp restart")
    # a new lockfile (new token at least) for the same pid
    path2, lock2 = editor.wait_lockfile(
        where=lambda d: d.get("authToken") != lock["authToken"] or d.get("port") != lock["port"])
    assert lock2["ideName"] == lock["ideName"]
    assert lock2["pid"] == lock["pid"]
    assert lock2["workspaceFolders"] == lock["workspaceFolders"]
    if path2 != path:
        assert not path.exists()
    assert len(editor.own_lockfiles()) == 1
    editor.connect().ping()


def test_stale_lockfiles_removed_live_kept(nvim_factory, amp_env):
    d = amp_env.data_home / "amp" / "ide"
    d.mkdir(parents=True)
    os.chmod(d, 0o700)
    stale = d / "99999.json"
    stale.write_text(json.dumps({"port": 99999, "authToken": "x" * 43, "pid": dead_pid(),
                                 "workspaceFolders": ["/nowhere"], "ideName": "Neovim (nvim 0.0)"}))
    live_content = json.dumps({"port": 99998, "authToken": "y" * 43, "pid": os.getpid(),
                               "workspaceFolders": ["/elsewhere"], "ideName": "Other"})
    live = d / "99998.json"
    live.write_text(live_content)
    ed = nvim_factory()
    ed.wait_lockfile()
    assert not stale.exists(), "lockfile of a dead pid was not cleaned up"
    assert live.exists(), "lockfile of a live pid was deleted"
    assert live.read_text() == live_content


def test_dirchanged_rewrites_workspace_folders(nvim_factory, env_factory):
    env = env_factory("start dir")
    other = env.root / "öther dir ✓"
    other.mkdir()
    ed = nvim_factory(_env=env)
    path, lock = ed.wait_lockfile()
    assert lock["workspaceFolders"] == [str(env.workspace)]
    ed.nvim.command("cd " + ed.nvim.funcs.fnameescape(str(other)))
    path2, lock2 = ed.wait_lockfile(
        timeout=5, where=lambda d: d.get("workspaceFolders") == [str(other)])
    assert path2 == path
    assert lock2["port"] == lock["port"] and lock2["pid"] == lock["pid"]
    assert lock2["ideName"] == lock["ideName"]
    assert stat.S_IMODE(os.stat(path2).st_mode) == 0o600
    assert lockfile_names_ok(path.parent) == []
    # a client that reads the rewritten lockfile can still connect
    ed.connect(token=lock2["authToken"]).ping()


def test_lockfile_is_never_half_written_during_rewrites(nvim_factory, env_factory):
    """Readers polling during many :cd rewrites only ever see complete JSON."""
    env = env_factory()
    dirs = []
    for i in range(2):
        p = env.root / f"d{i}"
        p.mkdir()
        dirs.append(p)
    ed = nvim_factory(_env=env)
    path, _ = ed.wait_lockfile()
    bad = []
    for i in range(40):
        ed.nvim.command("cd " + ed.nvim.funcs.fnameescape(str(dirs[i % 2])))
        for _ in range(5):
            try:
                raw = path.read_bytes()
            except FileNotFoundError:
                bad.append("missing")
                continue
            try:
                json.loads(raw)
            except ValueError:
                bad.append(raw[:80])
    assert bad == [], f"lockfile observed missing or partial: {bad[:5]!r}"

    # once the rewrites are done: the last cwd wins and no temp file remains
    # (a temp file may exist while a rewrite is in flight; it must not stay)
    def settled():
        data = read_lockfiles(path.parent).get(path) or {}
        return data.get("workspaceFolders") == [str(dirs[1])] and not lockfile_names_ok(path.parent)

    wait_for(settled, 5, "final workspaceFolders == last cwd and no temp files")
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:  # no late write with an older cwd lands afterwards
        assert read_lockfiles(path.parent)[path]["workspaceFolders"] == [str(dirs[1])]
        time.sleep(0.02)
