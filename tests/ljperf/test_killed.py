"""ljperf killed mid-recording (SIGKILL, SIGHUP, SIGTERM: a supervisor's
timeout, a dropped ssh session, the OOM killer) leaves no perf behind.

usage: test_killed.py {cmd,pid,mem,nginx} [--nginx BIN]
  cmd    ljperf record -- luajit PROG
  pid    ljperf record -p PID of a luajit started without LUAJIT_PERF
  mem    ljperf record --mem -p PID
  nginx  ljperf record --nginx MASTER of BIN serving examples/openresty
         (started without LUAJIT_PERF) under wrk

For each signal, sent to ljperf alone about 1.5 s into the recording:
within 1 s no process of it remains (what descended from it then, and
any process whose command line names its output directory: perf record,
inject, script); an attached target switches off (the VM's lease: every
part of jit.perf.status() false again, as before ljperf) and then runs at
its speed from before ljperf (its own progress per CPU second: PROG's
iterations over those of a copy of PROG never attached, measured in the
same windows, both run with -joff; nginx's requests per worker CPU
second; the machine's other load does not enter); a started PROG ends
with perf (as on --duration).

Why -joff for the speed: LuaJIT drops and re-records a busy loop's traces
by itself (its trace set went 34 -> 19 -> 24 with no switch at all, on the
control VM too), so with the JIT one process's speed before and after a
window measured trace layout luck (after/before 0.67-1.5 over 10 runs, for
no reason of ljperf's). The interpreter's speed has no such luck, and
what the check is for moves it all the same: a perf left sampling, or the
VM left recording frames. Both PROGs run on one CPU (one_cpu): two
processes on different CPUs of a loaded machine differ by up to 1.5x per
CPU second (caches), taking turns on one they meet the same load. After SIGTERM and SIGHUP ljperf exits 128+SIG naming
`ljperf report DIR`, and that renders the recording with its Lua frames.
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from tests.lib import ljptest as t
from ljperf.procs import children_of, proc_alive

PROG = r"""
local ffi = require("ffi")
ffi.cdef("int getpid(void);")
local perf = require("jit.perf")
io.stdout:setvbuf("line")
local function killed_work(n)   -- allocates: GC steps switch it, --mem samples it
  local t = {}
  for i = 1, n do t[i] = {i} end
  return #t
end
print("ready " .. ffi.C.getpid())
local iters, t0 = 0, os.clock()
while true do
  iters = iters + killed_work(200) / 200
  local c = os.clock()
  if c - t0 >= 0.1 then
    local st = perf.status()
    print(string.format("remote=%s frames=%s map=%s jitdump=%s mem=%s rate=%.0f",
                        tostring(st.remote), tostring(st.frames), tostring(st.map),
                        tostring(st.jitdump), tostring(st.mem), iters / (c - t0)))
    iters, t0 = 0, c
  end
