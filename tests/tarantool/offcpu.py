#!/usr/bin/env python3
"""Off-CPU profile of Tarantool: `ljperf record --off-cpu -- tarantool
tests/tarantool/offcpu.lua` (build/bin/tarantool; build-tarantool3's for
3.x). A fiber (fiber_main -> blocker) blocks the tx thread in
ffi.C.usleep and then sleeps in fiber.sleep, timing its usleep calls
itself. Checked, on the tx thread (tid = pid):

record   ljperf exits 0; offcpu.folded, offcpu.html, offcpu.pb.gz written.
blocked  [blocked] time in usleep (glibc's clock_nanosleep) under fiber_main
         (name and definition line found in offcpu.lua) within 10% of the
         fiber's own time in usleep, with Tarantool's fiber C frames
         (FIBER_C) below it; >= 99% of it under blocker right above
         fiber_main (the JIT inlines blocker into fiber_main's trace, which
         calls usleep: vm_patch 0007 keeps the inlined frame).
idle     [idle] holds the tx thread's waiting in its event loop: no [idle]
         stack has a Lua frame, and [idle] is >= 50% of what the fiber did
         not spend in usleep (the rest: the start, box.cfg, exit);
         offcpu.html leaves it out.
perf missing or tarantool not starting is a failure.
"""

import argparse
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
from tests.remote import test_remote as tr

t = tr.t                    # tests/lib/ljptest
WORKLOAD = os.path.join(HERE, "offcpu.lua")
FIBER_C = ("coro_init", "fiber_loop", "fiber_cxx_invoke", "lua_fiber_run_f")


def def_line(name):
    with open(WORKLOAD) as f:
        for i, line in enumerate(f, 1):
            if re.match(r"local function %s\(" % name, line):
                return i
    t.fail("offcpu.lua defines no %s" % name)


def run(opts):
    t.need_perf()
    blocker = "blocker@%s:%d" % (WORKLOAD, def_line("blocker"))
    fmain = "fiber_main@%s:%d" % (WORKLOAD, def_line("fiber_main"))
    with t.Session() as s:
        out = s.path("out")
        p = s.ljperf(["record", "--off-cpu", "--per-thread", "-o", out, "--", opts.tarantool,
                      WORKLOAD, "3"], env=s.env({"TMPDIR": s.dir}), timeout=600)
        pages = "flame graph renderer not found" not in p.stderr
        t.check(p.returncode == 0 or (p.returncode == 1 and not pages and
                                      "offcpu.folded too" in p.stderr),
                "ljperf record --off-cpu writes the profiles%s"
                % ("" if pages else " (a build without the page renderer, as CI's "
                   "build-tarantool3: the folded outputs only)"))
        own = dict((w[0], float(w[1])) for w in (ln.split() for ln in p.stdout.splitlines())
                   if len(w) == 2 and w[0] in ("blocked", "total"))
        t.check(sorted(own) == ["blocked", "total"], "the fiber printed its timings")
        for f in ("offcpu.folded", "offcpu.pb.gz") + (("offcpu.html",) if pages else ()):
            t.check(os.path.isfile(os.path.join(out, f)), "wrote " + f)
        off = t.folded(os.path.join(out, "offcpu.folded"))
        pid = t.meta(out)["pids"][0]
        tx = {k: w for k, w in off.items() if k.split(";", 1)[0].endswith("-%d/%d" % (pid, pid))}
        t.check(bool(tx), "the tx thread (tid %d) has off-CPU stacks" % pid)
        under = {k: w for k, w in tx.items() if k.endswith(";[blocked]") and
                 "clock_nanosleep@GLIBC_2.2.5" in k.split(";") and
                 any(f.startswith(fmain) for f in k.split(";"))}
        got = sum(under.values()) / 1e9
        t.check(abs(got - own["blocked"]) <= 0.1 * own["blocked"],
                "[blocked] in usleep under %s: %.3f s, the fiber timed %.3f s in usleep"
                % (fmain, got, own["blocked"]))

        def below_ok(k):
            fr = k.split(";")
            i = next(i for i, f in enumerate(fr) if f.startswith(fmain))
            return any(c in fr[:i] for c in FIBER_C)
        good = sum(w for k, w in under.items() if below_ok(k))
        t.check(good >= 0.99 * sum(under.values()) > 0,
                "%.1f%% of it has Tarantool's fiber C frames below fiber_main"
                % (100.0 * good / max(1, sum(under.values()))))
        seen = sum(w for k, w in under.items() if any(f.startswith(blocker)
                                                      for f in k.split(";")))
        def on_main(k):
            fr = k.split(";")
            i = next((i for i, f in enumerate(fr) if f.startswith(blocker)), None)
            return i is not None and fr[i - 1].startswith(fmain)
        above = sum(w for k, w in under.items() if on_main(k))
        t.check(above == seen >= 0.99 * sum(under.values()),
                "blocker holds %.1f%% of it, right on fiber_main"
                % (100.0 * seen / max(1, sum(under.values()))))
        idle = {k: w for k, w in tx.items() if k.endswith(";[idle]")}
        t.check(all("@" not in k for k in idle), "no [idle] stack has a Lua frame")
        rest = own["total"] - own["blocked"]
        t.check(sum(idle.values()) / 1e9 >= 0.5 * rest,
                "[idle] of the tx thread: %.3f s of the %.3f s the fiber was not in usleep"
                % (sum(idle.values()) / 1e9, rest))
        if pages:
            with open(os.path.join(out, "offcpu.html"), encoding="utf-8") as f:
                t.check('"n":"[idle]"' not in f.read(), "offcpu.html leaves [idle] out")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tarantool", required=True, help="patched tarantool binary")
    opts = ap.parse_args()
    t.main(lambda: run(opts))


if __name__ == "__main__":
    main()
