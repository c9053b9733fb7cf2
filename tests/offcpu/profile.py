#!/usr/bin/env python3
"""Off-CPU and wall profiles end to end: `ljperf record --off-cpu/--wall` of
Lua programs under real perf, judged against what the programs know.

usage: profile.py CASE   (shares.jit, shares.joff, idle, preempt, nonroot, cli)

shares.MODE  tests/offcpu/waits.lua (JIT on or -joff) times three functions
             itself, wall and thread CPU time: ffi_wait (usleep and poll
             through the FFI), shell_wait (os.execute, io.popen) and
             compute. Per the main thread, as shares of its wall total:
             - off-CPU time under ffi_wait's and compute's own Lua frames
               within 3 points of their wall less CPU time, and >= 95% of
               the time in usleep and poll (glibc's clock_nanosleep, poll)
               under ffi_wait's frame: with the JIT the trace that inlined
               ffi_wait calls them directly (vm_patch 0007 keeps the
               inlined caller; on the 0006 prefix the time sat on the main
               chunk and this failed);
             - shell_wait's waits, inside glibc's system/posix_spawn/fread/
               pclose, which keep no frame pointer: their stacks are cut in
               glibc (no Lua frame, no main) and no stock-perf way gets
               their Lua callers back (docs/offcpu.md). Asserted as that:
               shell_wait's frame plus the cut stacks hold its wall less
               CPU time within 3 points, >= 90% of the cut time is the
               shell's [blocked] waits (wait4, pipe reads, clone), and
               ljperf says in one line how much blocked time has no Lua
               frame;
             - --wall: ffi_wait and compute under their frames, shell_wait
               under its frame plus the cut stacks, each within 3 points
               of the program's own share;
             - the thread's wall total within 2% of its span in perf's
               records (first to last record of its tid, read here from
               perf script);
             - offcpu.html, wall.html, offcpu.pb.gz with the off_cpu type.
idle         tests/offcpu/pollhost.c, a C host whose own loop waits in poll()
             with no Lua frame and then calls a Lua handler that blocks in
             usleep: [idle] holds the poll's time, [blocked] under the
             handler's frame its own, each within 3 points of the host's
             timings; offcpu.html leaves [idle] out, `ljperf report --idle`
             keeps it; `ljperf diff` of two off-CPU profiles; ljperf says
             nothing of blocked time without a Lua frame.
preempt      two busy Lua loops pinned to one CPU (taskset): [preempted]
             time under the loop's frame, none [blocked] (but a page fault
             that waits for the disk: the kernel reading back a page of code
             evicted under memory pressure blocks any loop; printed).
nonroot      as user nobody: with kernel.perf_event_paranoid > 1 ljperf
             refuses in one line naming what is needed; at <= 1 it works.
cli          --wall with a non-clock -e: one line, exit status 2.
"""

import gzip
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
from tests.lib import ljptest as t

POINTS = 3.0
SHELL_WAITS = ("do_wait", "anon_pipe_read", "pipe_read", "kernel_clone")
FFI_WAITS = ("clock_nanosleep@GLIBC_2.2.5", "__poll")   # glibc's usleep, poll


def own_times(stdout, what="time"):
    """{name: seconds} from the program's `time NAME SECONDS` lines (WHAT
    "cpu": its `cpu NAME SECONDS` lines)."""
    out = {}
    for ln in stdout.splitlines():
        w = ln.split()
        if len(w) == 3 and w[0] == what:
            out[w[1]] = float(w[2])
    return out


def thread_roots(st):
    """{root: ns} of a folded profile."""
    roots = {}
    for s, w in st.items():
        r = s.split(";", 1)[0]
        roots[r] = roots.get(r, 0) + w
    return roots


def under(st, root, name):
    """ns of ROOT's stacks with a frame of the Lua function NAME."""
    return sum(w for s, w in st.items() if s.startswith(root + ";") and
               any(f.startswith(name + "@") for f in s.split(";")))


def span_ns(perf_data, tid):
    """First to last record of TID in perf script (ns)."""
    r = subprocess.run(["perf", "script", "-i", perf_data, "--ns", "-F", "tid,time",
                        "--show-switch-events"], capture_output=True, text=True)
    times = []
    for ln in r.stdout.splitlines():
        w = ln.split()
        if len(w) >= 2 and w[0] == str(tid) and w[1].endswith(":"):
            a, _, b = w[1][:-1].partition(".")
            times.append(int(a) * 10 ** 9 + int(b))
    t.check(len(times) > 10, "perf script shows the records of tid %d" % tid)
    return max(times) - min(times)


def cut(stack):
    """Whether a folded STACK of the main thread is cut: no Lua frame and
    neither the host's main nor the dynamic loader's start below (its chain
    stopped inside glibc)."""
    fr = stack.split(";")
    return not ({"main", "_dl_start_user"} & set(fr)) and not any("@" in f for f in fr)


