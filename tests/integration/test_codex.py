"""The Codex CLI front-end (agents.codex, src/codex/): its private sockets
in a directory of this Neovim's own (Codex's TMPDIR when `:Amp open codex`
starts it), Codex's unofficial `/ide` IPC protocol behind
codex.unofficial_ide_context (u32 little-endian length + JSON), and the
PreToolUse hook (lua/amp/codex/hook.lua, run as `nvim --clean -l`) that
hands every apply_patch to the review view and tells Codex the decision.
The real Codex CLI is driven in test_codex_real.py."""

import json
import os
import socket
import stat
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import wait_for
from harness import REPO
from review_helpers import open_review, proposals, wait_proposals

SETUP = {"agents": {"amp": True, "codex": True}}
IDE = {"agents": {"amp": True, "codex": True}, "codex": {"unofficial_ide_context": True}}
# The limits (src/codex/protocol.rs), as :help amp-codex gives them.
MAX_IPC_FRAME_BYTES = 64 * 1024
MAX_PATCH_BYTES = 16 * 1024 * 1024


def codex_status(ed):
    return wait_for(lambda: (ed.lua("return require('amp').status().agents.codex") or {}).get("socket")
                    and ed.lua("return require('amp').status().agents.codex"), 10, "the Codex front-end")


