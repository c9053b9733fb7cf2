"""arm64.baseline: the x29 chain sampler (tests/arm64/run) on the unpatched
VM under qemu-aarch64. The sampler itself is held to what must hold: every
chain of a pure C recursion reaches main, and a frame record whose next fp
is lower ends the chain "not rising" short of main. The unpatched VM's
numbers are printed and held as the baseline they are: chains reach main
(x29 stays a frame pointer through the interpreter and traces) and carry no
Lua frame. Each workload must land where it claims (the interpreter, a
trace). The chains' names (FPWALK_FOLDED) hold the C recursion's 40 frames
in order under main. Usage: test_baseline.py TARBALL [SAMPLES_PER_WORKLOAD]
"""

import sys

from tests.arm64.sampler import args, sample
from tests.lib.ljptest import check, main


def test():
    a = args(__doc__)
    if a is None:
        return sys.argv[1:2] in (["-h"], ["--help"])
    tarball, want = a
    res, stacks = sample(tarball, want)
    for w in ("c_recursion", "c_bad_record", "lua_recursion_interp", "lua_recursion_jit",
              "coroutines", "ffi_callback", "hot_loop_trace", "c_lua_sandwich",
              "lib_callbacks", "deep_recursion"):
        check(w in res and res[w]["samples"] >= want, "%s: %d samples" % (w, want))
    c = res["c_recursion"]
    check(c["main"] == c["samples"] and c["stop.end"] == c["samples"],
          "C recursion: every chain reaches main and ends at fp 0 (%d/%d)"
          % (c["main"], c["samples"]))
    crec = [f for f, _ in stacks if f[0] == "[c_recursion]"]
    nested = [f for f in crec if "main" in f and
              f[f.index("main") + 1:f.index("main") + 42] == ["host_run"] + ["host_crec"] * 40]
    check(len(crec) == c["samples"] and len(nested) >= 0.95 * len(crec),
          "C recursion chains name main, host_run and 40 host_crec frames in order (%d/%d)"
          % (len(nested), len(crec)))
    b = res["c_bad_record"]
    check(b["stop.notrising"] >= 0.9 * b["samples"] and b["main"] <= 0.1 * b["samples"],
          "a lower next fp stops the chain short of main (%d of %d not rising, %d reach main)"
          % (b["stop.notrising"], b["samples"], b["main"]))
    check(res["lua_recursion_interp"]["leaf.interp"] >= 0.8 * want,
          "interpreted recursion samples in the interpreter (%d)"
          % res["lua_recursion_interp"]["leaf.interp"])
    check(res["hot_loop_trace"]["leaf.trace"] >= 0.9 * want,
          "the hot loop samples in trace code (%d)" % res["hot_loop_trace"]["leaf.trace"])
    # The workloads that switch recording (luaJIT_fpwin, luaJIT_perf_*,
    # jit.perf) do not run on the unpatched VM: those and only those.
    skipped = sorted(w for w, r in res.items() if r["samples"] == 0)
    check(skipped == sorted(["switch_torture", "off_recursion_interp", "off_coroutines",
                             "off_sandwich", "off_lua_errors", "perf_lua_on",
                             "perf_lua_off", "perf_capi_on", "perf_capi_off"]),
          "the switching workloads, and only they, skipped (%s)" % ", ".join(skipped))
    for w, r in res.items():
        if w in ("c_recursion", "c_bad_record") or w in skipped:
            continue
        check(r["lua"] == 0, "%s: no Lua frame in any chain of the unpatched VM" % w)
        check(r["main"] >= 0.99 * r["samples"],
              "%s: unpatched chains reach main (%d/%d)" % (w, r["main"], r["samples"]))


if __name__ == "__main__":
    main(test)