def shares_run(mode):
    t.need_perf()
    luajit = t.built("bin", "luajit")
    with t.Session() as s:
        out = s.path("out")
        cmd = [luajit] + (["-joff"] if mode == "joff" else []) + \
            [os.path.join(HERE, "waits.lua"), "30"]
        p = s.ljperf(["record", "--wall", "--per-thread", "-o", out, "--"] + cmd, timeout=600)
        t.check(p.returncode == 0, "ljperf record --wall exits 0")
        own = own_times(p.stdout)
        t.check(set(own) == {"ffi_wait", "shell_wait", "compute", "total"},
                "the program printed its timings")
        for f in ("offcpu.folded", "offcpu.html", "offcpu.pb.gz", "wall.folded",
                  "wall.html", "wall.pb.gz", "profile.folded"):
            t.check(os.path.isfile(os.path.join(out, f)), "wrote " + f)
        with open(os.path.join(out, "offcpu.pb.gz"), "rb") as f:
            t.check(b"off_cpu" in gzip.decompress(f.read()), "offcpu.pb.gz has type off_cpu")
        off = t.folded(os.path.join(out, "offcpu.folded"))
        wall = t.folded(os.path.join(out, "wall.folded"))
        walls = thread_roots(wall)
        root = max(walls, key=walls.get)           # the main thread: the longest
        tid = int(root.rpartition("/")[2])
        total = walls[root]
        print("main thread %s: wall %.3f s; program: %s" % (root, total / 1e9, own))
        span = span_ns(os.path.join(out, "perf.data"), tid)
        t.check(abs(total - span) <= 0.02 * span,
                "wall total %.3f s within 2%% of the thread's span %.3f s"
                % (total / 1e9, span / 1e9))
        mine = {k: w for k, w in off.items() if k.startswith(root + ";")}

        def pct(ns, of):
            return 100.0 * ns / of

        def close(what, got, want):
            t.check(abs(got - want) <= POINTS, "%s: %.1f%% of the thread's wall time, "
                    "the program says %.1f%%" % (what, got, want))
        want = {k: pct(own[k], own["total"]) for k in ("ffi_wait", "shell_wait", "compute")}
        cpu = own_times(p.stdout, "cpu")
        # off-CPU: the function's wall time less its thread's CPU time
        want_off = {k: pct(own[k] - cpu[k], own["total"]) for k in want}
        lost = sum(w for k, w in mine.items() if cut(k))
        print("off-CPU stacks cut in glibc: %.1f%%; under shell_wait's own frame: %.1f%% "
              "(chains glibc left by luck)"
              % (pct(lost, total), pct(under(off, root, "shell_wait"), total)))
        for name in ("ffi_wait", "compute"):
            close("off-CPU under " + name, pct(under(off, root, name), total), want_off[name])
        close("off-CPU under shell_wait plus the stacks cut in glibc (no Lua frame, no main)",
              pct(under(off, root, "shell_wait") + lost, total), want_off["shell_wait"])
        waits = {k: w for k, w in mine.items() if any(f in k.split(";") for f in FFI_WAITS)}
        in_waits = sum(waits.values())
        framed = under(waits, root, "ffi_wait")
        t.check(in_waits > 0 and framed >= 0.95 * in_waits,
                "%.1f%% of the time in usleep and poll (%.3f s) is under ffi_wait's frame"
                % (pct(framed, max(in_waits, 1)), in_waits / 1e9))
        shell = sum(w for k, w in mine.items() if k.endswith(";[blocked]") and cut(k) and
                    any(f in k.split(";") for f in SHELL_WAITS))
        t.check(shell >= 0.9 * lost, "the cut stacks are the shell's [blocked] waits "
                "(wait4, pipe reads, clone): %.3f of %.3f s" % (shell / 1e9, lost / 1e9))
        said = [ln for ln in p.stderr.splitlines() if "no Lua frame" in ln]
        t.check(len(said) == 1 and "os.execute" in said[0],
                "ljperf says in one line how much blocked time has no Lua frame")
        for name in ("ffi_wait", "compute"):
            close("wall under " + name, pct(under(wall, root, name), total), want[name])
        lost = sum(w for k, w in wall.items() if k.startswith(root + ";") and cut(k))
        close("wall under shell_wait plus the stacks cut in glibc",
              pct(under(wall, root, "shell_wait") + lost, total), want["shell_wait"])


def page_has(path, name):
    """Whether the page at PATH draws a frame NAME (its inlined tree)."""
    with open(path, encoding="utf-8") as f:
        return ('"n":"%s"' % name) in f.read()


