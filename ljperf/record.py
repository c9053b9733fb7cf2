"""ljperf record: perf record of a command it starts (record_launch) or of
running processes it attaches to (record_attach), both ending in one
finishing step (finish: prune, inject, fold, write); and ljperf report
(report), the finishing step again on a recording."""

import datetime
import json
import os
import shutil
import signal
import subprocess
import threading
import time

from ljperf import attach
from ljperf.children import ENDING, Ended, popen
from ljperf.messages import Fail, one_line, read_text, say
from ljperf.perfcmd import need_perf, paranoid_error, paranoid_value, record_argv
from ljperf.finish import dumps_in, inject, prune_dumps, write_outputs
from ljperf.procs import children_of, proc_alive
from ljperf.resolve import MAP_DIR, map_path

STOP_GRACE = 10.0            # seconds perf gets to stop after SIGINT
STOP_ACK = 1.0               # --mem -p: seconds the processes get to switch off first


# -- perf record ---------------------------------------------------------------

def spare_fd():
    """A copy of our stderr on a free descriptor 3..9 (sh redirects only
    single-digit descriptors)."""
    for fd in range(3, 10):
        try:
            os.fstat(fd)
        except OSError:
            os.dup2(2, fd, inheritable=False)
            return fd
    raise Fail("no free file descriptor in 3..9 to pass the program's stderr")


def signame(sig):
    try:
        return signal.Signals(sig).name
    except ValueError:
        return "signal %d" % sig


