"""OpenCtx hardening (issue #11): nothing OpenCtx does waits for a provider
on Neovim's main thread, whether the provider's `meta` hangs or its Node host
is blocked. Against a real headless Neovim, a real HTTP provider and the
plugin's real Node host.

Figures are printed: run with ``-s`` to see them.
"""

from __future__ import annotations

import time

from conftest import responsive, tighter_time_bound_fixture, wait_for

_hardening_time_bound = tighter_time_bound_fixture(60.0, "hardening test")


# --------------------------------------------------------------------------
# :Amp annotations refresh / toggle never wait for a provider
# --------------------------------------------------------------------------


def test_annotations_refresh_and_toggle_do_not_wait_for_a_hanging_meta(nvim_factory):
    from openctx_helpers import HttpProvider, HttpReply, open_doc, result, start

    http = HttpProvider()
    try:
        def route(method, params, settings, req):
            if method == "meta":
                # Held until released (or 20 s): the provider's meta is in flight.
                return HttpReply(body={"result": {"name": "slow", "annotations": {}}}, delay=20.0)
            return result([])

        uri = http.route("/slow", route)
        ed = start(nvim_factory, {uri: True}, timeout_ms=15000)
        open_doc(ed, "/w/hang.txt", ["a line"])
        wait_for(lambda: http.seen("/slow", "meta"), 5, "the provider's meta call")
        timings = {}
        for command in ("Amp annotations refresh", "Amp annotations toggle", "Amp annotations toggle"):
            t = time.monotonic()
            ed.nvim.command(command)
            timings[command] = took = time.monotonic() - t
            assert took < 0.5, f":{command} took {took:.3f} s while a provider's meta hangs"
        responsive(ed, 0.5)
        print(f"\n:Amp annotations refresh/toggle with a hanging meta: "
              + ", ".join(f"{k.split()[-1]} {v * 1000:.1f} ms" for k, v in timings.items()))
        # Once the provider answers, annotations are asked for again (meta is re-asked:
        # the refresh made the one in flight stale).
        http.release.set()
        wait_for(lambda: len(http.seen("/slow", "meta")) >= 2, 10, "meta asked again after the refresh")
    finally:
        http.close()


# --------------------------------------------------------------------------
# stop() never waits for the Node host to go
# --------------------------------------------------------------------------


def test_openctx_stop_does_not_wait_for_a_provider_on_the_main_thread(nvim_factory):
    from openctx_helpers import FIXTURES, children_with, module_uri, open_doc, start

    hang = module_uri(FIXTURES / "provider-busy.mjs")  # blocks Node: it cannot exit at once
    ed = start(nvim_factory, {hang: True})
    open_doc(ed, "/w/hang.txt", ["a line"])
    wait_for(lambda: children_with(ed.pid, "openctx-host.mjs"), 10, "the Node host")
    time.sleep(0.5)  # its annotations call spins in Node (up to a minute)
    t = time.monotonic()
    took_lua = ed.lua("local t = vim.uv.hrtime() require('amp.openctx').stop() return (vim.uv.hrtime() - t) / 1e6")
    took = time.monotonic() - t
    print(f"\nOpenCtx stop with a hanging provider: {took_lua:.1f} ms on the main thread")
    # The old stop() waited for the Node host to go: 28-34 ms here.
    assert took_lua < 10, f"stop() held the main thread {took_lua:.1f} ms"
    responsive(ed, 1.0)
    wait_for(lambda: not children_with(ed.pid, "openctx-host.mjs"), 5, "the Node host to exit")
