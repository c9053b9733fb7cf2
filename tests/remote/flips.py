#!/usr/bin/env python3
"""Frame recording switched on and off 1,000 times through the remote
switch (ljperf record -p's protocol, ljperf.remote) while a luajit started
without LUAJIT_PERF runs traces that return below their start frame and call
C (vm_patch 0007 flips every trace's patch points at each switch): every
switch is acknowledged, the process never dies, and its result is the
control VM's for the same work.

usage: flips.py [SWITCHES]
"""

import os
import subprocess
import sys
import tempfile
import time

from ljperf import remote
from tests.lib import ljptest as t

HERE = os.path.dirname(os.path.abspath(__file__))
PROG = os.path.join(HERE, "flips.lua")


def wait_ack(block, seq, what, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if block.read()["ack"] == seq:
            return
        time.sleep(0.001)
    t.fail("%s: not acknowledged within %.0f s" % (what, timeout))


def test():
    switches = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    with tempfile.TemporaryDirectory(prefix="ljperf-flips-") as tmp:
        stop = os.path.join(tmp, "stop")
        env = {k: v for k, v in os.environ.items() if not k.startswith("LUAJIT_PERF")}
        env["LUAJIT_PERF_DIR"] = tmp      # its jitdump; its perf map is removed below
        p = subprocess.Popen([t.binpath("luajit"), PROG, stop], stdout=subprocess.PIPE,
                             text=True, env=env, cwd=tmp)
        try:
            if p.stdout.readline().strip() != "ready":
                t.fail("the program did not start")
            t0 = time.monotonic()
            for i in range(switches):
                sw = remote.RemoteSwitch([p.pid])
                if sw.start():
                    t.fail("switch %d: the process has no control block" % i)
                if sw.wait_on(5.0):
                    t.fail("switch %d: not on within 5 s" % i)
                block, _ = sw.asked[0]
                sw.stop()
                wait_ack(block, block.read()["seq"], "switch %d off" % i)
                if p.poll() is not None:
                    t.fail("the process died at switch %d (status %s)" % (i, p.returncode))
            took = time.monotonic() - t0
        finally:
            open(stop, "w").close()
            try:
                out, _ = p.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
            t.remove_tmp_files([p.pid])
        if not t.report(p.returncode == 0, "the program ends with status 0 (%s)" % p.returncode):
            return False
        t.report(True, "%d switches on and off, each acknowledged, in %.1f s" % (switches, took))
        last = out.strip().splitlines()[-1]
        units = int(last.split()[1])
        r = subprocess.run([t.binpath("luajit-base"), PROG, "-", str(units)],
                           capture_output=True, text=True, cwd=tmp, timeout=300)
        want = r.stdout.strip().splitlines()[-1]
        return t.report(last == want, "same result as the control for %d units: %r vs %r"
                        % (units, last, want))


if __name__ == "__main__":
    t.main(test)
