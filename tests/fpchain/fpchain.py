#!/usr/bin/env python3
"""Frame-pointer call chains through the VM, under real perf.

usage: fpchain.py SCENARIO   (interp, jit, cfunc, ffi, ffi-joff, host)

Records the scenario's workload with `perf record -g --call-graph fp` on the
patched VM and on the unpatched control. Passes when at least 99.5% of the
user-space samples taken while the program runs (from its first to its last
sample in the program's own code), apart from those in a library built
without frame pointers, reach main on the patched VM, and fewer
than half do on the control (the test discriminates). For the C host, the
samples in host_inner must also show host_inner, host_outer, lua_pcall and
main in this order (lua_call tail-calls into the VM, so it has no frame of
its own), and with Lua frame recording on (LUAJIT_PERF=map,frames) also the
Lua functions in between: main -> lua_pcall -> main chunk -> lua_outer ->
host_outer -> lua_inner -> host_inner.
"""

import os
import sys

from tests.lib import ljptest as T

HERE = os.path.dirname(os.path.abspath(__file__))
NEED = 0.995
MIN_SAMPLES = 500
BASE_MAX = 0.5
HOST_ORDER = ["host_inner", "host_outer", "lua_pcall", "main"]
HOST_ORDER_LUA = ["host_inner", "lua_inner@host:2", "host_outer",
                  "lua_outer@host:3", "host:0", "lua_pcall", "main"]


def workload(scenario, vm):
    """Command line and environment for SCENARIO on VM ('luajit' or
    'luajit-base')."""
    tdir = os.path.join(T.build_dir(), "tests", "fpchain")
    env = {"LUA_CPATH": os.path.join(tdir, "?.so")}
    if scenario == "host":
        name = "host" if vm == "luajit" else "host-base"
        return [os.path.join(tdir, name), "3000", "100000"], env
    lj = T.binpath(vm)
    # Rounds: enough samples (~1000 at 2 kHz) that one sample in a libc
    # function without frame pointers weighs less than the 0.5% allowed.
    if scenario == "interp":
        return [lj, "-joff", os.path.join(HERE, "interp.lua"), "80"], env
    if scenario == "jit":
        return [lj, os.path.join(HERE, "jit.lua"), "60"], env
    if scenario == "cfunc":
        return [lj, os.path.join(HERE, "cfunc.lua")], env
    if scenario in ("ffi", "ffi-joff"):
        flags = ["-joff"] if scenario == "ffi-joff" else []
        return [lj] + flags + [os.path.join(HERE, "ffi.lua"),
                               os.path.join(tdir, "libffilib.so")], env
    T.fail("unknown scenario " + scenario)


def own_code(dso, prog):
    return dso is not None and (dso == prog or dso.endswith(("/cmod.so",
                                                            "/libffilib.so")))


def measure(scenario, vm, sess, env_extra=None):
    cmd, env = workload(scenario, vm)
    env.update(env_extra or {})
    data, _ = sess.record(cmd, env=env, freq=2000, mono=False,
                          out="%s-%s.data" % (scenario, vm))
    samples = sess.samples(data)
    own = [i for i, s in enumerate(samples) if s.frames and own_code(s.frames[0][3], cmd[0])]
    if not own:
        T.fail("%s on %s: no samples in the program's code" % (scenario, vm))
    window = samples[own[0]:own[-1] + 1]
    # A sample in a library without frame pointers (libc's malloc, which a
    # LUAJIT_USE_SYSMALLOC build calls for every allocation) starts its
    # chain from that code's rbp: no VM can make it reach main.
    judged = [s for s in window if not (s.frames and T.is_nofp_dso(s.frames[0][3]))]
    nofp, window = len(window) - len(judged), judged
    reach = [s for s in window if T.has_sym(s, "main")]
    share = len(reach) / max(len(window), 1)
    print("%s on %s: %d of %d samples reach main (%.2f%%), %d more in libraries "
          "without frame pointers" % (scenario, vm, len(reach), len(window), 100 * share,
                                      nofp))
    if vm == "luajit":
        for s in [s for s in window if not T.has_sym(s, "main")][:3]:
            print("  not reaching main:", " <- ".join(
                "%s(%s)" % (f[1] or "%x" % f[0], os.path.basename(f[3] or "?"))
                for f in s.frames[:8]))
    return share, window


def in_order(names, want):
    i = 0
    for n in names:
        if i < len(want) and n == want[i]:
            i += 1
    return i == len(want)


def check_order(window, order, names):
    inner = [s for s in window if s.frames and s.frames[0][1] == order[0]]
    good = [s for s in inner if in_order(names(s), order)]
    frac = len(good) / max(len(inner), 1)
    if inner:
        print("example chain:", " <- ".join(n or "?" for n in names(inner[0])))
    return T.report(len(inner) > 100 and frac >= NEED,
                    "%d of %d %s samples show %s in order" %
                    (len(good), len(inner), order[0], " <- ".join(order)))


def test():
    scenario = sys.argv[1]
    ok = True
    with T.PerfSession() as sess:
        share, window = measure(scenario, "luajit", sess)
        ok &= T.report(len(window) >= MIN_SAMPLES and share >= NEED,
                       "patched VM: %.2f%% >= %.1f%% of %d samples (need %d)" %
                       (100 * share, 100 * NEED, len(window), MIN_SAMPLES))
        if scenario == "host":
            ok &= check_order(window, HOST_ORDER, lambda s: T.syms(s))
            _, window = measure(scenario, "luajit", sess,
                                {"LUAJIT_PERF": "map,frames"})
            pmap = T.ljresolve.PerfMap("/tmp/perf-%d.map" % window[0].pid)
            ok &= check_order(window, HOST_ORDER_LUA, lambda s: [
                f[1] if f[3] != "[unknown]" else pmap.name_at(f[0])
                for f in s.frames])
        base, _ = measure(scenario, "luajit-base", sess)
        ok &= T.report(base < BASE_MAX, "control VM breaks chains: %.2f%% < %d%%"
                       % (100 * base, 100 * BASE_MAX))
    return ok


if __name__ == "__main__":
    T.main(test)
