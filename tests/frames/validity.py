#!/usr/bin/env python3
"""Every frame-pointer chain is valid while Lua frames are recorded.

usage: validity.py MODE   (jit or joff)

Runs every torture program (tests/torture/progs) on the patched VM with
LUAJIT_PERF=1 under `perf record -F 20000 -k mono -g --call-graph fp`. In
each sample taken while the program runs (from its first sample under main
to its last sample in the VM's own code before it starts ending, see
ENDING), every callchain entry must be host or VM code (a file-backed DSO),
or an address that the program's jitdump names at the sample's time (a
prototype's bytecode or a trace's machine code), and the chain must reach
main. Counted apart: chains that pass through a system library built without
frame pointers (libc, libgcc_s, ld.so..., or libc code linked into the
binary) before going wrong, since no frame-pointer unwinder can follow those
whatever the VM does; and chains whose entries are all valid but that the
kernel cut at its limit (kernel.perf_event_max_stack) before main, in deep
recursion.
"""

import glob
import os
import sys

from tests.lib import ljptest as T

TORTURE = os.path.join(T.ROOT, "tests", "torture")


# Code linked into our own binary without frame pointers: libc_nonshared.a,
# gcc's crtstuff (__do_global_dtors_aux runs at exit, called by ld.so) and
# glibc's crti/crtn (_init, _fini; perf also names a .plt.got stub, e.g.
# __cxa_finalize's at exit, after _init, the symbol before it: seen on luajit2).
NOFP_SYMS = {"pthread_atfork", "atexit", "at_quick_exit", "__stack_chk_fail_local",
             "__do_global_dtors_aux", "frame_dummy", "deregister_tm_clones",
             "register_tm_clones", "_init", "_fini"}
# Our functions that only frame-pointer-less code calls: the chain above them
# is that code's (lj_err_unwind_dwarf: the personality routine libgcc_s's
# unwinder calls while an error unwinds; the emitter's set-up run by libc's
# pthread_once and its fork handlers run by libc's fork: a sample in their
# first or last instructions reads libc's rbp, whatever it holds; and
# profile_signal, jit.profile's signal handler, entered through libc's
# signal trampoline with the interrupted code's rbp, which is libc's own
# when the signal lands in malloc, as in a LUAJIT_USE_SYSMALLOC build).
CALLED_BY_NOFP = {"lj_err_unwind_dwarf", "ljp_register_atfork", "perf_register_atexit",
                  "ljp_fork_prepare", "ljp_fork_parent", "ljp_fork_child", "profile_signal"}
# The program is ending once one of these is on the stack: lua_close and
# os.exit(code, true) free the Lua frames under their callers' C frames, and
# libc's exit runs our exit handler (perf_atexit) from frameless code.
ENDING = {"lua_close", "lj_cf_os_exit", "perf_atexit", "ljp_emit_close"}


def max_stack():
    try:
        with open("/proc/sys/kernel/perf_event_max_stack") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 127


MAX_STACK = max_stack()


def guest(dso):
    return dso in ("[unknown]", None) or dso.startswith(("//anon", "/tmp/perf-"))


def live_load(dump, addr, t):
    live = None
    for ld in dump.candidates(addr):
        if ld.ts <= t:
            live = ld
    return live


def valid_prefix(sess, data, sample):
    """The entries perf script shows for SAMPLE when it stops before a
    garbage entry: perf script prints no chain at all when one entry is a
    context-marker value (-4095..-1, e.g. a nil TValue), but --max-stack K
    makes it resolve only the first K. Binary search for the largest K."""
    ts = "%d.%09d" % divmod(T.time_ns(sample), 10 ** 9)

    def chain(k):
        text = sess.script_text(data, extra=["--ns", "--max-stack", str(k),
                                             "--time", "%s,%s" % (ts, ts)])
        return next((x.frames for x in T.perfscript.iter_samples(text.split("\n"))
                     if x.tid == sample.tid), [])
    lo, hi, frames = 0, MAX_STACK + 1, []
    while hi - lo > 1:
        mid = (lo + hi) // 2
        got = chain(mid)
        if got:
            lo, frames = mid, got
        else:
            hi = mid
    return frames


