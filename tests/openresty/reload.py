#!/usr/bin/env python3
"""A reload and a binary upgrade during `ljperf record --nginx MASTER`.

build/bin/nginx (2 workers, LUAJIT_PERF=1 in the master's environment, as
root the workers run as nobody) serves examples/openresty under wrk. While
ljperf records --nginx MASTER for --seconds:
  t=2 s    SIGHUP: the master starts new workers, the old ones finish;
  t=4.5 s  SIGUSR2: a binary upgrade, nginx execs a new master (it gets
           LUAJIT_PERF only through the config's `env LUAJIT_PERF;`), which
           starts its own workers; then SIGWINCH stops the old workers.
Checked on the recording (perf script of perf.jit.data): each generation of
workers (first, after the reload, of the new master) has >= MIN samples
that name app.lua's Lua functions, >= 99% of its samples whose leaf is not
in a library without frame pointers (nor in PCRE's JIT code, as e2e.py
counts) reach ngx_worker_process_cycle, and its
jitdumps were collected into the recording. Every nginx started is stopped.
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
from examples.openresty import serve
from tests.lib import ljptest
import e2e

MIN = 20


def workers_of(master, exclude=()):
    return [p for p in serve.children_of(master)
            if p not in exclude and serve.Nginx._is_worker(p)]


def wait_for(fn, what, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.1)
    ljptest.fail("timed out waiting for " + what)


def check_generations(out, gen):
    """Per worker generation in GEN ({name: pids}) of the recording in OUT:
    Lua frames named, stacks that reach ngx_worker_process_cycle, the
    jitdumps collected."""
    r = subprocess.run(["perf", "--buildid-dir", os.path.join(out, ".debug"), "script",
                        "-i", os.path.join(out, "perf.jit.data"),
                        "-F", "comm,pid,tid,time,ip,sym,dso"],
                       capture_output=True, text=True, errors="replace")
    samples = list(ljptest.perfscript.iter_samples(r.stdout.split("\n")))
    ok = True
    for name, ws in gen.items():
        mine = [s for s in samples if s.pid in ws]
        lua = sum(1 for s in mine if any(f[1] and e2e.APP in f[1] for f in s.frames))
        judged = [s for s in mine if s.frames and s.frames[0][0] < 0x800000000000 and not (
            s.frames[0][3] and any(x in s.frames[0][3] for x in e2e.NOFP)) and not e2e.foreign_code(s)]
        good = sum(1 for s in judged if any(f[1] == "ngx_worker_process_cycle"
                                            for f in s.frames))
        share = good / len(judged) if judged else 0
        broken = [s for s in judged if not any(f[1] == "ngx_worker_process_cycle"
                                               for f in s.frames)]
        for s_ in broken[:3]:
            print("  broken: " + " <- ".join("%s(%s)" % (f[1], os.path.basename(f[3] or "?"))
                                             for f in s_.frames[:8]))
        have = [w for w in ws if os.path.exists(os.path.join(out, "jit-%d.dump" % w))]
        ok = ljptest.report(
            lua >= MIN and share >= e2e.MIN_SHARE and len(have) == len(ws),
            "%s workers %s: %d samples, %d name app.lua functions, %.2f%% of %d reach "
            "ngx_worker_process_cycle, jitdumps collected for %d of %d"
            % (name, ws, len(mine), lua, 100 * share, len(judged), len(have), len(ws))) and ok
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nginx", required=True)
    p.add_argument("--ljperf", required=True)
    p.add_argument("--seconds", type=int, default=9)
    o = p.parse_args()
    ljptest.need_perf_and_wrk()
    tmp = tempfile.mkdtemp(prefix="ljperf-or-reload-")
    os.chmod(tmp, 0o755)
    dumps = os.path.join(tmp, "dumps")
    os.mkdir(dumps, 0o755)
    ngx = serve.Nginx(o.nginx, workers=2, daemon=True,
                      env={"LUAJIT_PERF": "1", "LUAJIT_PERF_DIR": dumps})
    wrk = rec = None
    new_master = None
    pids = set()
    try:
        ngx.start()
        gen = {"first": ngx.worker_pids()}
        pids.update([ngx.master] + gen["first"])
        wrk = subprocess.Popen(["wrk", "-t1", "-c8", "-d%ds" % (o.seconds + 4), "-s",
                                os.path.join(ROOT, "examples", "openresty", "load.lua"),
                                ngx.url], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        time.sleep(0.5)
        out = os.path.join(tmp, "prof")
        rec = subprocess.Popen([sys.executable, o.ljperf, "record", "--nginx", str(ngx.master), "--duration",
                                str(o.seconds), "-F", "999", "--per-process", "-o", out],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2)
        os.kill(ngx.master, signal.SIGHUP)
        gen["reload"] = wait_for(lambda: (lambda n: n if len(n) >= 2 else None)(
            workers_of(ngx.master, gen["first"])), "workers after SIGHUP")
        pids.update(gen["reload"])
        time.sleep(2.5)
        pidfile = os.path.join(ngx.prefix, "logs", "nginx.pid")
        os.kill(ngx.master, signal.SIGUSR2)

        def upgraded():
            try:
                with open(pidfile) as f:
                    m = int(f.read().strip())
            except (OSError, ValueError):
                return None
            return m if m != ngx.master and len(workers_of(m)) >= 2 else None
        new_master = wait_for(upgraded, "the new master after SIGUSR2")
        gen["upgrade"] = workers_of(new_master)
        pids.update([new_master] + gen["upgrade"])
        os.kill(ngx.master, signal.SIGWINCH)
        rout, rerr = rec.communicate(timeout=o.seconds + 120)
        rc, rec = rec.returncode, None
        if "ljperf: profile" not in rerr:
            ljptest.fail("ljperf record failed (exit %s): %s" % (rc, rerr[-800:]))
        return check_generations(out, gen)
    finally:
        for proc in (rec, wrk):
            if proc is not None:
                proc.kill()
                proc.wait()
        if ngx.proc is not None:
            pids.add(ngx.proc.pid)      # the daemonizing parent ran init_by_lua too
        # The old master first: when the new one exits it starts workers again.
        ngx.stop()
        if new_master:
            try:
                os.kill(new_master, signal.SIGTERM)
            except OSError:
                pass
            end = time.time() + 10
            while os.path.exists("/proc/%d" % new_master) and time.time() < end:
                time.sleep(0.1)
        ljptest.remove_tmp_files(pids)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    ljptest.main(main)