class Recording:
    """perf record of a command or of a running process; stops it on
    --duration, SIGINT/SIGTERM/SIGHUP to ljperf (Ctrl-C reaches perf and the
    program too: same process group). After SIGTERM/SIGHUP (ended) the
    caller renders nothing: see leave()."""

    def __init__(self, argv, env, log, duration, pass_fd=None, before_stop=None):
        self.argv, self.env, self.log = argv, env, log
        self.duration = duration
        self.before_stop = before_stop  # called before perf stops at --duration
        self.pass_fd = pass_fd
        self.proc = None
        self.stopped = False          # we sent SIGINT after --duration
        self.stopped_at = None        # ... this many seconds in
        self.killed = False           # the program ignored SIGTERM: SIGKILL
        self.interrupted = None       # a signal ljperf got
        self.elapsed = 0.0

    @property
    def ended(self):
        return self.interrupted in ENDING

    def _on_signal(self, sig, frame):
        self.interrupted = sig
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGINT)
            except OSError:
                pass

    def run(self):
        sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        old = {s: signal.signal(s, self._on_signal) for s in sigs}
        try:
            with open(self.log, "w") as logf:
                t0 = time.monotonic()
                try:
                    self.proc = popen(
                        self.argv, env=self.env, stderr=logf,
                        pass_fds=(self.pass_fd,) if self.pass_fd is not None else ())
                except OSError as e:
                    raise Fail("cannot start perf: %s" % (e.strerror or e))
                deadline = t0 + self.duration if self.duration else None
                while True:
                    timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                    try:
                        self.proc.wait(timeout=timeout if timeout is None else min(timeout, 0.5))
                        break
                    except subprocess.TimeoutExpired:
                        if deadline is not None and time.monotonic() >= deadline:
                            self.stopped = True
                            self.stopped_at = time.monotonic() - t0
                            if self.before_stop is not None:
                                self.before_stop()
                            self._stop()
                            break
                self.elapsed = time.monotonic() - t0
        finally:
            for s, h in old.items():
                signal.signal(s, h)
        return self.proc.returncode

    def _stop(self):
        """SIGINT to perf: it stops recording, and SIGTERMs a program it
        started (an attached process just keeps running)."""
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=STOP_GRACE)
            return
        except subprocess.TimeoutExpired:
            pass
        for kid in children_of(self.proc.pid):     # a program ignoring SIGTERM
            try:
                os.kill(kid, signal.SIGKILL)
                self.killed = True
            except OSError:
                pass
        try:
            self.proc.wait(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise Fail("perf record did not stop after SIGINT; killed it")


# -- The output directory and its record (ljperf.json) ---------------------------

def make_outdir(path):
    if path is None:
        base = "ljperf-" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        path, n = base, 1
        while os.path.exists(path):
            n += 1
            path = "%s-%d" % (base, n)
    path = os.path.abspath(path)
    if os.path.exists(os.path.join(path, "perf.data")):
        raise Fail("%s already holds a recording (perf.data): choose another -o DIR, "
                   "or re-render it with `ljperf report %s`" % (path, path))
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise Fail("cannot create %s: %s" % (path, e.strerror or e))
    if not os.access(path, os.W_OK):
        raise Fail("cannot write into %s" % path)
    return path


def move_maps(outdir):
    """The perf maps of the processes that wrote a jitdump into OUTDIR (the
    VM always writes /tmp/perf-PID.map): a copy into OUTDIR, then removed."""
    for p in sorted(dumps_in(outdir)):
        if os.path.exists(map_path(MAP_DIR, p)):
            try:
                shutil.copyfile(map_path(MAP_DIR, p), map_path(outdir, p))
                os.unlink(map_path(MAP_DIR, p))
            except OSError as e:
                say("warning: cannot move %s into %s: %s"
                    % (map_path(MAP_DIR, p), outdir, e.strerror or e))


def new_meta(opts, title, target, event, **more):
    meta = {"title": title, "target": target, "frequency": opts.freq, "event": event,
            "recorded": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}
    meta.update(more)
    return meta


def check_recorded(data, log):
    """perf record wrote DATA, else one line: why not. Passes on perf's
    lost-samples lines."""
    logtext = read_text(log)
    if not os.path.exists(data) or os.path.getsize(data) == 0:
        # perf could not start (it leaves an empty perf.data)
        value = paranoid_value()
        if "perf_event_paranoid" in logtext and value is not None and value > 2:
            raise paranoid_error(value)
        raise Fail("perf record failed: %s (log: %s)" % (one_line(logtext), log))
    for ln in logtext.splitlines():
        if "lost" in ln.lower():
            say("perf: " + ln.strip())


def write_meta(outdir, meta):
    try:
        with open(os.path.join(outdir, "ljperf.json"), "w") as f:
            json.dump(meta, f, indent=1)
            f.write("\n")
    except OSError as e:
        raise Fail("cannot write into %s: %s" % (outdir, e.strerror or e))


def leave(outdir, meta, sig):
    """SIGTERM/SIGHUP while recording: perf has stopped (perf.data is
    whole); DIR keeps what `ljperf report DIR` needs and ljperf ends
    without running perf again (a supervisor or a closed terminal wants it
    gone now)."""
    write_meta(outdir, meta)
    say(meta["status"])
    raise Ended(sig, outdir)


def program_status(rc, rec, cmd):
    name = os.path.basename(cmd[0])
    if rec.stopped:
        return "%s stopped after %.1f s (--duration: perf sent it SIGTERM%s)" % (
            name, rec.stopped_at,
            "; it ignored that and was killed" if rec.killed else "")
    if rec.interrupted or rc == -signal.SIGINT:
        return "%s: recording interrupted (%s)" % (
            name, signame(rec.interrupted or signal.SIGINT))
    if rc < 0:
        return "%s was killed by %s" % (name, signame(-rc))
    return "%s exited with status %d" % (name, rc)


def attach_status(rec, title, pids):
    if rec.stopped:
        return "detached from %s after %.1f s (--duration)" % (title, rec.stopped_at)
    if rec.interrupted:
        return "detached from %s (%s)" % (title, signame(rec.interrupted))
    if any(proc_alive(p) for p in pids):
        return "perf record ended early; %s still running" % title
    return "%s exited" % title


# -- Launch, attach, finish --------------------------------------------------------

MEM_RATE = 524288            # LJ_PERFMEM_RATE: the VM's default


def mem_meta(opts):
    """{"mem_rate": bytes} for a --mem recording (ljperf.json), else {}."""
    return {"mem_rate": opts.mem_rate or MEM_RATE} if getattr(opts, "mem", False) else {}


def off_meta(opts):
    """{"off_cpu": true, "wall": bool} for an --off-cpu or --wall
    recording (ljperf.json), else {}."""
    if not getattr(opts, "off_cpu", False):
        return {}
    return {"off_cpu": True, "wall": bool(opts.wall)}


def record_launch(opts, perf, event, cmd):
    """Runs CMD under perf record with LUAJIT_PERF=1 (with --mem: all parts
    and mem) and LUAJIT_PERF_DIR=DIR: its jitdump and perf map land in
    DIR."""
    outdir = make_outdir(opts.output)
    data = os.path.join(outdir, "perf.data")
    # perf's messages go to perf-record.log, the program's stderr to ours:
    # the program is started through `sh -c 'exec "$@" 2>&N'` (same pid).
    errfd = spare_fd()
    argv = record_argv(perf, outdir, data, event, opts.freq, opts.mem, opts.off_cpu) + [
        "--", "/bin/sh", "-c", 'exec "$@" 2>&%d %d>&-' % (errfd, errfd), "sh"] + cmd
    env = dict(os.environ)
    env["LUAJIT_PERF"] = "map,jitdump,frames,mem" if opts.mem else "1"
    env["LUAJIT_PERF_DIR"] = outdir
    if opts.mem:
        env["LUAJIT_PERF_MEMRATE"] = str(opts.mem_rate or MEM_RATE)
    meta = new_meta(opts, " ".join(cmd), "command", event, command=cmd, pid=None,
                    **mem_meta(opts), **off_meta(opts))
    log = os.path.join(outdir, "perf-record.log")
    rec = Recording(argv, env, log, opts.duration, errfd)
    try:
        rc = rec.run()
    finally:
        os.close(errfd)
        move_maps(outdir)
    meta["duration"] = round(rec.elapsed, 3)
    check_recorded(data, log)
    status = meta["status"] = program_status(rc, rec, cmd)
    if not dumps_in(outdir):
        raise Fail("%s does not use the ljperf-patched LuaJIT: no jitdump appeared in "
                   "%s (LUAJIT_PERF=1 was set; is it linked with ljperf's "
                   "build/lib/libluajit-5.1 or run by its build/bin/luajit? %s)"
                   % (cmd[0], outdir, status))
    meta["pids"] = sorted(dumps_in(outdir))
    if rec.ended:
        leave(outdir, meta, rec.interrupted)
    return finish(perf, outdir, data, opts, meta)


def record_attach(opts, perf, event, pids):
    """Switches recording on in PIDS (not in an nginx master: its Lua VM is
    idle and its workers have their own switch) and holds it on for this
    recording (a second ljperf gets one clear error); off again at the end,
    on errors and Ctrl-C too."""
    targets = attach.open_targets(pids)
    try:
        sw, never = attach.switch_on(targets, [t for t in targets if t.pid != opts.nginx],
                                     mem_meta(opts).get("mem_rate"))
        try:
            return record_switched(opts, perf, event, targets, sw, never)
        finally:
            sw.stop()
    finally:
        attach.close_targets(targets)


def record_switched(opts, perf, event, targets, sw, never):
    """perf record of TARGETS, started as soon as the switch's requests are
    written: a process's samples before it switched on keep their host
    frames, its Lua frames start with its switch."""
    outdir = make_outdir(opts.output)
    data = os.path.join(outdir, "perf.data")
    pids = [t.pid for t in targets]
    title = ("nginx %d" % opts.nginx if opts.nginx is not None else
             "pid " + ",".join(map(str, pids)))
    argv = record_argv(perf, outdir, data, event, opts.freq, opts.mem, opts.off_cpu) + [
        "-p", ",".join(map(str, pids))]
    meta = new_meta(opts, title, "pid", event, command=[], pid=pids[0], attached=pids,
                    **mem_meta(opts), **off_meta(opts))
    log = os.path.join(outdir, "perf-record.log")
    # --mem: the processes switch off while perf still records, so that the
    # frees waiting for a trap (and the last GC cycle's end) are recorded.
    rec = Recording(argv, dict(os.environ), log, opts.duration,
                    before_stop=(lambda: sw.stop(wait=STOP_ACK)) if opts.mem else None)
    timer = threading.Timer(attach.NOT_YET, attach.note_not_yet, (targets, sw))
    timer.daemon = True
    timer.start()
    try:
        rec.run()
    finally:
        timer.cancel()
    meta["duration"] = round(rec.elapsed, 3)
    check_recorded(data, log)
    meta["status"] = attach_status(rec, title, pids)
    attach.report_attached(targets, sw, never, rec.elapsed)
    # Snapshot the processes' jitdumps (they keep growing) and perf maps.
    # After SIGTERM/SIGHUP no perf runs again: the processes perf would find
    # samples of are taken from /proc (the targets and their children).
    recorded = (attach.family(pids) if rec.ended else
                attach.sample_pids(perf, outdir, data))
    procs = attach.recorders(targets, set(sw.switched), recorded)
    try:
        got = attach.collect_attached(outdir, procs)
        sw.stop()                   # recording off now, not after the rendering
        for t in targets:
            if t.pid in sw.switched and not t.dump_seen and not proc_alive(t.pid):
                attach.remove_left(t)   # it exited: its files are ours to clean
        plain = attach.link_ns_dumps(outdir, got, recorded)
        if not plain:
            say("warning: a recorded process's pid in its own pid namespace is another "
                "one's too: perf inject --jit is skipped (it would name their code "
                "alike); Lua frames are named from the jitdumps")
        meta["pids"] = sorted(t.pid for t in got)
        meta["switched"] = {str(p): round(s, 3) for p, s in sorted(sw.switched.items())}
        # each process's samples before that keep their host frames (--from)
        meta["switched_at"] = {str(p): round(t, 6) for p, t in sorted(sw.switch_times().items())}
        if rec.ended:
            leave(outdir, meta, rec.interrupted)
        since = time.time()
        # perf inject reads the jitdumps where the processes write them, not
        # the copies in DIR: nothing to prune
        return finish(perf, outdir, data, opts, meta, prune=False, do_inject=plain,
                      injected=lambda: [t.remove_injected(since) for t in got])
    finally:
        attach.close_targets(p for p in procs if p not in targets)


def finish(perf, outdir, data, opts, meta, prune=True, do_inject=True, injected=None):
    """The step a launch and an attach share, after perf record: META
    written (ljperf.json), the jitdumps in DIR pruned to the sampled code
    (PRUNE), perf inject --jit (DO_INJECT; then INJECTED(), e.g. to remove
    the .so files it wrote outside DIR), the folded stacks, the flame graph
    and the other outputs."""
    status = meta["status"]
    write_meta(outdir, meta)
    if prune:
        prune_dumps(perf, outdir, data)
    src = data
    jit = os.path.join(outdir, "perf.jit.data")
    try:
        if do_inject and inject(perf, outdir, data, jit):
            src = jit
        if do_inject and injected is not None:
            injected()
        say_result = write_outputs(perf, outdir, src, opts, meta)
    except Fail as e:
        # one line: the error, and what happened to the program
        raise Fail("%s [%s]" % (e, status), e.code)
    say(status)
    say_result()
    return 0


def report(opts):
    """ljperf report DIR: DIR's outputs made again from its perf data."""
    outdir = os.path.abspath(opts.dir)
    data = os.path.join(outdir, "perf.data")
    if not os.path.isdir(outdir):
        raise Fail("no such directory: %s" % opts.dir)
    if not os.path.isfile(data):
        raise Fail("%s has no perf.data (made by `ljperf record -o %s`?)" % (opts.dir, opts.dir))
    perf = need_perf()
    try:
        meta = json.loads(read_text(os.path.join(outdir, "ljperf.json")) or "{}")
    except ValueError:
        meta = {}
    if not meta.get("title"):
        meta["title"] = os.path.basename(outdir)
    jit = os.path.join(outdir, "perf.jit.data")
    src = jit
    if not os.path.isfile(jit) or os.path.getmtime(jit) < os.path.getmtime(data):
        src = jit if inject(perf, outdir, data, jit) else data
    try:
        write_outputs(perf, outdir, src, opts, meta)()
    except KeyboardInterrupt:
        raise Fail("interrupted", 130)
    return 0