def classify(sample, dump, prefix=None):
    """'ok', 'nofp' (broken after a frame-pointer-less library), 'cut' (valid
    up to the kernel's limit) or the text of the first bad entry. PREFIX
    (a function giving the frames before the garbage) judges a sample whose
    chain perf dropped."""
    t = T.time_ns(sample)
    frames = sample.frames
    if not frames:
        frames = prefix(sample) if prefix else []
    # A PLT stub is a jump without a frame of its own: a sample in one (e.g.
    # __cxa_atexit@plt from libc's start-up code) reads its caller's frame.
    nofp = bool(frames) and (frames[0][1] in NOFP_SYMS or
                             (frames[0][1] or "").endswith("@plt"))
    for addr, sym, _, dso in frames:
        if guest(dso):
            if live_load(dump, addr, t) is None:
                return "nofp" if nofp else "%x (%s)" % (addr, dso)
        else:
            nofp = nofp or T.is_nofp_dso(dso) or sym in CALLED_BY_NOFP
    if not sample.frames:
        return "nofp" if nofp else "perf dropped the chain: garbage after %s" % \
            (" <- ".join(f[1] or "%x" % f[0] for f in frames) or "nothing")
    if not T.has_sym(sample, "main"):
        if nofp:
            return "nofp"
        if len(sample.frames) >= MAX_STACK:
            return "cut"
        return "chain does not reach main"
    return "ok"


def chain_text(sample, n=12):
    """The first N entries of SAMPLE's chain, leaf first, for a report."""
    return " <- ".join("%s(%s)" % (f[1] or "%x" % f[0], os.path.basename(f[3] or "?"))
                       for f in sample.frames[:n])


def run_prog(sess, prog, mode):
    cmd = [T.binpath("luajit")] + (["-joff"] if mode == "joff" else []) + \
        ["progs/%s.lua" % prog]
    data = sess.path("%s.data" % prog)
    # Some programs end with an error or os.exit() on purpose.
    args = ["perf", "--buildid-dir", sess.path(".debug"), "record", "-q",
            T.NO_BPF_EVENT, "-e", T.perf_event(), "-F", "20000", "-k", "mono", "-g",
            "--call-graph", "fp", "-o", data, "--"] + cmd
    T.run(args, env=sess.env({"LUAJIT_PERF": "1"}), cwd=TORTURE, timeout=300)
    if not os.path.exists(data):
        T.fail("perf recorded nothing for " + prog)
    return judge(sess, data, sess.samples(data, extra=["--ns"]))


def judge(sess, data, samples, binary=None):
    """Classifies the chain of every sample in the window of a run of BINARY
    (default bin/luajit; SAMPLES, with --ns times, from the recording DATA):
    (samples judged, valid, through no-FP libraries, cut, [(why, sample)])."""
    lj = os.path.realpath(binary or T.binpath("luajit"))  # as perf names it
    # From the first sample under main to the last in the VM's own code
    # before the program starts ending.
    first = [i for i, s in enumerate(samples) if T.has_sym(s, "main")]
    ending = [i for i, s in enumerate(samples)
              if any(f[1] in ENDING for f in s.frames)]
    end = ending[0] if ending else len(samples)
    own = [i for i, s in enumerate(samples[:end]) if s.frames and s.frames[0][3] == lj]
    if not first or not own:
        return 0, 0, 0, 0, []
    window = samples[first[0]:own[-1] + 1]
    dump = sess.dump(window[0].pid)
    good = nofp = cut = 0
    bad = []
    for s in window:
        c = classify(s, dump, lambda x: valid_prefix(sess, data, x))
        if c == "ok":
            good += 1
        elif c == "nofp":
            nofp += 1
        elif c == "cut":
            cut += 1
        else:
            bad.append((c, s))
    return len(window), good, nofp, cut, bad


def test():
    mode = sys.argv[1]
    progs = sorted(os.path.basename(p)[:-4]
                   for p in glob.glob(os.path.join(TORTURE, "progs", "*.lua"))
                   if not os.path.basename(p).startswith("_"))
    total = good = nofp = cut = 0
    ok = True
    for prog in progs:
        with T.PerfSession() as sess:
            n, g, nf, c, bad = run_prog(sess, prog, mode)
        total, good, nofp, cut = total + n, good + g, nofp + nf, cut + c
        print("%-20s %6d samples, %6d valid, %4d cut at %d entries, "
              "%4d through no-FP libs, %d bad" % (prog, n, g, c, MAX_STACK, nf,
                                                 len(bad)))
        for why, s in bad[:2]:
            ok = False
            print("  bad entry %s in: %s" % (why, chain_text(s)))
        ok &= not bad
    judged = total - nofp
    share = (good + cut) / max(judged, 1)
    ok &= T.report(judged > 5000 and good + cut == judged,
                   "%s: %d of %d samples have valid chains (%.3f%%): %d reach "
                   "main, %d are deeper than the kernel's %d-entry limit; %d "
                   "more pass through libraries without frame pointers" %
                   (mode, good + cut, judged, 100 * share, good, cut,
                    MAX_STACK, nofp))
    return ok


if __name__ == "__main__":
    T.main(test)