def idle():
    t.need_perf()
    host = os.path.join(os.path.dirname(t.built("bin", "luajit")), os.pardir, "tests",
                        "offcpu", "pollhost")
    if not os.path.exists(host):
        t.fail("pollhost is not built (%s)" % host)
    with t.Session() as s:
        outs = []
        for n in ("a", "b"):
            out = s.path(n)
            p = s.ljperf(["record", "--off-cpu", "-o", out, "--", host, "40",
                          os.path.join(HERE, "handler.lua")], timeout=600)
            t.check(p.returncode == 0, "ljperf record --off-cpu of the C host exits 0")
            outs.append((out, own_times(p.stdout), p.stderr))
        out, own, said = outs[0]
        t.check("no Lua frame" not in said, "no line about blocked time without a Lua "
                "frame: the handler's waits keep theirs")
        off = t.folded(os.path.join(out, "offcpu.folded"))
        total = own["total"] * 1e9
        got_idle = sum(w for k, w in off.items() if k.endswith(";[idle]"))
        got_handler = sum(w for k, w in off.items() if k.endswith(";[blocked]") and
                          "handle@" in k)
        for what, got, want in (("[idle]", got_idle, own["idle"]),
                                ("[blocked] under handle", got_handler, own["handler"])):
            t.check(abs(100.0 * got / total - 100.0 * want / own["total"]) <= POINTS,
                    "%s: %.1f%% of the host's time, the host says %.1f%%"
                    % (what, 100.0 * got / total, 100.0 * want / own["total"]))
        t.check(all("@" not in k for k in off if k.endswith(";[idle]")),
                "no [idle] stack has a Lua frame")
        page = os.path.join(out, "offcpu.html")
        t.check(not page_has(page, "[idle]") and page_has(page, "[blocked]"),
                "offcpu.html leaves [idle] out")
        r = s.ljperf(["report", out, "--idle"])
        t.check(r.returncode == 0 and page_has(page, "[idle]"),
                "ljperf report --idle keeps it")
        r = s.ljperf(["diff", os.path.join(out, "offcpu.folded"),
                      os.path.join(outs[1][0], "offcpu.folded"), "--format", "folded"])
        t.check(r.returncode == 0 and "[blocked]" in r.stdout,
                "ljperf diff of two off-CPU profiles")


def preempt():
    t.need_perf()
    luajit = t.built("bin", "luajit")
    busy = os.path.join(HERE, "busy.lua")
    with t.Session() as s:
        out = s.path("out")
        r = s.ljperf(["record", "--off-cpu", "-o", out, "--", "taskset", "-c", "0",
                      "/bin/sh", "-c", '"$0" "$1" 2 & "$0" "$1" 2; wait', luajit, busy])
        t.check(r.returncode == 0, "ljperf record --off-cpu exits 0")
        off = t.folded(os.path.join(out, "offcpu.folded"))
        spin = {k: w for k, w in off.items() if "spin@" in k}
        pre = sum(w for k, w in spin.items() if k.endswith(";[preempted]"))
        blk = sum(w for k, w in spin.items() if k.endswith(";[blocked]") and
                  "asm_exc_page_fault" not in k.split(";"))
        faults = sum(w for k, w in spin.items() if k.endswith(";[blocked]")) - blk
        print("under spin: %.3f s preempted, %.3f s blocked, %.3f s blocked in page faults"
              % (pre / 1e9, blk / 1e9, faults / 1e9))
        # two loops of 2 s on one CPU: each waits for the other about half the time
        t.check(pre >= 1e9, "[preempted] time under the loop (%.3f s)" % (pre / 1e9))
        t.check(blk == 0, "no [blocked] time under a loop that never sleeps")


def nonroot():
    if os.geteuid() != 0:
        t.fail("needs root, to run ljperf as nobody with setpriv")
    paranoid = int(open("/proc/sys/kernel/perf_event_paranoid").read())
    with t.Session() as s:
        os.chmod(s.dir, 0o777)
        os.chmod(s.home, 0o777)
        out = s.path("out")
        py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        r = s.ljperf(["record", "--off-cpu", "-o", out, "--", t.built("bin", "luajit"),
                      os.path.join(HERE, "waits.lua"), "3"],
                     prefix=["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"],
                     python=py)
        if paranoid > 1:
            lines = r.stderr.strip().splitlines()
            t.check(r.returncode == 1 and len(lines) == 1 and
                    "perf_event_paranoid" in lines[0] and "root" in lines[0],
                    "as nobody at paranoid %d: one line naming what --off-cpu needs"
                    % paranoid)
            t.check(not os.path.exists(os.path.join(out, "perf.data")), "nothing recorded")
        else:
            t.check(r.returncode == 0, "as nobody at paranoid %d: ljperf record --off-cpu "
                    "exits 0" % paranoid)
            off = t.folded(os.path.join(out, "offcpu.folded"))
            t.check(any("ffi_wait@" in k for k in off), "ffi_wait is found as nobody")


def cli():
    with t.Session() as s:
        r = s.ljperf(["record", "--wall", "-e", "cycles:u", "-o", s.path("o"), "--", "true"])
        t.check(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and
                "clock" in r.stderr, "--wall -e cycles:u: one line, exit 2")


CASES = {"shares.jit": lambda: shares_run("jit"), "shares.joff": lambda: shares_run("joff"),
         "idle": idle, "preempt": preempt, "nonroot": nonroot, "cli": cli}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        sys.stderr.write("usage: profile.py {%s}\n" % ",".join(CASES))
        sys.exit(2)
    t.main(CASES[sys.argv[1]])
