#!/usr/bin/env python3
"""ljperf record -p on processes started WITHOUT LUAJIT_PERF and with no
profiling code: the remote switch (docs/remote.md), under real perf.

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
Prints the iterations/s before, during and after recording.
"""

import glob
import os
import re
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ljperf"))
import ljperf_testlib as t  # noqa: E402
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "ljperf"))
from ljperf import children_of  # noqa: E402

LEASE_BOUND = 5.0   # lease (3 s) + renewal period (1 s) + a poll, rounded up


class Reader:
    """Collects a process's stdout lines in a thread, with arrival times."""

    def __init__(self, p):
        self.p, self.lines, self.cv = p, [], threading.Condition()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        for raw in self.p.stdout:
            with self.cv:
                self.lines.append((time.monotonic(), raw.decode().rstrip("\n")))
                self.cv.notify_all()
        with self.cv:
            self.lines.append((time.monotonic(), None))
            self.cv.notify_all()

    def wait(self, pred, timeout=20.0, since=0.0):
        """First (time, line) after SINCE with pred(line), or None."""
        end = time.monotonic() + timeout
        with self.cv:
            while True:
                for tm, ln in self.lines:
                    if tm >= since and ln is not None and pred(ln):
                        return tm, ln
                left = end - time.monotonic()
                if left <= 0 or (self.lines and self.lines[-1][1] is None):
                    return None
                self.cv.wait(left)

    def text(self):
        with self.cv:
            return [ln for _, ln in self.lines if ln is not None]

    def rates(self, t0, t1, key=None):
        out = []
        with self.cv:
            for tm, ln in self.lines:
                if ln and t0 <= tm < t1 and (key is None or ln.startswith(key)):
                    m = re.search(r"rate=(\d+)", ln)
                    if m:
                        out.append(int(m.group(1)))
        return out


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


def start_prog(s, args=(), env=None):
    cpath = os.path.join(t.build_dir(), "tests", "fpchain", "?.so")
    e = s.env(dict(env or {}, LUA_CPATH=cpath))
    p = s.start([t.built("bin", "luajit"), os.path.join(HERE, "prog.lua")] + list(args),
                env=e, stdout=subprocess.PIPE)
    r = Reader(p)
    t.check(r.wait(lambda ln: ln == "ready") is not None, "the program starts")
    return p, r


def start_host(s, args=()):
    p = s.start([t.built("tests", "remote", "host")] + list(args), env=s.env(),
                stdout=subprocess.PIPE)
    r = Reader(p)
    t.check(r.wait(lambda ln: ln == "ready") is not None, "the host starts")
    return p, r


def check_tmp_clean(pid, what):
    left = [f for f in t.ljptest.tmp_files(pid) + glob.glob("/tmp/jitted-%d-*.so" % pid)
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
        kids = children_of(lj.pid)
        lj.kill()
        tk = time.monotonic()
        for k in kids:      # its perf record would go on sampling
            try:
                os.kill(k, signal.SIGKILL)
            except OSError:
                pass
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


CASES = {"pids": case_pids, "luajit": case_luajit, "host": case_host, "had": case_had, "kill": case_kill,
         "exit": case_exit, "twice": case_twice}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        sys.exit("usage: test_remote.py {%s}" % ",".join(CASES))
    t.need_perf()
    t.main(CASES[sys.argv[1]])