end
"""
SIGNALS = (signal.SIGKILL, signal.SIGHUP, signal.SIGTERM)
GONE_WITHIN = 1.0     # seconds from the signal to no process of ljperf left
LEASE_BOUND = 5.0     # lease (3 s) + renewal period (1 s) + a poll
# After / before, per CPU second of the target; a window below the bound is
# measured again, a lasting slowdown fails both.
# nginx: a perf left sampling at 999 Hz cost it 25-30% (issue 39) for as
# long as it ran; two wrk runs of one server here differ by up to 15-20%
# (0.81-1.03 seen for the same case in CI).
SPEED_KEPT = 0.78
# PROG (-joff, on one CPU with its control): over a copy never attached, in
# the same windows, so that what the machine does to both cancels (their
# ratio stays within 0.98-1.02 here at a load of 5 on 2 CPUs; on two CPUs,
# with the JIT, it spread over 0.67-1.5). Measured that way a perf left
# sampling at 999 Hz costs PROG 3.5%, frame recording on 4%, frames, map
# and jitdump 5%: each is checked directly (no process left, every part of
# jit.perf.status() off); this bound catches a VM left much slower
# otherwise (0.93 failed once in 40 runs: a window before ljperf at 1.09).
SPEED_KEPT_PAIRED = 0.85
OFF = "remote=false frames=false map=false jitdump=false mem=false "   # the VM's mode
RECORD_FOR = 1.5      # seconds of recording before the signal


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        kids = children_of(todo.pop())
        out += kids
        todo += kids
    return out


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def left_of(lj, out, known):
    """{pid: command line} of the live processes of ljperf LJ: KNOWN (what
    descended from it when it was signalled) and any naming OUT (every
    perf ljperf runs has --buildid-dir OUT/.debug), but LJ itself."""
    pids = {p for p in known if proc_alive(p)}
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) not in (lj, os.getpid()) and out in cmdline(int(d)):
            if proc_alive(int(d)):
                pids.add(int(d))
    return {p: cmdline(p) for p in pids}


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else 0


def rates(rd, since, n=12):
    """The first N rates the target prints after SINCE (N tenths of a CPU
    second: the wall time they take depends on the machine's load)."""
    t.check(t.wait_for(lambda: len(rd.rates(since, float("inf"))) >= n, timeout=60),
            "the target prints its speed")
    return rd.rates(since, float("inf"))[:n]


def paired(rd, ctl, since):
    """Speed of the target (Reader RD) over the control's (CTL): the median
    of the first rates each prints after SINCE."""
    return median(rates(rd, since)) / max(median(rates(ctl, since)), 1)


def one_cpu():
    """A preexec_fn that puts a process on this process's last CPU: the
    target and the control take turns on it, so what the machine's other
    work does to caches and clocks falls on both alike."""
    cpu = max(os.sched_getaffinity(0))
    return lambda: os.sched_setaffinity(0, {cpu})


def start_ljperf(s, args, out):
    p = subprocess.Popen([sys.executable, t.ljperf_bin(), "record", "-o", out] + args,
                         env=s.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    s.procs.append(p)
    return p


def kill_and_check(s, lj, sig, out):
    """SIG to ljperf LJ: nothing of it left within GONE_WITHIN s; with
    SIGTERM/SIGHUP it ends naming `ljperf report`. Returns the signal's
    time."""
    known = descendants(lj.pid)
    t.check(any(os.path.basename(cmdline(p).split(" ")[0]) == "perf" for p in known),
            "%s: ljperf runs perf (%s)" % (sig.name, known))
    tk = time.monotonic()
    lj.send_signal(sig)
    left = left_of(lj.pid, out, known)
    while left and time.monotonic() - tk < GONE_WITHIN:
        time.sleep(0.02)
        left = left_of(lj.pid, out, known)
    took = time.monotonic() - tk
    for p in left:          # ours (its perf, its program): not left running
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    t.check(not left, "%s: no process of ljperf left %.2f s after it (bound %.1f s, "
            "and one look at /proc): %s" % (sig.name, took, GONE_WITHIN, left))
    try:
        _, err = lj.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        t.fail("%s: ljperf still runs 30 s after it" % sig.name)
    err = err.decode(errors="replace")
    print("  | " + err.rstrip().replace("\n", "\n  | "))
    s.note_dir_pids(["-o", out])
    if sig != signal.SIGKILL:
        t.check(lj.returncode == 128 + sig and
                "`ljperf report %s` renders it" % out in t.last_line(err),
                "%s: ljperf exits %d and names `ljperf report DIR` (%d)"
                % (sig.name, 128 + sig, lj.returncode))
    return tk


def check_report(s, sig, out, frame):
    if sig == signal.SIGKILL:
        return
    r = s.ljperf(["report", out])
    names = t.frames_of(t.folded(out)) if r.returncode == 0 else set()
    t.check(r.returncode == 0 and any(frame in n for n in names),
            "%s: ljperf report renders the directory left, with %s" % (sig.name, frame))


def prog_path(s):
    path = s.path("killed.lua")
    with open(path, "w") as f:
        f.write(PROG)
    return path


def case_cmd(opts):
    luajit = t.built("bin", "luajit")
    with t.Session() as s:
        prog = prog_path(s)
        for sig in SIGNALS:
            out = s.path("out-" + sig.name)
            lj = start_ljperf(s, ["--", luajit, prog], out)
            rd = t.Reader(lj)
            ready = rd.wait(lambda ln: ln.startswith("ready "), timeout=30)
            t.check(ready is not None, "%s: the program runs under ljperf" % sig.name)
            pid = int(ready[1].split()[1])
            s.pids.add(pid)
            time.sleep(RECORD_FOR)
            kill_and_check(s, lj, sig, out)
            t.check(not proc_alive(pid), "%s: the program it started ended with perf"
                    % sig.name)
            check_report(s, sig, out, "killed_work")


def case_pid(opts, mem=False):
    luajit = t.built("bin", "luajit")
    with t.Session() as s:
        prog = prog_path(s)
        # -joff, one CPU: see the module comment
        pin = one_cpu()
        c = s.start([luajit, "-joff", prog], stdout=subprocess.PIPE, preexec_fn=pin)
        ctl = t.Reader(c)                                                 # the control
        for sig in SIGNALS:
            p = s.start([luajit, "-joff", prog], stdout=subprocess.PIPE, preexec_fn=pin)
            rd = t.Reader(p)
            t.check(rd.wait(lambda ln: ln.startswith("ready ")) is not None,
                    "%s: the target runs" % sig.name)
            t.check(rd.wait(lambda ln: ln.startswith(OFF), timeout=10) is not None,
                    "%s: the target's VM is off before ljperf" % sig.name)
            before = paired(rd, ctl, time.monotonic())
            out = s.path("out-" + sig.name)
            ts = time.monotonic()
            lj = start_ljperf(s, ["-p", str(p.pid)] + (["--mem"] if mem else []), out)
            t.check(rd.wait(lambda ln: ln.startswith("remote=true"), since=ts, timeout=20)
                    is not None, "%s: ljperf switched the target on" % sig.name)
            time.sleep(RECORD_FOR)
            tk = kill_and_check(s, lj, sig, out)
            off = rd.wait(lambda ln: ln.startswith("remote=false"), since=tk,
                          timeout=LEASE_BOUND + 5)
            t.check(off is not None and off[0] - tk <= LEASE_BOUND,
                    "%s: the target is off again after %.2f s" % (
                        sig.name, off[0] - tk if off else float("inf")))
            last = rd.wait(lambda ln: ln.startswith("remote="), since=off[0] + 0.3,
                           timeout=10)
            t.check(last is not None and last[1].startswith(OFF),
                    "%s: every part of the target's VM is off (%s)"
                    % (sig.name, last[1].rsplit(" ", 1)[0] if last else "no line"))
            after = paired(rd, ctl, off[0] + 0.3)
            if after < SPEED_KEPT_PAIRED * before:  # a slowdown left behind lasts:
                after = max(after, paired(rd, ctl, time.monotonic() + 1.0))
            print("RATE %s: iterations per CPU second over the control's: before "
                  "ljperf %.3f, after %.3f" % (sig.name, before, after))
            t.check(p.poll() is None and after >= SPEED_KEPT_PAIRED * before,
                    "%s: the target runs on at its speed (%.2f of before)"
                    % (sig.name, after / before))
            s.stop(p)
            check_report(s, sig, out, "killed_work")
        s.stop(c)


# -- nginx ---------------------------------------------------------------------

def worker_cpu(pids):
    """CPU seconds (user + system) of PIDS so far."""
    tot = 0
    for p in pids:
        with open("/proc/%d/stat" % p) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        tot += int(fields[11]) + int(fields[12])
    return tot / os.sysconf("SC_CLK_TCK")


def wrk(url, seconds):
    load = os.path.join(t.ROOT, "examples", "openresty", "load.lua")
    return subprocess.Popen(["wrk", "-t1", "-c8", "-d%ds" % seconds, "-s", load, url],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def requests_per_cpu(ngx, workers, seconds=2, windows=2):
    """Requests per worker CPU second under wrk: the best of WINDOWS runs of
    SECONDS (the machine's other load only lowers it)."""
    best = 0.0
    for _ in range(windows):
        c0 = worker_cpu(workers)
        w = wrk(ngx.url, seconds)
        text = w.communicate(timeout=seconds + 60)[0]
        m = re.search(r"(\d+) requests in", text)
        if m is None:
            t.fail("wrk printed no request count: %s" % text[-300:])
        best = max(best, int(m.group(1)) / max(worker_cpu(workers) - c0, 1e-3))
    return best


def case_nginx(opts):
    from examples.openresty import serve
    from ljperf import remote as ljremote
    for tool in ("wrk",):
        if not shutil.which(tool):
            t.fail("%s is not installed (.ci/openresty-packages)" % tool)

    def on(pid):
        return any(b["nremote"] > 0 for b in
                   (ljremote.Block(pid, a).read() for a in ljremote.find_blocks(pid)))

    ngx = serve.Nginx(opts.nginx, workers=2, perf_env=False)
    for k in ("LUAJIT_PERF", "LUAJIT_PERF_DIR", "LUAJIT_PERF_REMOTE"):
        ngx.env.pop(k, None)
    pids = []
    with t.Session() as s:
        try:
            ngx.start()
            workers = ngx.worker_pids()
            pids = [ngx.master] + workers
            requests_per_cpu(ngx, workers, windows=1)   # warm: JIT, caches
            for sig in SIGNALS:
                before = requests_per_cpu(ngx, workers)
                load = wrk(ngx.url, 30)
                out = s.path("out-" + sig.name)
                lj = start_ljperf(s, ["--nginx", str(ngx.master)], out)
                t.check(t.wait_for(lambda: all(on(w) for w in workers), timeout=20),
                        "%s: ljperf switched the workers on" % sig.name)
                time.sleep(RECORD_FOR)
                tk = kill_and_check(s, lj, sig, out)
                t.check(t.wait_for(lambda: not any(on(w) for w in workers), timeout=15),
                        "%s: the workers are off again after %.2f s"
                        % (sig.name, time.monotonic() - tk))
                load.kill()
                load.communicate()
                after = requests_per_cpu(ngx, workers)
                if after < SPEED_KEPT * before:     # a slowdown left behind lasts:
                    after = max(after, requests_per_cpu(ngx, workers, windows=3))
                print("RATE %s: requests per worker CPU second before ljperf %.0f, "
                      "after %.0f" % (sig.name, before, after))
                t.check(ngx.worker_pids() == workers and after >= SPEED_KEPT * before,
                        "%s: the same workers serve on at their speed (%.2f of before)"
                        % (sig.name, after / before))
                check_report(s, sig, out, "app.lua")
        finally:
            ngx.stop()
            t.remove_tmp_files(pids)


CASES = {"cmd": case_cmd, "pid": case_pid, "mem": lambda o: case_pid(o, mem=True),
         "nginx": case_nginx}

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--nginx", help="the nginx binary (case nginx)")
    o = ap.parse_args()
    if o.case == "nginx" and not o.nginx:
        ap.error("case nginx needs --nginx BIN")
    t.need_perf()
    t.main(lambda: CASES[o.case](o))
