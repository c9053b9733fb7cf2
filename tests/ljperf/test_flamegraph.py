"""ljperf record on the demo (build/examples/demo/fibdemo), then the
flamegraph.html it wrote opened in headless Chromium: names, colours,
tooltip, click-zoom, search, and a screenshot.

  LJPERF_DOCS_SCREENSHOT=docs/flamegraph.png  also copy the screenshot there
"""

import glob
import json
import os
import shutil
import subprocess

from tests.lib import ljptest as t

HERE = os.path.dirname(os.path.abspath(__file__))


def test():
    t.need_perf()
    demo = t.built("examples", "demo", "fibdemo")
    node = shutil.which("node")
    if not node:
        t.fail("node is not installed (Debian package nodejs)")
    with t.Session() as s:
        out = s.path("out")
        r = s.ljperf(["record", "-o", out, "-F", "999", "--", demo, "2"])
        t.check(r.returncode == 0, "ljperf record exits 0")
        for f in ("flamegraph.html", "profile.folded", "profile.kinds", "perf.data",
                  "perf.jit.data", "ljperf.json"):
            t.check(os.path.isfile(os.path.join(out, f)), "wrote " + f)
        t.check("fibdemo exited with status 0" in r.stderr, "reports the program's exit status")
        t.check("flamegraph.html" in r.stderr and out in r.stderr, "says where the files are")
        # artefacts stay in DIR, perf maps leave /tmp, nothing in ~/.debug
        pids = t.meta(out)["pids"]
        t.check(len(pids) == 1, "one jitdump in DIR (%s)" % pids)
        t.check(glob.glob(os.path.join(out, "jitted-%d-*.so" % pids[0])) != [],
                "perf inject's .so files are in DIR")
        t.check(not os.path.exists("/tmp/perf-%d.map" % pids[0]) and
                os.path.isfile(os.path.join(out, "perf-%d.map" % pids[0])),
                "/tmp/perf-PID.map moved into DIR")
        t.check(not os.path.exists("/tmp/jit-%d.dump" % pids[0]), "no jitdump in /tmp")
        t.check(not os.path.exists(os.path.join(s.home, ".debug")), "nothing written to ~/.debug")

        names = t.frames_of(t.folded(out))
        for want in ("main", "fib_c", "c_work", "fib_lua", "lua_work", "lua_pcall"):
            t.check(t.has_frame(names, want), "profile.folded has " + want)

        shot = s.path("flamegraph.png")
        expect = {"names": {"main": "c", "fib_c": "c", "c_work": "c", "fib_lua": "lua",
                            "lua_work": "lua", "lua_pcall": "vm", "fibdemo": "root"}}
        env = dict(os.environ)
        env.setdefault("LJPERF_NODE_MODULES",
                       os.path.join(t.build_dir(), "tests", "ljperf", "node_modules"))
        r = subprocess.run([node, os.path.join(HERE, "browser_check.js"),
                            os.path.join(out, "flamegraph.html"), shot, json.dumps(expect)],
                           env=env, capture_output=True, text=True, timeout=180)
        print(r.stdout, end="")
        if r.stderr.strip():
            print("node stderr: " + r.stderr.strip()[-2000:])
        t.check(r.returncode == 0, "the flame graph works in Chromium")
        t.check(os.path.getsize(shot) > 10000, "screenshot written")
        docs = os.environ.get("LJPERF_DOCS_SCREENSHOT")
        if docs:
            shutil.copyfile(shot, docs)
            print("copied the screenshot to " + docs)


if __name__ == "__main__":
    t.main(test)
