"""ljperf heap: what a heap snapshot (jit.perf.heapsnapshot) says about who
keeps the memory.

  ljperf heap FILE                     total, bytes by type, top 10 retainers
  ljperf heap diff BASE TARGET [FINAL] objects new in TARGET (still alive in
                                       FINAL), by name, with a retaining path
  ljperf heap -p PID[,PID...] -o DIR   a snapshot of every Lua state of each
                                       running process, into DIR
  ljperf heap --nginx MASTER_PID -o DIR
                                       the same of each worker of an nginx
                                       master, one worker at a time

-p asks through the remote switch (docs/remote-switch.md): each state writes
its snapshot at its next safe point (kicked there when busy, as `ljperf
record -p`) into the process's $LUAJIT_PERF_DIR (default /tmp), and ljperf
moves it to DIR/heap-PID[-N].heapsnapshot and prints its summary.
--nginx takes the master's workers as `ljperf record --nginx` does, and asks
them in turn, so that only one at a time pauses. Everything is printed on
stderr. The files open in Chrome DevTools' Memory panel (Load) and in
memlab (`memlab find-leaks --baseline BASE --target TARGET --final FINAL`,
`memlab analyze ... --snapshot FILE`).
"""

import glob
import os
import shutil

from ljperf import remote
from ljperf.attach import attach_pids, proc_environ
from ljperf.heapsnap import BadSnapshot, Snapshot, diff
from ljperf.messages import Fail, say

TOP = 10
PATH_STEPS = 12
REMOTE_WAIT = 10.0          # seconds for every state of a process to write its own


def load(path):
    try:
        return Snapshot(path)
    except BadSnapshot as e:
        raise Fail(str(e))


def path_text(snap, i):
    steps = snap.path(i)
    if steps is None:
        return "(unreachable: garbage not yet collected)"
    if len(steps) > PATH_STEPS:
        steps = steps[:3] + ["..."] + steps[-(PATH_STEPS - 4):]
    return " -> ".join(steps)


def summary(path, out):
    s = load(path)
    total = s.total()
    say("heap %s: %d bytes in %d objects" % (path, total, s.n))
    for t, (count, size) in sorted(s.by_type().items(), key=lambda kv: -kv[1][1]):
        out.write("  %-16s %10d bytes %8d objects  %5.1f%%\n"
                  % (t, size, count, 100.0 * size / total if total else 0))
    out.write("top %d retainers (retained bytes, own bytes, name: shortest path from a root):\n"
              % TOP)
    for i in s.top_retainers(TOP):
        out.write("  %10d %8d  %s: %s\n" % (s.retained_size(i), s.size(i), s.name(i),
                                            path_text(s, i)))
    return 0


def leaks(paths, out):
    base, target = load(paths[0]), load(paths[1])
    final = load(paths[2]) if len(paths) > 2 else None
    groups = diff(base, target, final)
    what = "new in %s%s" % (paths[1], " and still alive in %s" % paths[2] if final else "")
    say("heap diff: %d objects, %d bytes %s"
        % (sum(g[2] for g in groups), sum(g[3] for g in groups), what))
    for name, t, count, size, i in groups[:50]:
        out.write("  %10d bytes %8d x %s (%s)\n      kept by: %s\n"
                  % (size, count, name, t, path_text(target, i)))
    if len(groups) > 50:
        out.write("  ... and %d more groups\n" % (len(groups) - 50))
    return 0


def snapshot_dir(pid):
    """Where PID's states write remote snapshots, as we reach it."""
    d = proc_environ(pid).get("LUAJIT_PERF_DIR") or "/tmp"
    return ("/proc/%d/root" % pid if d.startswith("/") else "/proc/%d/cwd/" % pid) + d


def take(pids, outdir, out, in_turn=False):
    """ljperf heap -p: one snapshot per Lua state of each of PIDS, into OUTDIR
    (IN_TURN: one process after the other)."""
    os.makedirs(outdir, exist_ok=True)
    got = sum(ask(group, outdir, out) for group in
              ([[p] for p in pids] if in_turn else [pids]))
    if not got:
        raise Fail("no snapshot written")
    return 0


def ask(pids, outdir, out):
    """Asks every Lua state of PIDS at once; moves their snapshots to OUTDIR
    and prints each one's summary. Returns how many there were."""
    sw = remote.RemoteSwitch(pids, parts=remote.PART_HEAP)
    try:
        missing = sw.start()
    except remote.RemoteError as e:
        raise Fail(str(e))
    for pid in missing:
        say("pid %d: no ljperf-patched LuaJIT found (no control block)" % pid)
    asked = list(sw.asked)
    try:
        late = sw.wait_on(REMOTE_WAIT, every_state=True)
    finally:
        sw.stop(wait=1.0)
    got = 0
    for b, seq in asked:
        pattern = os.path.join(snapshot_dir(b.pid), "ljperf-heap-%d-%d-*.heapsnapshot"
                               % (remote.ns_pid(b.pid), seq))
        files = sorted(glob.glob(pattern))
        for k, f in enumerate(files):
            dest = os.path.join(outdir, "heap-%d%s.heapsnapshot"
                                % (b.pid, "-%d" % (k + 1) if len(files) > 1 else ""))
            shutil.move(f, dest)
            got += 1
            summary(dest, out)
        if b.pid in late:
            say("pid %d: %s within %.0f s (a state that runs no Lua code writes its "
                "snapshot when it next does)" % (b.pid, "%d snapshot(s)" % len(files)
                                                 if files else "no snapshot", REMOTE_WAIT))
    return got


def run(opts, out):
    if opts.attach or opts.nginx is not None:
        if opts.args or not opts.output:
            raise Fail("heap -p PID, --nginx MASTER_PID: give -o DIR and no FILE", code=2)
        pids = attach_pids(opts)
        if opts.nginx is None:
            return take(pids, opts.output, out)
        workers = pids[1:]      # the master's Lua VM is idle; each worker has its own
        if not workers:
            raise Fail("nginx %d: no worker processes (is it an nginx master?)" % opts.nginx)
        return take(workers, opts.output, out, in_turn=True)
    args = opts.args
    if args and args[0] == "diff":
        if len(args) not in (3, 4):
            raise Fail("heap diff: give BASE TARGET [FINAL]", code=2)
        return leaks(args[1:], out)
    if len(args) != 1:
        raise Fail("heap: give one FILE (or diff BASE TARGET [FINAL])", code=2)
    return summary(args[0], out)