class Framed:
    """A client of one of the front-end's sockets: u32 LE length + bytes."""

    def __init__(self, path: str, timeout: float = 10.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)

    def send(self, body: bytes | dict, length: int | None = None):
        if isinstance(body, dict):
            body = json.dumps(body).encode()
        self.sock.sendall(struct.pack("<I", len(body) if length is None else length) + body)

    def recv_exact(self, n: int) -> bytes | None:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                return None
            out += chunk
        return out

    def recv(self) -> dict | None:
        head = self.recv_exact(4)
        if head is None:
            return None
        body = self.recv_exact(struct.unpack("<I", head)[0])
        return None if body is None else json.loads(body)

    def closed(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def request(self, method: str, params: dict | None = None, rid: str = "r1") -> dict:
        self.send({"type": "request", "requestId": rid, "sourceClientId": "codex-tui", "version": 0,
                   "method": method, "params": params or {}})
        return self.recv()

    def close(self):
        self.sock.close()


def test_codex_is_off_by_default_and_its_context_is_opt_in(nvim_factory, amp_env):
    ed = nvim_factory()
    assert ed.lua("return require('amp').status().agents.codex") == {"enabled": False}
    ed.shutdown()
    ed = nvim_factory(**SETUP)
    status = codex_status(ed)
    # The hook's socket only: Codex's /ide protocol is unofficial and off.
    assert status["ide_context"] is False and status.get("ipc_socket") is None
    root = Path(status["tmpdir"])
    assert not (root / "codex-ipc").exists()
    assert Path(status["socket"]).is_socket()


def test_the_sockets_are_private_in_a_directory_of_this_neovims_own(nvim_factory, amp_env):
    ed = nvim_factory(**IDE)
    status = codex_status(ed)
    root = Path(status["tmpdir"])
    ipc, hook = Path(status["ipc_socket"]), Path(status["socket"])
    assert root.name.startswith(f"amp-codex-{ed.pid}-")
    # As Codex requires of its IPC directory (and ours the same): ours,
    # no group/other bits; the sockets 0600.
    for d in (root, ipc.parent, hook.parent):
        st = os.stat(d)
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid(), d
    for s in (ipc, hook):
        assert stat.S_ISSOCK(os.stat(s).st_mode) and stat.S_IMODE(os.stat(s).st_mode) == 0o600
    assert ipc == root / "codex-ipc" / f"ipc-{os.geteuid()}.sock"
    # Only the terminal :Amp open codex starts gets them: Neovim's own
    # environment (every other terminal, the desktop app) keeps its TMPDIR.
    env = ed.lua("return require('amp.terminal').env('codex')")
    assert env["TMPDIR"] == str(root) and env["AMP_CODEX_HOOK_SOCKET"] == str(hook)
    assert int(env["AMP_CODEX_HOOK_TIMEOUT_MS"]) > 300_000
    assert ed.lua("return vim.env.TMPDIR") == amp_env.environ.get("TMPDIR")
    assert ed.lua("return vim.env.AMP_CODEX_HOOK_SOCKET") is None
    # :Amp status and the statusline name it.
    text = ed.lua("return vim.fn.execute('Amp status')")
    assert f"codex on {hook}, 0 clients" in text, text
    ed.quit()
    assert not root.exists(), "the directory goes with the session"


def test_open_codex_adds_the_hook_for_this_run_only(nvim_factory, amp_env):
    ed = nvim_factory(**SETUP)
    status = codex_status(ed)
    args = status["open"]["args"]
    assert args[0] == "-c" and args[2] == "-c"
    progpath = ed.lua("return vim.v.progpath")
    assert os.path.isabs(progpath) and os.access(progpath, os.X_OK)
    hook = f"{progpath} --clean -l {REPO}/lua/amp/codex/hook.lua"
    assert args[1] == ('hooks.PreToolUse=[{matcher="^apply_patch$", hooks=[{type="command", command="%s", '
                       'timeout=%d}]}]' % (hook, 300 + 60)), args[1]
    assert args[3].startswith('hooks.state={"/<session-flags>/config.toml:pre_tool_use:0:0"={trusted_hash="sha256:')
    assert "--dangerously-bypass-hook-trust" not in args
    # Nothing is written to the user's Codex config.
    assert not (amp_env.home / ".codex").exists()


def ide(ed, c: Framed, rid="r1"):
    return c.request("ide-context", {"workspaceRoot": str(ed.cwd)}, rid)


def test_ide_context_the_visual_selection_and_tabs(nvim_factory, amp_env):
    f = amp_env.workspace / "src" / "notes.txt"
    f.parent.mkdir()
    f.write_text("alpha\nbeta line\ngamma line\ndelta\n")
    other = amp_env.workspace / "other.txt"
    other.write_text("x\n")
    ed = nvim_factory(**IDE)
    status = codex_status(ed)
    ed.edit(other)
    ed.nvim.command("vsplit " + str(f))
    ed.nvim.input("jvjl")
    wait_for(lambda: ed.lua("return vim.fn.mode()") == "v", 5, "Visual mode")
    c = Framed(status["ipc_socket"])
    try:
        init = c.request("initialize", {"clientType": "desktop"}, "i1")
        assert init["type"] == "response" and init["requestId"] == "i1" and init["resultType"] == "success"
        assert init["result"]["clientId"].startswith("neovim-")
        wait_for(lambda: status_clients(ed) == 1, 5, "the client counted")

        def active():
            r = ide(ed, c)
            return r["result"]["ideContext"].get("activeFile", {}).get("activeSelectionContent") and r

        r = wait_for(active, 10, "the selection in ide-context")
        context = r["result"]["ideContext"]
        a = context["activeFile"]
        assert (a["label"], a["path"], a["fsPath"]) == ("notes.txt", "src/notes.txt", str(f))
        assert a["selection"] == {"start": {"line": 1, "character": 0}, "end": {"line": 2, "character": 2}}
        assert a["activeSelectionContent"] == "beta line\nga"
        assert {t["path"] for t in context["openTabs"]} == {"src/notes.txt", "other.txt"}
        # Unknown methods: Codex's own error; broadcasts: no answer.
        assert c.request("something-else", {}, "x")["resultType"] == "error"
        c.send({"type": "broadcast", "method": "thread-updated", "params": {}})
        assert ide(ed, c, "r2")["requestId"] == "r2"
    finally:
        c.close()
    wait_for(lambda: status_clients(ed) == 0, 5, "the client gone")


def status_clients(ed):
    return ed.lua("return require('amp').status().agents.codex.clients")


def test_ipc_frames_at_the_limit_and_one_past(nvim_factory, amp_env):
    ed = nvim_factory(**IDE)
    status = codex_status(ed)

    def request_of(size: int) -> bytes:
        base = {"type": "request", "requestId": "big", "method": "ide-context", "params": {"pad": ""}}
        pad = size - len(json.dumps(base).encode())
        base["params"]["pad"] = "x" * pad
        body = json.dumps(base).encode()
        assert len(body) == size
        return body

    c = Framed(status["ipc_socket"])
    c.send(request_of(MAX_IPC_FRAME_BYTES))
    assert c.recv()["requestId"] == "big", "a frame of the limit is answered"
    c.close()
    c = Framed(status["ipc_socket"])
    # One past: refused on its length, before any body byte is read.
    c.send(b"", length=MAX_IPC_FRAME_BYTES + 1)
    assert c.closed()
    c.close()
    # Not JSON, no type: dropped.
    for bad in (b"nope", b"{}"):
        c = Framed(status["ipc_socket"])
        c.send(bad)
        assert c.closed()
        c.close()
    # The server still answers.
    c = Framed(status["ipc_socket"])
    assert ide(ed, c)["resultType"] == "success"
    c.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to connect as another user")
def test_a_peer_of_another_user_is_refused(nvim_factory, amp_env, tmp_path):
    # (This machine's /tmp may be 0700: a TMPDIR another user can reach.)
    import shutil
    import tempfile
    base = Path(tempfile.mkdtemp(prefix="amp-codex-peer-", dir="/var/tmp"))
    os.chmod(base, 0o777)
    try:
        peer_is_refused(nvim_factory(**IDE, _extra_env={"TMPDIR": str(base)}))
    finally:
        shutil.rmtree(base, ignore_errors=True)


def peer_is_refused(ed):
    status = codex_status(ed)
    # Even with every mode loosened, the peer's uid is checked on accept.
    root = Path(status["tmpdir"])
    paths = [root, root / "codex-ipc", root / "amp"]
    for p in paths:
        os.chmod(p, 0o777)
    for s in (status["ipc_socket"], status["socket"]):
        os.chmod(s, 0o777)
    script = ("import socket,struct,sys\n"
              "s=socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1])\n"
              "b=b'{\"type\":\"request\",\"requestId\":1,\"method\":\"ide-context\",\"params\":{}}'\n"
              "try:\n  s.sendall(struct.pack('<I',len(b))+b); d=s.recv(4)\n"
              "except (ConnectionResetError, BrokenPipeError):\n  d=b''\n"
              "print('answered' if d else 'refused')\n")
    for path in (status["ipc_socket"], status["socket"]):
        done = subprocess.run(["python3", "-c", script, path], capture_output=True, text=True, timeout=20,
                              user=65534, group=65534)
        assert done.stdout.strip() == "refused", (path, done.stdout, done.stderr)
    # The same request from our own uid is answered.
    c = Framed(status["ipc_socket"])
    assert ide(ed, c)["resultType"] == "success"
    c.close()


# The hook ----------------------------------------------------------------


def hook_input(ed, patch: str) -> bytes:
    return json.dumps({"session_id": "s1", "cwd": str(ed.cwd), "hook_event_name": "PreToolUse",
                       "tool_name": "apply_patch", "tool_input": {"command": patch},
                       "tool_use_id": "call_1", "transcript_path": None}).encode()


def start_hook(ed, patch: str, env: dict | None = None, command: str | None = None) -> subprocess.Popen:
    """The hook as Codex runs it: its command through `sh -c`, the hook
    input on stdin, the terminal's environment."""
    if command is None:
        command = ed.lua("return require('amp').status().agents.codex.open.args[2]")
        command = command.split('command="', 1)[1].split('", timeout=', 1)[0]
    full = dict(ed.environ)
    full.update(ed.lua("return require('amp.terminal').env('codex')") if env is None else env)
    p = subprocess.Popen(["sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=full, cwd=str(ed.cwd), start_new_session=True)
    p.stdin.write(hook_input(ed, patch))
    p.stdin.close()
    return p


def finish(p: subprocess.Popen, timeout: float = 30) -> tuple[int, str, str]:
    p.wait(timeout)
    return p.returncode, p.stdout.read().decode(), p.stderr.read().decode()


def patch_of(body: str) -> str:
    return f"*** Begin Patch\n{body}\n*** End Patch\n"


def review_window(ed, rel: str) -> int:
    return open_review(ed, f"{rel} (proposed by Codex)", pick=rel, arg=rel)


def test_the_hook_accepted_as_proposed_lets_codex_apply_its_own_patch(nvim_factory, amp_env):
    f = amp_env.workspace / "a.txt"
    f.write_text("one\ntwo\nthree\n")
    ed = nvim_factory(**SETUP)
    codex_status(ed)
    p = start_hook(ed, patch_of("*** Update File: a.txt\n@@\n one\n-two\n+TWO"))
    assert wait_proposals(ed, 1, 30)[0]["agent"] == "Codex"
    win = review_window(ed, "a.txt")
    buf = ed.lua("return vim.api.nvim_win_get_buf(...)", win)
    assert ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", buf) == ["one", "TWO", "three"]
    ed.nvim.command("write")
    code, out, err = finish(p)
    assert (code, out) == (0, ""), err
    assert f.read_text() == "one\ntwo\nthree\n", "Codex writes the file, not the hook"


def test_the_hook_a_tweak_becomes_codexs_patch_and_q_denies(nvim_factory, amp_env):
    f = amp_env.workspace / "a.txt"
    f.write_text("one\ntwo\nthree\n")
    ed = nvim_factory(**SETUP)
    codex_status(ed)
    p = start_hook(ed, patch_of("*** Update File: a.txt\n@@\n one\n-two\n+TWO"))
    wait_proposals(ed, 1, 30)
    win = review_window(ed, "a.txt")
    buf = ed.lua("return vim.api.nvim_win_get_buf(...)", win)
    ed.lua("vim.api.nvim_buf_set_lines(..., 2, 3, false, { 'THREE (mine)' })", buf)
    ed.nvim.command("write")
    code, out, err = finish(p)
    assert code == 0, err
    answer = json.loads(out)["hookSpecificOutput"]
    assert (answer["hookEventName"], answer["permissionDecision"]) == ("PreToolUse", "allow")
    assert answer["updatedInput"]["command"] == patch_of(
        "*** Update File: a.txt\n@@\n one\n-two\n-three\n+TWO\n+THREE (mine)")
    assert f.read_text() == "one\ntwo\nthree\n"
    # :q: denied with the reason on stderr, exit 2; the file untouched.
    p = start_hook(ed, patch_of("*** Update File: a.txt\n@@\n-one\n+ONE"))
    wait_proposals(ed, 1, 30)
    review_window(ed, "a.txt")
    ed.nvim.command("quit")
    code, out, err = finish(p)
    assert (code, out) == (2, "")
    assert err.strip() == "amp: the user rejected the change to a.txt in Neovim's review; the patch was not applied"
    assert f.read_text() == "one\ntwo\nthree\n"
    assert not proposals(ed)


def test_the_hook_fails_closed(nvim_factory, amp_env):
    f = amp_env.workspace / "a.txt"
    f.write_text("one\n")
    ed = nvim_factory(**SETUP)
    status = codex_status(ed)
    env = ed.lua("return require('amp.terminal').env('codex')")
    # A patch Neovim cannot read, or cannot apply: denied with the reason.
    code, _, err = finish(start_hook(ed, "rm -rf /"))
    assert code == 2 and "Neovim cannot read the patch" in err, err
    code, _, err = finish(start_hook(ed, patch_of("*** Update File: a.txt\n@@\n-zzz\n+y")))
    assert code == 2 and "cannot apply the patch to a.txt" in err, err
    # Not started by :Amp open codex.
    code, _, err = finish(start_hook(ed, patch_of("*** Add File: b.txt\n+b"), env={"AMP_CODEX_HOOK_SOCKET": ""}))
    assert code == 2 and "not started by Neovim's :Amp open codex" in err, err
    # Codex interrupted while the user reviews: the review closes.
    p = start_hook(ed, patch_of("*** Add File: b.txt\n+b"))
    wait_proposals(ed, 1, 30)
    os.killpg(p.pid, 9)
    p.wait()
    wait_for(lambda: not proposals(ed), 10, "the review to close with the hook")
    # Neovim gone: denied, never let through.
    command = status["open"]["args"][1].split('command="', 1)[1].split('", timeout=', 1)[0]
    ed.quit()
    code, _, err = finish(start_hook(ed, patch_of("*** Add File: b.txt\n+b"), env=env, command=command))
    assert code == 2 and "Neovim is gone" in err, err
    assert not (amp_env.workspace / "b.txt").exists()
    assert not Path(status["socket"]).exists()


def test_hook_frames_at_the_limit_and_one_past(nvim_factory, amp_env):
    ed = nvim_factory(**SETUP)
    status = codex_status(ed)
    header = {"cwd": str(ed.cwd), "tool_name": "apply_patch"}
    # A patch of the limit is read and reviewed.
    big = patch_of("*** Add File: big.txt\n+")
    big = big.replace("+\n", "+" + "x" * (MAX_PATCH_BYTES - len(big)) + "\n")
    assert len(big) == MAX_PATCH_BYTES
    c = Framed(status["socket"], timeout=60)
    c.send(dict(header, patch_bytes=MAX_PATCH_BYTES))
    assert c.recv() == {"decision": "send"}
    c.send(big.encode())
    wait_proposals(ed, 1, 60)
    c.close()
    wait_for(lambda: not proposals(ed), 10, "the review to close with the hook")
    # One past: denied before any byte of it is sent.
    c = Framed(status["socket"])
    c.send(dict(header, patch_bytes=MAX_PATCH_BYTES + 1))
    answer = c.recv()
    assert answer["decision"] == "deny" and f"the patch is {MAX_PATCH_BYTES + 1} bytes" in answer["reason"]
    c.close()
    # A header frame of the limit is read; one past is refused on its length.
    pad = MAX_IPC_FRAME_BYTES - len(json.dumps(dict(header, patch_bytes=1, pad="")).encode())
    c = Framed(status["socket"])
    c.send(dict(header, patch_bytes=1, pad="x" * pad))
    assert c.recv() == {"decision": "send"}
    c.close()
    c = Framed(status["socket"])
    c.send(b"", length=MAX_IPC_FRAME_BYTES + 1)
    assert c.closed()
    c.close()
    # A patch frame longer than announced: dropped.
    c = Framed(status["socket"])
    c.send(dict(header, patch_bytes=3))
    assert c.recv() == {"decision": "send"}
    c.send(b"abcd")
    assert c.closed()
    c.close()
    assert not proposals(ed)


def test_amp_open_codex_starts_it_with_the_hook_and_its_own_tmpdir(nvim_factory, amp_env, tmp_path):
    """`:Amp open codex` as the user types it: the command of terminal.cmd.codex
    (a stand-in recording its arguments and environment), then the
    overrides, then the user's arguments; the user's ~/.codex untouched."""
    from test_terminal import NO_CI, read_env, record_notes, notes, recording_agent
    cmd, out = recording_agent(tmp_path)
    ed = nvim_factory(**IDE, terminal={"cmd": {"codex": [str(cmd), "--first"]}}, _extra_env=NO_CI)
    record_notes(ed)
    status = codex_status(ed)
    ed.nvim.command("Amp open codex resume --last")
    env = read_env(out)
    assert env["TMPDIR"] == status["tmpdir"] and env["AMP_CODEX_HOOK_SOCKET"] == status["socket"], env
    assert env["AMP_CODEX_HOOK_TIMEOUT_MS"] == str(300_000 + 30_000)
    args = wait_for(lambda: (out / "args").exists() and (out / "args").read_text(), 10, "the arguments")
    assert args.split("\n")[:-1] == ["--first"] + status["open"]["args"] + ["resume", "--last"]
    assert notes(ed) == [], notes(ed)
    assert not (amp_env.home / ".codex").exists()
    # Without agents.codex it starts unattached, and is told so in one line.
    ed.shutdown()
    cmd2, out2 = recording_agent(tmp_path, "plain")
    ed = nvim_factory(terminal={"cmd": {"codex": [str(cmd2)]}}, _extra_env=NO_CI)
    record_notes(ed)
    ed.nvim.command("Amp open codex")
    env = read_env(out2)
    assert "AMP_CODEX_HOOK_SOCKET" not in env and env.get("TMPDIR") == amp_env.environ.get("TMPDIR")
    assert (out2 / "args").read_text() == "\n"
    assert notes(ed) == ["amp: set agents.codex = true to attach codex: it starts unattached, "
                         "this Neovim serves no codex protocol"], notes(ed)


def test_checkhealth_names_the_sockets_and_the_codex_cli_and_its_version(nvim_factory, amp_env):
    """`:checkhealth amp` lists the Codex front-end (its hook socket, the
    unofficial IDE context on or off) and runs terminal.cmd.codex's program
    with --version (the pinned Codex CLI when installed), or says it is
    missing."""
    import agents_helpers as ah
    codex = ah.CODEX if ah.CODEX.exists() else None
    ed = nvim_factory(**IDE, terminal={"cmd": {"codex": [str(codex) if codex else "no-such-codex"]}})
    status = codex_status(ed)
    ed.nvim.command("checkhealth amp")
    health = "\n".join(ed.nvim.current.buffer[:])
    assert (f"codex: hook socket {status['socket']}, IDE context (unofficial protocol) on, "
            f"{status['ipc_socket']}") in health, health
    assert f"codex on {status['socket']}" in health, health
    if codex:
        assert f"codex (Codex CLI) 0.169.0: {codex}" in health, health
    ed.lua("require('amp').setup({ agents = { codex = true }, terminal = { cmd = { codex = { 'no-such-codex' } } } })")
    ed.nvim.command("checkhealth amp")
    health = "\n".join(ed.nvim.current.buffer[:])
    assert ("codex (Codex CLI): `no-such-codex` is not on PATH; :Amp open codex needs it "
            "(npm install -g @openai/codex, or set terminal.cmd.codex)") in health, health
    assert "IDE context (unofficial protocol) off (codex.unofficial_ide_context)" in health, health


def test_ipc_clients_and_the_first_frame_deadline_at_the_limit_and_one_past(nvim_factory, amp_env):
    """The serving layer's limits hold on Codex's sockets too: at most
    server.max_clients clients at once (one past is dropped, counted
    clients unchanged), and a connection that sends no frame within
    server.handshake_timeout_ms is dropped."""
    ed = nvim_factory(**IDE, server={"max_clients": 2, "handshake_timeout_ms": 1000})
    status = codex_status(ed)
    clients = [Framed(status["ipc_socket"]) for _ in range(2)]
    for c in clients:
        assert c.request("initialize", {"clientType": "desktop"})["resultType"] == "success"
    wait_for(lambda: status_clients(ed) == 2, 5, "two clients")
    extra = Framed(status["ipc_socket"])
    extra.send({"type": "request", "requestId": "x", "method": "initialize", "params": {}})
    assert extra.closed(), "one past max_clients is dropped"
    extra.close()
    assert status_clients(ed) == 2
    clients.pop().close()
    wait_for(lambda: status_clients(ed) == 1, 5, "a client gone")
    again = Framed(status["ipc_socket"])
    assert ide(ed, again)["resultType"] == "success", "room again"
    again.close()
    for c in clients:
        c.close()
    # Silent: dropped once the first-frame deadline passes (and not long
    # before it: a frame sent at once is answered, above).
    silent = Framed(status["ipc_socket"], timeout=20)
    assert silent.closed()
    silent.close()
    hook_silent = Framed(status["socket"], timeout=20)
    assert hook_silent.closed()
    hook_silent.close()
