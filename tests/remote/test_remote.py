#!/usr/bin/env python3
"""ljperf record -p on processes started WITHOUT LUAJIT_PERF and with no
profiling code: the remote switch (docs/remote-switch.md), under real perf.

usage: test_remote.py CASE
  luajit   build/bin/luajit running prog.lua: full mixed stacks (Lua
           recursion nested, the C payload under its Lua caller); after
           ljperf ends the process runs on, correct, and is off again
  host     tests/remote/host: two lua_States in two threads, both switched
           on (per-thread stacks) and off
  had      a process started with LUAJIT_PERF=1 keeps recording on
  kill     ljperf (and its perf) SIGKILLed mid-recording: the process is
           off again within the lease bound by itself
  exit     the process exits while recorded: no file of it left in /tmp
  twice    a second ljperf on the same process: one clear error, the first
           recording is unharmed
  pids     -p PID1,PID2: both processes switched on, both in the profile,
           both off after
  late     a process busy in one C call when ljperf starts: perf samples it
           at once (host frames), its Lua frames start when it switches on,
           --duration is kept from perf's start
  never    a process that never reaches a safe point: ljperf says so, ends
           after --duration with a profile of its host frames, and leaves
           no request in it
  mixed    -p of a process, one refusing (LUAJIT_PERF_REMOTE=0) and one not
           LuaJIT: the first is recorded with its Lua frames, the others
           with their host frames, each named in one line
  container  a luajit as pid 1 of its own pid and mount namespaces with a
           private /tmp (unshare, root): -p HOSTPID names its Lua frames as
           for a host process; its /tmp holds after what it held before and
           its own perf map and jitdump; then one that exits (and takes its
           /tmp with it) during the recording keeps its Lua frames
  nsworkers  --nginx HOSTPID of a container's pid 1 (a shell standing in for
           an nginx master) follows its two prog.lua workers
  twopid1  two containers whose luajit is pid 1 in each: both named (perf
           inject, which would name their code alike, is left out)
  busy     busy.lua's loops that reach no poll by themselves (interpreted,
           one trace without exit, sunk allocation, coroutines, a count
           hook): each switches on within 1 s (the kick), its profile has
           the Lua recursion in full depth (coroutines with the JIT: only
           reported, a known gap), and its output and exit status are those
           of a run without ljperf
  hostbusy tests/remote/host busy: two lua_States in two threads, one
           interpreting and one in a trace, neither reaching a poll: both
           switch on within 1 s with full stacks, results unchanged
Prints the iterations/s before, during and after recording.
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
from tests.lib import ljptest as t
from tests.lib.ljptest import Reader  # tests/tarantool import it from here too
from ljperf.procs import children_of
from ljperf import remote as ljremote

LEASE_BOUND = 5.0   # lease (3 s) + renewal period (1 s) + a poll, rounded up


# -- what a status line says ---------------------------------------------------

def lua_off(ln):
    return ln.startswith("status map=false jitdump=false frames=false remote=false")


def lua_remote_on(ln):
    return ln.startswith("status map=true jitdump=true frames=true remote=true")


def host_status(ln):
    m = re.match(r"T(\d) status=(\d+)", ln)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else 0


def base_names(stack):
    out = []
    for f in stack.split(";"):
        for sep in ("@", "_["):
            f = f.split(sep)[0]
        out.append(f)
    return out


def nested_share(fold, tail, min_rec):
    """Of the samples whose leaf is TAIL[-1]: the share whose stack ends in
    >= MIN_REC rec frames then TAIL (Lua recursion nested, the C payload
    under its Lua caller)."""
    tot = good = 0
    for s, n in fold.items():
        names = base_names(s)
        if names[-1] != tail[-1]:
            continue
        tot += n
        k = len(names) - len(tail)
        if names[k:] != tail:
            continue
        r = 0
        while k - 1 - r >= 0 and names[k - 1 - r] == "rec":
            r += 1
        if r >= min_rec:
            good += n
    return good, tot


def prog_argv(args=()):
    return [t.built("bin", "luajit"), os.path.join(HERE, "prog.lua")] + list(args)


def prog_env(s, env=None):
    cpath = os.path.join(t.build_dir(), "tests", "fpchain", "?.so")
    return s.env(dict(env or {}, LUA_CPATH=cpath))


def start_prog(s, args=(), env=None):
    p = s.start(prog_argv(args), env=prog_env(s, env), stdout=subprocess.PIPE)
    r = Reader(p)
    t.check(r.wait(lambda ln: ln == "ready") is not None, "the program starts")
    return p, r


APP = "/mnt"    # in a container: its own filesystem (a tmpfs) with its binary


def start_in_container(s, args=(), workers=0):
    """prog.lua as pid 1 of its own pid and mount namespaces, with a private
    tmpfs on /tmp holding one file of its own and another on APP holding
    its own copies of luajit, prog.lua and cmod.so, as a real container
    carries its binary (unshare from util-linux, no container runtime;
    root): it runs wherever the build and the source live, /tmp too; or,
    with WORKERS, that many prog.lua under a shell as pid 1 (a stand-in for
    an nginx master). Returns (unshare's Popen, Reader, the pid, as we see
    it, of pid 1 in there)."""
    if not shutil.which("unshare"):
        t.fail("unshare (util-linux) is not installed")
    if os.geteuid() != 0:
        t.fail("the container cases need root (unshare --pid --mount)")
    if not os.path.isdir(APP):
        t.fail("%s is missing: the container's own files are mounted there" % APP)
    own = [t.built("bin", "luajit"), os.path.join(HERE, "prog.lua"),
           t.built("tests", "fpchain", "cmod.so")]
    argv = [os.path.join(APP, "luajit"), os.path.join(APP, "prog.lua")] + list(args)
    inner = ('mount -t tmpfs ljperf-app %s && cp "$1" "$2" "$3" %s && shift 3 && '
             'mount -t tmpfs ljperf-test /tmp && touch /tmp/its-own || exit 1; ' % (APP, APP)) + \
        ('exec "$@"' if not workers else '"$@" & ' * workers + "wait")
    p = s.start(["unshare", "--pid", "--mount", "--fork", "--mount-proc", "--kill-child",
                 "sh", "-c", inner, "sh"] + own + argv,
                env=s.env(dict(LUA_CPATH=os.path.join(APP, "?.so"))), stdout=subprocess.PIPE)
    r = Reader(p)
    for i in range(max(workers, 1)):
        t.check(r.wait(lambda ln: ln == "ready" and i < r.text().count("ready")) is not None,
                "the program %d starts in its container" % (i + 1))
    kids = children_of(p.pid)
    t.check(len(kids) == 1, "unshare has one child, pid 1 in there (%s)" % kids)
    s.pids.update(kids + children_of(kids[0]))
    return p, r, kids[0]


def nspid(pid):
    with open("/proc/%d/status" % pid) as f:
        return next(ln.split()[1:] for ln in f if ln.startswith("NSpid:"))


def blocks(pid):
    return [ljremote.Block(pid, a).read() for a in ljremote.find_blocks(pid)]


def lua_free_share(fold, leaf):
    """Share of all weight in stacks that end in LEAF, reach main and have
    no Lua frame (samples taken before the process switched on)."""
    tot = sum(fold.values())
    good = sum(n for st, n in fold.items()
               if base_names(st)[-1] == leaf and "main" in base_names(st) and
               "prog.lua" not in st)
    return good / tot if tot else 0.0


def sample_span(out):
    """Seconds from the first sample in OUT/perf.data to the last."""
    r = subprocess.run(["perf", "--buildid-dir", os.path.join(out, ".debug"), "script",
                        "-i", os.path.join(out, "perf.data"), "-F", "time"],
                       capture_output=True, text=True)
    ts = [float(x.rstrip(":")) for x in r.stdout.split()]
    return max(ts) - min(ts) if ts else 0.0


def rooted_at_main(fold, tail, min_rec):
    """nested_share, of the stacks that also reach main below the Lua frames."""
    sub = {st: n for st, n in fold.items() if "main" in base_names(st)}
    return nested_share(sub, tail, min_rec)


def start_host(s, args=()):
    p = s.start([t.built("tests", "remote", "host")] + list(args), env=s.env(),
                stdout=subprocess.PIPE)
    r = Reader(p)
    t.check(r.wait(lambda ln: ln == "ready") is not None, "the host starts")
    return p, r


def check_tmp_clean(pid, what):
    left = [f for f in t.tmp_files(pid) + glob.glob("/tmp/jitted-%d-*.so" % pid)
            if os.path.exists(f)]
    t.check(not left, "%s: nothing of pid %d left in /tmp (%s)" % (what, pid, left))


def record(s, pids, out, extra=()):
    return s.ljperf(["record", "-p", ",".join(map(str, pids)), "-F", "499", "-o", out]
                    + list(extra))


def recorded(r):
    """ljperf wrote the profile: exit 0, or (a build with
    -DLJPERF_FLAMEGRAPH=OFF) 1 only because the HTML renderer is missing
    after profile.folded was written."""
    return r.returncode == 0 or (r.returncode == 1 and
                                 "flame graph renderer not found" in r.stderr and
                                 "profile.folded is written" in r.stderr)


def say_rates(name, before, during, after):
    print("RATE %s: iterations/s before %d, during %d, after %d (medians of 0.1 s windows)"
          % (name, median(before), median(during), median(after)))


# -- cases ---------------------------------------------------------------------

def case_luajit():
    with t.Session() as s:
        p, rd = start_prog(s)
        t.check(rd.wait(lua_off) is not None, "started without LUAJIT_PERF: status off")
        time.sleep(1.0)
        t0 = time.monotonic()
        out = s.path("out")
        r = record(s, [p.pid], out, ["--duration", "2"])
        t1 = time.monotonic()
        t.check(recorded(r), "ljperf record -p writes the profile")
        t.check(rd.wait(lua_remote_on, since=t0, timeout=1) is not None,
                "while recorded, status: map, jitdump, frames on, remote")
        fold = t.folded(out)
        good, tot = nested_share(fold, ["cmod_spin", "cmod_burn"], 7)
        print("weight in cmod_burn: %d, with rec x7 -> cmod_spin -> cmod_burn: %d"
              % (tot, good))
        t.check(tot >= 100 and good >= 0.95 * tot,
                "full mixed stacks: Lua recursion nested, the C payload under its caller")
        names = t.frames_of(fold)
        t.check(t.has_frame(names, "work"), "the profile has work (a Lua function)")
        off = rd.wait(lua_off, since=t1, timeout=5)
        t.check(off is not None, "after ljperf ends the process is off again")
        time.sleep(1.0)
        t.check(p.poll() is None, "the process keeps running")
        t.check(not any(ln.startswith("BAD") for ln in rd.text()), "its results stay correct")
        say_rates("luajit", rd.rates(0, t0), rd.rates(t0 + 0.5, t1 - 0.5),
                  rd.rates(off[0] + 0.2, time.monotonic()))
        s.stop(p)


def case_host():
    with t.Session() as s:
        p, rd = start_host(s)
        for i in (1, 2):
            t.check(rd.wait(lambda ln: host_status(ln) == (i, 0)) is not None,
                    "thread %d starts with status 0" % i)
        time.sleep(1.0)
        t0 = time.monotonic()
        out = s.path("out")
        r = record(s, [p.pid], out, ["--duration", "2", "--per-thread"])
        t1 = time.monotonic()
        t.check(recorded(r), "ljperf record -p writes the profile")
        for i in (1, 2):
            st = rd.wait(lambda ln: host_status(ln)[0] == i and host_status(ln)[1] == 0x0f,
                         since=t0, timeout=1)
            t.check(st is not None, "thread %d: status map|jitdump|frames|REMOTE while "
                    "recorded" % i)
        fold = t.folded(out)
        per = {}
        for st, n in fold.items():
            per.setdefault(st.split(";")[0], {})[st] = n
        full = []
        for root, f in sorted(per.items()):
            good, tot = nested_share(f, ["host_spin", "host_burn"], 6)
            print("%s: weight in host_burn %d, nested %d" % (root, tot, good))
            if tot >= 50 and good >= 0.95 * tot:
                full.append(root)
        t.check(len(full) == 2, "both lua_States (threads) have full mixed stacks: %s" % full)
        t.check(all("worker" in base_names(st) for st in fold
                    if base_names(st)[-1] == "host_burn"),
                "their chains reach the host's thread function")
        for i in (1, 2):
            t.check(rd.wait(lambda ln: host_status(ln) == (i, 0), since=t1, timeout=5)
                    is not None, "thread %d is off again after ljperf ends" % i)
        time.sleep(1.5)
        t.check(p.poll() is None, "the host keeps running")
        t.check(not any(ln.startswith("BAD") for ln in rd.text()), "its results stay correct")
        say_rates("host T1", rd.rates(0, t0, "T1"), rd.rates(t0 + 0.5, t1 - 0.5, "T1"),
                  rd.rates(t1 + 0.5, time.monotonic(), "T1"))
        s.stop(p)


def case_had():
    with t.Session() as s:
        p, rd = start_prog(s, env={"LUAJIT_PERF": "1"})
        on = "status map=true jitdump=true frames=true remote=false"
        t.check(rd.wait(lambda ln: ln.startswith(on)) is not None, "LUAJIT_PERF=1: on")
        t0 = time.monotonic()
        r = record(s, [p.pid], s.path("out"), ["--duration", "1"])
        t.check(recorded(r), "ljperf record -p writes the profile")
        t.check(t.has_frame(t.frames_of(t.folded(s.path("out"))), "work"),
                "the profile has its Lua functions")
        t1 = time.monotonic()
        t.check(not any(lua_remote_on(ln) for tm, ln in rd.lines if ln and tm > t0),
                "not reported as switched on remotely (it was on already)")
        t.check(rd.wait(lambda ln: ln.startswith(on), since=t1 + 0.5) is not None,
                "after ljperf ends, recording is still on")
        s.stop(p)


def case_kill():
    with t.Session() as s:
        p, rd = start_prog(s)
        t0 = time.monotonic()
        lj = subprocess.Popen([sys.executable, t.ljperf_bin(), "record", "-p", str(p.pid),
                               "-o", s.path("out")], env=s.env(),
                              stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
        t.check(rd.wait(lua_remote_on, since=t0, timeout=20) is not None,
                "ljperf switched recording on")
        time.sleep(1.5)
        lj.kill()           # its perf ends with it (ljperf.killed.* checks that)
        tk = time.monotonic()
        lj.wait()
        off = rd.wait(lua_off, since=tk, timeout=15)
        t.check(off is not None, "after SIGKILL of ljperf the process switches off by itself")
        took = off[0] - tk
        print("LEASE: off %.2f s after ljperf was killed (bound %.1f s)" % (took, LEASE_BOUND))
        t.check(took <= LEASE_BOUND, "within the lease bound (%.2f s <= %.1f s)"
                % (took, LEASE_BOUND))
        t.check(p.poll() is None and not any(ln.startswith("BAD") for ln in rd.text()),
                "the process runs on, correct")
        # A new recording works after that.
        r = record(s, [p.pid], s.path("out2"), ["--duration", "1"])
        t.check(recorded(r), "a new ljperf record -p works after the lapsed lease")
        s.stop(p)


def case_exit():
    with t.Session() as s:
        p, rd = start_prog(s, ["4"])
        time.sleep(0.5)
        r = record(s, [p.pid], s.path("out"))
        t.check(recorded(r), "ljperf record -p ends when the process exits")
        t.check("pid %d exited" % p.pid in r.stderr, "it says the process exited")
        t.check(p.wait(timeout=10) == 0 and "done" in rd.text(), "the process ended normally")
        t.check(os.path.isfile(os.path.join(s.path("out"), "jit-%d.dump" % p.pid)),
                "its jitdump is in DIR")
        check_tmp_clean(p.pid, "exit while recording")


def case_twice():
    with t.Session() as s:
        p, rd = start_prog(s)
        t0 = time.monotonic()
        first = subprocess.Popen([sys.executable, t.ljperf_bin(), "record", "-p", str(p.pid),
                                  "--duration", "4", "-o", s.path("out1")], env=s.env(),
                                 stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        t.check(rd.wait(lua_remote_on, since=t0, timeout=20) is not None,
                "the first ljperf switched recording on")
        r = record(s, [p.pid], s.path("out2"), ["--duration", "1"])
        t.check(r.returncode == 1 and "already being recorded by another ljperf (pid %d)"
                % first.pid in r.stderr, "the second ljperf: one clear error")
        t.check(rd.wait(lua_remote_on, since=time.monotonic() + 0.3, timeout=2) is not None,
                "the first recording goes on")
        err = first.communicate(timeout=120)[1]
        print(err)
        t.check(recorded(subprocess.CompletedProcess([], first.returncode, "", err)),
                "the first ljperf ends normally")
        t.check(rd.wait(lua_off, since=time.monotonic(), timeout=5) is not None,
                "then the process is off")
        s.stop(p)


def case_pids():
    with t.Session() as s:
        (p1, r1), (p2, r2) = start_prog(s), start_prog(s)
        t0 = time.monotonic()
        out = s.path("out")
        r = record(s, [p1.pid, p2.pid], out, ["--duration", "2", "--per-process"])
        t1 = time.monotonic()
        t.check(recorded(r), "ljperf record -p PID1,PID2 writes the profile")
        roots = {}
        for st, n in t.folded(out).items():
            roots.setdefault(st.split(";")[0], {})[st] = n
        for p, rd in ((p1, r1), (p2, r2)):
            t.check(rd.wait(lua_remote_on, since=t0, timeout=1) is not None,
                    "pid %d was switched on" % p.pid)
            f = [v for k, v in roots.items() if k.endswith("-%d" % p.pid)]
            good, tot = nested_share(f[0], ["cmod_spin", "cmod_burn"], 7) if f else (0, 0)
            t.check(tot > 0 and good >= 0.95 * tot, "pid %d has full mixed stacks" % p.pid)
            t.check(rd.wait(lua_off, since=t1, timeout=5) is not None,
                    "pid %d is off again after" % p.pid)
        s.stop(p1)
        s.stop(p2)


def case_late():
    with t.Session() as s:
        p, rd = start_prog(s, ["-", "1.5"])     # 1.5 s of CPU in one C call after "ready"
        t0 = time.monotonic()
        out = s.path("out")
        r = record(s, [p.pid], out, ["--duration", "6"])
        t.check(recorded(r), "ljperf record -p writes the profile")
        m = re.search(r"pid %d: switched recording on after ([\d.]+) s" % p.pid, r.stderr)
        t.check(m is not None and float(m.group(1)) >= 0.3,
                "it says when the process switched on (after its C call): %s"
                % (m.group(1) if m else None))
        fold = t.folded(out)
        pre = lua_free_share(fold, "cmod_burn")
        good, tot = rooted_at_main(fold, ["cmod_spin", "cmod_burn"], 7)
        print("LATE: switched after %s s; share of host-only samples in the C call %.2f, "
              "of full mixed stacks %.2f" % (m.group(1) if m else "?", pre,
                                              good / sum(fold.values())))
        t.check(pre >= 0.05, "samples before the switch are kept, their host frames "
                "reaching main (%.0f%% of the weight)" % (100 * pre))
        t.check(good >= 0.05 * sum(fold.values()),
                "after the switch: Lua recursion nested, the C payload under its caller")
        span = sample_span(out)
        t.check(5.0 <= span <= 6.05 and "detached from pid %d after 6.0 s" % p.pid in r.stderr,
                "--duration is kept from perf's start: samples span %.2f s" % span)
        t.check(rd.wait(lua_off, since=time.monotonic(), timeout=5) is not None,
                "after ljperf ends the process is off again")
        t.check(not any(ln.startswith("BAD") for ln in rd.text()), "its results stay correct")
        print("LATE: ljperf took %.1f s in all" % (time.monotonic() - t0))
        s.stop(p)


def case_never():
    with t.Session() as s:
        p, rd = start_prog(s, ["-", "100000"])  # one C call, for good
        t0 = time.monotonic()
        out = s.path("out")
        r = record(s, [p.pid], out, ["--duration", "1.5"])
        took = time.monotonic() - t0
        t.check(recorded(r), "ljperf record -p writes the profile (exit %d)" % r.returncode)
        t.check("pid %d has not switched recording on yet" % p.pid in r.stderr,
                "it says the process has not switched on yet, and why")
        t.check(len([ln for ln in r.stderr.splitlines()
                     if "pid %d never switched recording on: it reached no safe point"
                     % p.pid in ln]) == 1, "one line at the end names it, with the reason")
        fold = t.folded(out)
        t.check(lua_free_share(fold, "cmod_burn") >= 0.9,
                "its samples have their host frames: the C call, reaching main")
        t.check(took < 1.5 + 8, "ljperf ended after --duration (%.1f s in all)" % took)
        t.check(all(b["want"] == 0 and b["owner"] == 0 for b in blocks(p.pid)),
                "no request is left in the process")
        t.check(p.poll() is None, "the process keeps running")
        print("NEVER: ljperf took %.1f s in all for --duration 1.5" % took)
        s.stop(p)


def case_mixed():
    with t.Session() as s:
        p1, r1 = start_prog(s)
        p2, r2 = start_prog(s, env={"LUAJIT_PERF_REMOTE": "0"})
        p3 = s.start(["/bin/sleep", "60"])
        out = s.path("out")
        r = record(s, [p1.pid, p2.pid, p3.pid], out, ["--duration", "2", "--per-process"])
        t.check(recorded(r), "ljperf record -p A,B,C writes the profile")
        for pid, why in ((p2.pid, "LUAJIT_PERF_REMOTE=0 in its environment"),
                         (p3.pid, "no ljperf control block in it")):
            t.check("pid %d will not switch recording on: %s" % (pid, why) in r.stderr and
                    "pid %d never switched recording on: %s" % (pid, why) in r.stderr,
                    "pid %d is named at the start and at the end: %s" % (pid, why))
        roots = {}
        for st, n in t.folded(out).items():
            roots.setdefault(st.split(";")[0], {})[st] = n
        f1 = next((v for k, v in roots.items() if k.endswith("-%d" % p1.pid)), {})
        good, tot = nested_share(f1, ["cmod_spin", "cmod_burn"], 7)
        t.check(tot > 0 and good >= 0.95 * tot, "pid %d has full mixed stacks" % p1.pid)
        f2 = next((v for k, v in roots.items() if k.endswith("-%d" % p2.pid)), {})
        t.check(lua_free_share(f2, "cmod_burn") >= 0.5,
                "pid %d (refusing) has its host frames, no Lua frames" % p2.pid)
        t.check(all(b["seq"] == 0 for b in blocks(p2.pid)),
                "no request was written into the refusing process")
        t.check(r1.wait(lua_off, since=time.monotonic(), timeout=5) is not None,
                "pid %d is off again after" % p1.pid)
        for p in (p1, p2, p3):
            s.stop(p)


def container_tmp(pid):
    return sorted(os.listdir("/proc/%d/root/tmp" % pid))


def case_container():
    with t.Session() as s:
        u, rd, pid = start_in_container(s)
        t.check(nspid(pid) == [str(pid), "1"], "luajit is pid 1 in its pid namespace")
        before = container_tmp(pid)
        t.check(before == ["its-own"], "its /tmp is its own: %s" % before)
        time.sleep(0.5)
        out = s.path("out")
        r = record(s, [pid], out, ["--duration", "2", "--lines"])
        t.check(recorded(r), "ljperf record -p HOSTPID writes the profile")
        t.check(re.search(r"pid %d: switched recording on after [\d.]+ s" % pid, r.stderr)
                is not None, "it switched on across the namespaces")
        t.check(rd.wait(lua_remote_on, timeout=1) is not None,
                "while recorded, status: map, jitdump, frames on, remote")
        fold = t.folded(out)
        good, tot = rooted_at_main(fold, ["cmod_spin", "cmod_burn"], 7)
        print("weight in cmod_burn: %d, rooted at main with rec x7 -> cmod_spin -> "
              "cmod_burn: %d" % (tot, good))
        t.check(tot > 0 and good >= 0.95 * tot, "its Lua frames are named and in order, "
                "rooted at main: Lua recursion nested, the C payload under its caller")
        names = t.frames_of(fold)
        t.check(t.has_frame(names, "work") and
                any(re.match(r".*prog\.lua:0:\d+$", n) for n in names),
                "work is named, and the main chunk has its lines (--lines)")
        after = container_tmp(pid)
        t.check(after == sorted(before + ["jit-1.dump", "jit-1.dump.inline", "perf-1.map"]),
                "its /tmp holds what it held and its own perf map and jitdump: %s" % after)
        t.check(rd.wait(lua_off, since=time.monotonic(), timeout=5) is not None,
                "after ljperf ends it is off again")
        s.stop(u)
        # One that exits during the recording: its /tmp goes with it.
        u, rd, pid = start_in_container(s, ["3"])
        out = s.path("out-exit")
        r = record(s, [pid], out)
        t.check(recorded(r), "ljperf record -p ends when the process exits")
        t.check("pid %d exited during the recording" % pid in r.stderr,
                "it says the process exited during the recording")
        t.check(u.wait(timeout=10) == 0 and "done" in rd.text(), "the process ended normally")
        # Its binaries went with its mounts (as a real container's do): its C
        # frames may be unnamed, its Lua frames are named from DIR's copies.
        fold = t.folded(out)
        rec = {st: n for st, n in fold.items() if "rec" in base_names(st)}
        deep = sum(n for st, n in rec.items() if base_names(st).count("rec") >= 7)
        for st, n in sorted(fold.items(), key=lambda kv: -kv[1])[:3]:
            print("  %d %s" % (n, st))
        t.check(rec and deep >= 0.95 * sum(rec.values()) and
                t.has_frame(t.frames_of(fold), "work"),
                "its Lua frames are named although its /tmp is gone: work, rec x7")


def case_nsworkers():
    """--nginx HOSTPID on a containerized process tree: pid 1 a shell standing
    in for the nginx master (no nginx in this build), two prog.lua workers."""
    with t.Session() as s:
        u, rd, init = start_in_container(s, workers=2)
        workers = children_of(init)
        inner = sorted(nspid(w)[1] for w in workers)
        t.check(len(set(inner)) == 2 and "1" not in inner,
                "two workers, pids %s in there (%s here)" % (inner, workers))
        time.sleep(0.5)
        out = s.path("out")
        r = s.ljperf(["record", "--nginx", str(init), "--duration", "2", "-F", "499",
                      "--per-process", "-o", out])
        t.check(recorded(r), "ljperf record --nginx HOSTPID writes the profile")
        roots = {}
        for st, n in t.folded(out).items():
            roots.setdefault(st.split(";")[0], {})[st] = n
        for w in workers:
            t.check("pid %d: switched recording on after" % w in r.stderr,
                    "worker %d switched on" % w)
            f = next((v for k, v in roots.items() if k.endswith("-%d" % w)), {})
            good, tot = rooted_at_main(f, ["cmod_spin", "cmod_burn"], 7)
            t.check(tot > 0 and good >= 0.95 * tot, "worker %d has full mixed stacks" % w)
        after = container_tmp(init)
        t.check(after == sorted(["its-own"] + ["%s-%s%s" % (k, n, x) for n in inner
                                               for k, x in (("jit", ".dump"),
                                                            ("jit", ".dump.inline"),
                                                            ("perf", ".map"))]),
                "its /tmp holds its file and the workers' perf maps and jitdumps: %s"
                % after)
        s.stop(u)


def case_twopid1():
    """Two containers, each with its luajit as pid 1: perf inject would name
    the code of both jitted-1-N.so, so ljperf leaves it out and lj_merge
    names both from their jitdumps."""
    with t.Session() as s:
        (u1, _, p1), (u2, _, p2) = start_in_container(s), start_in_container(s)
        time.sleep(0.5)
        out = s.path("out")
        r = record(s, [p1, p2], out, ["--duration", "2", "--per-process"])
        t.check(recorded(r), "ljperf record -p HOSTPID1,HOSTPID2 writes the profile")
        t.check("perf inject --jit is skipped" in r.stderr and
                not os.path.exists(os.path.join(out, "perf.jit.data")),
                "it says perf inject is left out, and it is")
        roots = {}
        for st, n in t.folded(out).items():
            roots.setdefault(st.split(";")[0], {})[st] = n
        for p in (p1, p2):
            f = next((v for k, v in roots.items() if k.endswith("-%d" % p)), {})
            good, tot = rooted_at_main(f, ["cmod_spin", "cmod_burn"], 7)
            t.check(tot > 0 and good >= 0.95 * tot, "pid %d has full mixed stacks" % p)
        for u in (u1, u2):
            s.stop(u)


BUSY = (  # what, luajit options, busy.lua arguments, share in full depth
    ("interpreted loop", ["-joff"], ["loop", "2"], 0.95),
    ("trace loop", [], ["loop", "3"], 0.95),
    ("sunk allocation", [], ["sunk", "3"], 0.95),
    ("coroutines", ["-joff"], ["coro", "2"], 0.95),
    ("coroutines, JIT", [], ["coro", "3"], 0.95),
    ("count hook", ["-joff"], ["hook", "2"], 0.95),
)
SWITCH_BOUND = 1.0  # seconds from the request to a busy process switched on


def switched_after(r, pid):
    m = re.search(r"pid %d: switched recording on after ([0-9.]+) s" % pid, r.stderr)
    return float(m.group(1)) if m else None


def lua_depth_share(fold, depth):
    """Of the samples with a Lua frame of busy code: the share under DEPTH or
    more rec frames (the recursion in full depth), and their weight."""
    tot = good = 0
    short = {}
    for st, n in fold.items():
        names = base_names(st)
        if not any(f.startswith("/") or f in ("rec", "spin", "loop", "sunk", "coro",
                                              "hooked") for f in names[1:]):
            continue
        tot += n
        if names.count("rec") >= depth:
            good += n
        else:
            short[st] = n
    for st, n in sorted(short.items(), key=lambda kv: -kv[1])[:3]:
        print("  not in full depth (%.1f%%): %s" % (100.0 * n / tot, st))
    return (good / tot if tot else 0.0), tot


def case_busy():
    with t.Session() as s:
        for i, (what, opts, args, full) in enumerate(BUSY):
            argv = [t.built("bin", "luajit")] + opts + [os.path.join(HERE, "busy.lua")] + args
            alone = subprocess.run(argv, env=s.env(), capture_output=True, text=True,
                                   timeout=200)
            t.check(alone.returncode == 0, "%s: runs alone (exit 0)" % what)
            p = s.start(argv, env=s.env(), stdout=subprocess.PIPE)
            rd = Reader(p)
            t.check(rd.wait(lambda ln: ln == "ready") is not None, "%s: starts" % what)
            time.sleep(0.5)
            out = s.path("busy%d" % i)
            r = record(s, [p.pid], out, ["--duration", "2"])
            t.check(recorded(r), "%s: ljperf record -p writes the profile" % what)
            took = switched_after(r, p.pid)
            t.check(took is not None and took <= SWITCH_BOUND,
                    "%s: switched on within %.1f s (after %s s)" % (what, SWITCH_BOUND, took))
            t.check(p.wait(timeout=200) == 0, "%s: exit status 0 attached too" % what)
            rd.wait(lambda ln: False, timeout=5)    # the last line read
            t.check(rd.text() == alone.stdout.splitlines(),
                    "%s: output as without ljperf: %s" % (what, rd.text()[-1:]))
            share, tot = lua_depth_share(t.folded(out), 8)
            if full is not None:
                t.check(tot >= 100 and share >= full,
                        "%s: the Lua recursion in full depth (%.1f%% of %d)"
                        % (what, 100 * share, tot))
            print("BUSY %s: switched on after %.2f s; %.1f%% of Lua samples under 8 rec"
                  % (what, took, 100 * share))
            t.remove_tmp_files([p.pid])     # it ended after ljperf: its files


def case_hostbusy():
    with t.Session() as s:
        p, rd = start_host(s, ["8", "busy"])
        time.sleep(1.0)
        t0 = time.monotonic()
        out = s.path("out")
        r = record(s, [p.pid], out, ["--duration", "3", "--per-thread"])
        t.check(recorded(r), "ljperf record -p writes the profile")
        took = switched_after(r, p.pid)
        t.check(took is not None and took <= SWITCH_BOUND,
                "switched on within %.1f s (after %s s)" % (SWITCH_BOUND, took))
        for i in (1, 2):
            t.check(rd.wait(lambda ln: host_status(ln)[0] == i and host_status(ln)[1] == 0x0f,
                            since=t0, timeout=3) is not None,
                    "thread %d: status map|jitdump|frames|REMOTE while recorded" % i)
        per = {}
        for st, n in t.folded(out).items():
            per.setdefault(st.split(";")[0], {})[st] = n
        full = []
        for root, f in sorted(per.items()):
            share, tot = lua_depth_share(f, 6)
            print("%s: %d samples of Lua code, %.1f%% under 6 rec" % (root, tot, 100 * share))
            if tot >= 50 and share >= 0.9:
                full.append(root)
        t.check(len(full) == 2, "both lua_States (threads) have full Lua stacks: %s" % full)
        t.check(p.wait(timeout=60) == 0, "the host ends normally")
        t.check(not any(ln.startswith("BAD") for ln in rd.text()), "its results stay correct")
        t.remove_tmp_files([p.pid])


CASES = {"pids": case_pids, "luajit": case_luajit, "host": case_host, "had": case_had,
         "kill": case_kill, "exit": case_exit, "twice": case_twice, "late": case_late,
         "never": case_never, "mixed": case_mixed, "container": case_container,
         "nsworkers": case_nsworkers, "twopid1": case_twopid1, "busy": case_busy,
         "hostbusy": case_hostbusy}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        sys.exit("usage: test_remote.py {%s}" % ",".join(CASES))
    t.need_perf()
    t.main(CASES[sys.argv[1]])
