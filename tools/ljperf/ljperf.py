#!/usr/bin/env python3
"""ljperf: one command from a LuaJIT program to a flame graph.

  ljperf record [-o DIR] [-F HZ] [--duration S] -- CMD [ARGS...]
  ljperf record -p PID[,PID...] [-o DIR] [-F HZ] [--duration S]
  ljperf record --nginx MASTER_PID [-o DIR] [-F HZ] [--duration S]
  ljperf report DIR
  ljperf diff BEFORE AFTER [-o FILE] [--absolute] [--format html|folded]

`record` runs CMD (or attaches to PID) under `perf record` with what the
ljperf-patched LuaJIT needs (-k mono, -g --call-graph fp, --user-regs=r13),
then `perf inject --jit`, `perf script` and lj_merge, and writes into DIR:

  flamegraph.html   interactive flame graph, one self-contained file
  profile.folded    folded stacks (flamegraph.pl, speedscope, inferno ...)
  profile.kinds     what each frame is (lj_merge --kinds)
  profile.pb.gz     pprof profile.proto (go tool pprof, Pyroscope, Parca)
  perf.data         the recording; perf.jit.data after perf inject --jit
  jit-PID.dump      the jitdump, cut to the code samples hit (perf inject
                    makes one .so per code load); jit-PID.dump.full: all of it;
                    jit-PID.dump.inline: the Lua functions each trace inlined
  jitted-PID-N.so, perf-PID.map, .debug/ (build-id cache),
  ljperf.json (what was recorded), *.log (perf's own messages)

`report DIR` renders profile.folded and flamegraph.html again from DIR's
perf data (e.g. with other --lines/--keep-vm options). `--format speedscope`
(record, report) also writes profile.speedscope.json.

`diff BEFORE AFTER` (two DIRs or folded files) writes a differential flame
graph: frames red where their share grew, blue where it shrank (diff.py).

Messages go to stderr; the program's own output is left alone. Exit status:
0 profile written (whatever the program's own exit status, which is
printed), 1 error (one line on stderr), 2 bad arguments.
"""

import argparse
import datetime
import functools
import glob
import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

PROG = "ljperf"
PARANOID_FILE = "/proc/sys/kernel/perf_event_paranoid"
DEFAULT_EVENT = "cycles:u"   # perf falls back to cpu-clock:u without a PMU
DEFAULT_HZ = 999
STOP_GRACE = 10.0            # seconds perf gets to stop after SIGINT

# Where this script was started from (build/bin when run through the
# symlink) and where its source is (tools/ljperf).
BIN_DIR = os.path.dirname(os.path.abspath(__file__))
SRC_DIR = os.path.dirname(os.path.realpath(__file__))
# lj_merge's modules: the perf script reader, the jitdump reader and the
# frame vocabulary (ljperf colours frames with the kinds lj_merge uses).
sys.path.insert(0, os.path.normpath(os.path.join(SRC_DIR, os.pardir, os.pardir,
                                                 "perf-script")))
import jitdump  # noqa: E402
import jitinline  # noqa: E402
import perfscript  # noqa: E402
from ljframes import PC_USER_REGS, frame_kind  # noqa: E402
# The -p side, next to this script's source: the remote switch, the targets.
sys.path.insert(0, SRC_DIR)
import ljattach  # noqa: E402
import ljremote  # noqa: E402


class Fail(Exception):
    """An error reported as one line; CODE is the exit status. RAW messages
    are printed as they are (argparse's, which name the subcommand)."""

    def __init__(self, msg, code=1, raw=False):
        Exception.__init__(self, msg)
        self.code = code
        self.raw = raw


def say(msg):
    sys.stderr.write("%s: %s\n" % (PROG, msg))
    sys.stderr.flush()


def one_line(text, limit=300):
    """The most telling line of a tool's stderr."""
    lines = [ln.strip() for ln in (text or "").splitlines()
             if ln.strip() and not ln.strip().endswith(":")]
    for ln in lines:
        low = ln.lower()
        if "error" in low or "failed" in low or "cannot" in low or "not " in low:
            return ln[:limit]
    return (lines[-1] if lines else "no message")[:limit]


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


# -- Environment checks --------------------------------------------------------

def need_perf():
    perf = shutil.which("perf")
    if not perf:
        raise Fail("perf not found in PATH: install linux-perf "
                   "(Debian: apt-get install linux-perf)")
    return perf


def privileged():
    """Root, or CAP_PERFMON / CAP_SYS_ADMIN: perf_event_paranoid does not apply."""
    for line in read_text("/proc/self/status").splitlines():
        if line.startswith("CapEff:"):
            try:
                caps = int(line.split()[1], 16)
            except (IndexError, ValueError):
                break
            return bool(caps & (1 << 21 | 1 << 38))
    return os.geteuid() == 0


def paranoid_value():
    """kernel.perf_event_paranoid (LJPERF_PARANOID_FILE: another file to read
    it from, for tests), or None if unreadable."""
    path = os.environ.get("LJPERF_PARANOID_FILE") or PARANOID_FILE
    try:
        return int(read_text(path).strip())
    except ValueError:
        return None


def perf_probe(perf, event):
    """Can perf sample EVENT in a child process of ours? (ok, stderr)"""
    d = tempfile.mkdtemp(prefix="ljperf-probe-")
    try:
        r = subprocess.run([perf, "--buildid-dir", os.path.join(d, ".debug"), "record",
                            "-q", "-N"] + list(no_bpf_event(perf)) +
                           ["-e", event, "-o", os.path.join(d, "p.data"), "--", "true"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, errors="replace")
        return r.returncode == 0, r.stderr
    except OSError as e:
        return False, str(e)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def paranoid_error(value):
    return Fail("kernel.perf_event_paranoid is %d, ljperf needs <= 2: sampling the "
                "user-space call graphs of your own processes is allowed up to 2, and "
                "Debian kernels refuse all perf use at 3 to users without CAP_PERFMON "
                "(fix: sudo sysctl kernel.perf_event_paranoid=2, or run as root)" % value)


@functools.lru_cache(maxsize=None)
def no_bpf_event(perf):
    """("--no-bpf-event",) if this perf has it (perf >= 5.1): without it perf
    record waits up to a second after the program ends, or after SIGINT, for
    its BPF side-band thread, which ljperf does not need (it samples user
    space)."""
    try:
        r = subprocess.run([perf, "record", "-h"], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, errors="replace", timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return ("--no-bpf-event",) if "--no-bpf-event" in r.stdout + r.stderr else ()


def check_access(perf, event):
    """ljperf samples user space only (EVENT :u by default). Without
    privileges that needs perf_event_paranoid <= 2; upstream kernels treat
    higher values as 2, Debian's refuse everything at 3, so above 2 perf is
    asked (a tiny probe) rather than guessed."""
    if privileged():
        return
    value = paranoid_value()
    if value is None or value <= 2:
        return
    ok, _ = perf_probe(perf, event)
    if not ok:
        raise paranoid_error(value)


def resolve_command(name):
    if os.sep in name:
        if not os.path.exists(name):
            raise Fail("command not found: %s" % name)
        if os.path.isdir(name) or not os.access(name, os.X_OK):
            raise Fail("cannot run %s: not an executable file" % name)
        return name
    found = shutil.which(name)
    if not found:
        raise Fail("command not found: %s" % name)
    return found


# -- Attaching (-p, --nginx): docs/remote.md -----------------------------------

NOT_YET = 1.0       # seconds after which ljperf names the pids not switched on yet
NO_BLOCK = "no ljperf control block in it (not the ljperf-patched LuaJIT)"
REFUSES = "LUAJIT_PERF_REMOTE=0 in its environment"


def proc_uid(pid):
    for line in read_text("/proc/%d/status" % pid).splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[2])     # effective uid
    return None


def check_process(pid):
    if pid <= 0 or not os.path.isdir("/proc/%d" % pid):
        raise Fail("no process with pid %d" % pid)
    uid = proc_uid(pid)
    if not privileged() and uid is not None and uid != os.geteuid():
        raise Fail("cannot attach to pid %d: it runs as uid %d; run ljperf as that user "
                   "or as root" % (pid, uid))


def attach_pids(opts):
    """The pids to attach to: -p's list, or --nginx's master and its
    children (the workers; later children -- workers after a reload, a new
    binary after an upgrade -- are followed by perf's inheritance)."""
    pids = list(opts.attach or [])
    if opts.nginx is not None:
        if pids:
            raise Fail("give either -p or --nginx, not both", 2)
        if opts.nginx <= 0 or not os.path.isdir("/proc/%d" % opts.nginx):
            raise Fail("no process with pid %d" % opts.nginx)
        pids = [opts.nginx] + children_of(opts.nginx)
    return pids


def open_targets(pids):
    """An ljattach.Target per pid (each holds directories open: close them)."""
    targets = []
    try:
        for p in pids:
            check_process(p)
            targets.append(ljattach.Target(p))
    except BaseException:
        close_targets(targets)
        raise
    return targets


def close_targets(targets):
    for t in targets:
        t.close()


def switch_on(targets, wanted):
    """Writes the remote switch's requests into the WANTED targets that do
    not refuse it, and returns at once (perf starts next): the switch says
    per pid when it has switched on. Returns (the switch, {pid: why it never
    will}). Refuses in one line when no target can have Lua frames."""
    asked = [t.pid for t in wanted if not t.refuses()]
    on_already = {t.pid for t in wanted if t.dump_seen}

    def switched(pid, seconds):
        if pid not in on_already:
            say("pid %d: switched recording on after %.2f s" % (pid, seconds))
    sw = ljremote.RemoteSwitch(asked, on_switch=switched)
    try:
        noblock = set(sw.start())
    except ljremote.RemoteError as e:
        sw.stop()
        raise Fail(str(e))
    never = {}
    for t in wanted:
        if t.dump_seen is None and (t.refuses() or t.pid in noblock):
            never[t.pid] = REFUSES if t.refuses() else NO_BLOCK
    if not any(t.dump_seen or (t.pid in asked and t.pid not in noblock) for t in targets):
        sw.stop()
        raise Fail("cannot record Lua frames: " + "; ".join(
            "pid %d: %s, and it writes no jitdump (no %s)"
            % (t.pid, never.get(t.pid, "not switched on"), t.shown(t.dump_path()))
            for t in targets))
    for p, why in sorted(never.items()):
        say("pid %d will not switch recording on: %s; recording its host frames" % (p, why))
    return sw, never


def not_switched(targets, sw):
    """The TARGETS that record nothing yet (no jitdump before) and have not
    switched on (yet)."""
    pending = set(sw.pending())
    return [t for t in targets if t.pid in pending and not t.dump_seen]


def note_not_yet(targets, sw):
    """Names the pids that have not switched on yet (called NOT_YET s in)."""
    for t in not_switched(targets, sw):
        if proc_alive(t.pid):
            say("pid %d has not switched recording on yet: it does when it runs Lua "
                "code (it is in C code or idle now%s); its host frames are recorded "
                "meanwhile" % (t.pid, kick_note(sw, t.pid)))


def kick_note(sw, pid):
    """Why busy Lua code of PID could not be made to switch, if so."""
    why = sw.kick_error.get(pid)
    return "; busy Lua code in it cannot be switched: %s" % why if why else ""


def report_attached(targets, sw, never, seconds):
    """One line per target that exited or never switched recording on."""
    late = {t.pid for t in not_switched(targets, sw)}
    for t in targets:
        why = never.get(t.pid)
        if why is None and t.pid in late:
            why = "it reached no safe point in %.1f s (it ran no Lua code%s)" \
                  % (seconds, kick_note(sw, t.pid))
        if not proc_alive(t.pid):
            say("pid %d exited during the recording%s"
                % (t.pid, "; it had not switched recording on (%s)" % why if why else ""))
        elif why:
            say("pid %d never switched recording on: %s; its samples have host frames "
                "only" % (t.pid, why))


def sample_pids(perf, outdir, data):
    r = subprocess.run([perf, "--buildid-dir", os.path.join(outdir, ".debug"), "script",
                        "-i", data, "-F", "pid"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, errors="replace")
    return {int(x) for x in r.stdout.split() if x.isdigit()}


def recorders(targets, on, pids):
    """The processes whose files to collect: the TARGETS that record (ON:
    switched on, or writing a jitdump already), and the other PIDS with
    samples (processes they started while recorded) that write one."""
    out = [t for t in targets if t.pid in on or t.dump_seen]
    known = {t.pid for t in targets}
    for p in sorted(pids - known):
        if proc_alive(p):
            child = ljattach.Target(p)
            if child.dump_seen:
                out.append(child)
                continue
            child.close()
        else:                       # exited: look where its parent writes
            child = next((c for c in (t.child(p) for t in targets) if c is not None), None)
            if child is not None:
                out.append(child)
    return out


def collect_attached(outdir, procs):
    """Copies into OUTDIR, named by the pid perf reports, the jitdump (and
    its .inline) and perf map of each of PROCS (ljattach.Target). Returns
    those that had a jitdump."""
    got = []
    for t in procs:
        (d, dump), (_, inline), (m, pmap) = t.files()
        try:
            if not t.copy(d, dump, os.path.join(outdir, "jit-%d.dump" % t.pid)):
                continue
            t.copy(d, inline, os.path.join(outdir, "jit-%d.dump.inline" % t.pid))
            t.copy(m, pmap, os.path.join(outdir, "perf-%d.map" % t.pid))
        except OSError as e:
            raise Fail("cannot copy %s into %s: %s"
                       % (t.shown(os.path.join(d, dump)), outdir, e.strerror or e))
        got.append(t)
    return got


def link_ns_dumps(outdir, got, pids):
    """perf inject names the code of a process in another pid namespace
    jitted-NSPID-N.so (the pid its jitdump carries), and lj_merge finds
    that code in jit-NSPID.dump: a link to its copy jit-PID.dump in OUTDIR.
    False (and nothing linked) when such a name would be ambiguous: two
    processes with one NSPID, or an NSPID that is another recorded pid."""
    names = [t.nspid for t in got if t.nspid != t.pid]
    if len(set(names)) != len(names) or set(names) & (pids | {t.pid for t in got}):
        return False
    for t in got:
        if t.nspid != t.pid:
            for sfx in (".dump", ".dump.inline"):
                src = os.path.join(outdir, "jit-%d%s" % (t.pid, sfx))
                if os.path.exists(src):
                    os.link(src, os.path.join(outdir, "jit-%d%s" % (t.nspid, sfx)))
    return True


def remove_left(t):
    """A process we switched on exited: its jitdump, .inline and perf map
    (copied into DIR) would stay in its /tmp forever."""
    for d, name in t.files():
        t.remove(d, name)


# -- Processes -----------------------------------------------------------------

def children_of(ppid):
    """Pids of PPID's children, sorted (from /proc/*/stat: the one
    implementation; examples/openresty/serve.py and the tests import it)."""
    kids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        st = read_text("/proc/%s/stat" % d)
        r = st.rfind(")")
        if r < 0:
            continue
        f = st[r + 2:].split()
        if len(f) > 1 and f[1] == str(ppid):
            kids.append(int(d))
    return sorted(kids)


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
    program too: same process group)."""

    def __init__(self, argv, env, log, duration, pass_fd=None):
        self.argv, self.env, self.log = argv, env, log
        self.duration = duration
        self.pass_fd = pass_fd
        self.proc = None
        self.stopped = False          # we sent SIGINT after --duration
        self.stopped_at = None        # ... this many seconds in
        self.killed = False           # the program ignored SIGTERM: SIGKILL
        self.interrupted = None       # a signal ljperf got
        self.elapsed = 0.0

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
                    self.proc = subprocess.Popen(
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


# -- Output directory ----------------------------------------------------------

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


def perf_map(pid):
    return "/tmp/perf-%d.map" % pid


def dumps_in(d):
    """{pid: path} of the jit-PID.dump files in D."""
    out = {}
    for p in glob.glob(os.path.join(d, "jit-*.dump")):
        s = os.path.basename(p)[4:-5]
        if s.isdigit():
            out[int(s)] = p
    return out


# -- Post-processing -----------------------------------------------------------

def lj_merge_argv():
    p = os.path.join(BIN_DIR, "lj_merge")
    if not os.path.exists(p):
        p = os.path.join(SRC_DIR, os.pardir, os.pardir, "perf-script", "lj_merge.py")
    if not os.path.exists(p):
        raise Fail("lj_merge not found (looked next to ljperf and in perf-script/)")
    return [sys.executable, p]


def perf_event_name(perf, outdir, data):
    r = subprocess.run([perf, "--buildid-dir", os.path.join(outdir, ".debug"), "evlist",
                        "-i", data], stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, errors="replace")
    lines = [ln.strip() for ln in r.stdout.splitlines() if ln.strip()]
    return lines[0] if r.returncode == 0 and lines else None


def sampled_addrs(perf, outdir, data):
    """Every user address in DATA's samples (IPs and callchains), and the
    byte before each (a return address's call), or None if perf fails."""
    r = subprocess.run([perf, "--buildid-dir", os.path.join(outdir, ".debug"), "script",
                        "-i", data, "-F", "ip"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, errors="replace")
    if r.returncode != 0:
        return None
    addrs = set()
    for s in perfscript.iter_samples(r.stdout.split("\n")):
        for a, _, _, _ in s.frames:
            if 0 < a < 0x800000000000:
                addrs.add(a)
                addrs.add(a - 1)
    return addrs


def inline_addrs(dump):
    """The bytecode addresses the trace inline stacks next to DUMP name
    (jit-PID.dump.inline): the loads of the functions traces inlined must
    survive pruning, or lj_merge cannot name them."""
    out = set()
    try:
        for t in jitinline.read(dump + ".inline"):
            out.update(pc for pc, _ in t.nodes)
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as e:
        say("warning: %s.inline: %s" % (dump, e))
    return out


def prune_dumps(perf, outdir, data):
    """perf inject --jit writes one .so per CODE_LOAD: a program that loads
    20 000 functions gets 20 000 files and inject takes many seconds. Before
    inject, each DIR/jit-PID.dump keeps only the loads that cover a sampled
    address (what inject and lj_merge need); the full dump is kept as
    jit-PID.dump.full."""
    dumps = dumps_in(outdir)
    if not dumps:
        return
    addrs = sampled_addrs(perf, outdir, data)
    if addrs is None:
        say("warning: perf script -F ip failed; perf inject gets the full jitdumps")
        return
    for p in dumps.values():
        full, tmp = p + ".full", p + ".pruned"
        try:
            if os.path.exists(full):   # pruned before (ljperf report): start over
                shutil.copyfile(full, p)
            kept, total = jitdump.prune(p, tmp, addrs | inline_addrs(p))
            if kept < total:
                os.replace(p, full)
                os.replace(tmp, p)
            else:
                os.unlink(tmp)
        except (OSError, ValueError) as e:
            say("warning: cannot prune %s for perf inject: %s" % (p, e))
            if os.path.exists(tmp):
                os.unlink(tmp)


def inject(perf, outdir, data, out):
    """perf inject --jit; True if OUT was written."""
    log = os.path.join(outdir, "perf-inject.log")
    with open(log, "w") as logf:
        r = subprocess.run([perf, "--buildid-dir", os.path.join(outdir, ".debug"), "inject",
                            "--jit", "-i", data, "-o", out],
                           stdin=subprocess.DEVNULL, stdout=logf, stderr=logf)
    if r.returncode != 0 or not os.path.exists(out):
        say("warning: perf inject --jit failed (%s); Lua frames are named from the "
            "jitdump instead" % one_line(read_text(log)))
        try:
            os.unlink(out)
        except OSError:
            pass
        return False
    return True


# Other outputs `--format` adds, by lj_merge --format: the file in DIR.
FORMATS = {"speedscope": "profile.speedscope.json"}


def fold(perf, outdir, data, opts, fmt="folded"):
    """perf script | lj_merge -> DIR/profile.folded and DIR/profile.kinds
    (FMT: another lj_merge --format, into DIR/FORMATS[FMT])."""
    fields = "comm,pid,tid,time,period,event,ip,sym,symoff,dso"
    if opts.lines or fmt == "folded":
        fields += ",uregs"        # R13: the interpreted leaf's line (--lines, profile.pb.gz)
    folded = os.path.join(outdir, "profile.folded")
    kinds = os.path.join(outdir, "profile.kinds")
    merge = lj_merge_argv() + ["--jit-tag", "--jitdump", outdir, "--kinds", kinds,
                               "--pprof", os.path.join(outdir, "profile.pb.gz"),
                               "-o", folded]
    log_sfx = ""
    if fmt != "folded":
        folded = os.path.join(outdir, FORMATS[fmt])
        merge = lj_merge_argv() + ["--jit-tag", "--jitdump", outdir, "--format", fmt,
                                   "-o", folded]
        log_sfx = "-" + fmt
    for flag, opt in (("lines", "--lines"), ("keep_vm", "--keep-vm"),
                      ("per_process", "--pid"), ("per_thread", "--tid")):
        if getattr(opts, flag, False):
            merge.append(opt)
    slog = os.path.join(outdir, "perf-script%s.log" % log_sfx)
    with open(slog, "w") as slogf:
        script = subprocess.Popen([perf, "--buildid-dir", os.path.join(outdir, ".debug"),
                                   "script", "-i", data, "-F", fields,
                                   # forks: a child without a jitdump of its
                                   # own is named from its parent's
                                   "--show-task-events"],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=slogf)
        try:
            m = subprocess.Popen(merge, stdin=script.stdout, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE)
        except OSError as e:
            script.kill()
            script.wait()
            raise Fail("cannot run lj_merge: %s" % (e.strerror or e))
        script.stdout.close()
        _, merr = m.communicate()
        script.wait()
    merr = merr.decode("utf-8", "replace")
    with open(os.path.join(outdir, "lj_merge%s.log" % log_sfx), "w") as f:
        f.write(merr)
    if script.returncode != 0:
        raise Fail("perf script failed: %s" % one_line(read_text(slog)))
    if m.returncode != 0:
        raise Fail("lj_merge failed: %s" % one_line(merr))
    return folded, kinds


def load_folded(path):
    """[(frames list, weight)] of a folded file; malformed lines are skipped."""
    stacks = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            stack, sp, cnt = line.rpartition(" ")
            if not sp or not stack:
                continue
            try:
                w = int(cnt)
            except ValueError:
                try:
                    w = float(cnt)
                except ValueError:
                    continue
            if w > 0:
                stacks.append((stack.split(";"), w))
    return stacks


def load_kinds(path):
    """{name: set of kinds} from lj_merge --kinds output (empty if missing)."""
    kinds = {}
    for line in read_text(path).splitlines():
        k, tab, name = line.partition("\t")
        if tab:
            kinds.setdefault(name, set()).add(k)
    return kinds


# -- Frame kinds (flame graph colours) -----------------------------------------

# Colour classes and the kind of a printed frame: ljframes (lj_merge's
# frame vocabulary), KINDS in the order the legend lists them. The palette
# itself is in page/ljperf-page.js; docs/ljperf.md shows both.


def build_tree(stacks, kinds):
    """Folded stacks -> the renderer's tree {n: name, v: total weight,
    k: kind, c: [children]} under a root "all"; and the self weight of each
    kind (what the legend shows)."""
    cache = {}

    def kind_of(name):
        k = cache.get(name)
        if k is None:
            k = cache[name] = frame_kind(name, kinds.get(name))
        return k

    root = ["all", 0, "root", {}]
    self_by_kind = {}
    for frames, w in stacks:
        node = root
        node[1] += w
        for depth, name in enumerate(frames):
            ch = node[3].get(name)
            if ch is None:
                ch = node[3][name] = [name, 0, "root" if depth == 0 else kind_of(name), {}]
            ch[1] += w
            node = ch
        self_by_kind[node[2]] = self_by_kind.get(node[2], 0) + w

    def convert(n):
        d = {"n": n[0], "v": n[1], "k": n[2]}
        if n[3]:
            d["c"] = []
        return d

    top = convert(root)
    todo = [(root, top)]
    while todo:
        n, d = todo.pop()
        for ch in n[3].values():
            cd = convert(ch)
            d["c"].append(cd)
            if ch[3]:
                todo.append((ch, cd))
    return top, self_by_kind


# -- HTML ----------------------------------------------------------------------

def share_dir():
    env = os.environ.get("LJPERF_SHARE")
    cands = [env] if env else []
    cands.append(os.path.join(BIN_DIR, os.pardir, "share", "ljperf"))
    for d in cands:
        if d and os.path.isfile(os.path.join(d, "d3-flamegraph.min.js")):
            return os.path.normpath(d)
    raise Fail("flame graph renderer not found in %s: build the project (cmake --build; "
               "it runs npm ci for d3-flame-graph) or set LJPERF_SHARE"
               % os.path.normpath(cands[-1]))


def _script_safe(text):
    """Text that cannot end the <script> element it is inlined in."""
    return re.sub(r"</(script)", r"<\\/\1", text, flags=re.I).replace("<!--", "<\\!--")


def json_for_html(obj):
    s = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return (s.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def render_html(stacks, kinds, meta, out):
    tree, self_by_kind = build_tree(stacks, kinds)
    data = dict(meta)
    data["tree"] = tree
    data["total"] = tree["v"]
    data["kindSelf"] = self_by_kind
    write_page(data, meta.get("title") or "ljperf", out)


def write_page(data, title, out):
    """The page (template and renderer from share/ljperf) with DATA inlined."""
    share = share_dir()

    def asset(name):
        try:
            with open(os.path.join(share, name), encoding="utf-8") as f:
                return f.read()
        except OSError as e:
            raise Fail("cannot read renderer file %s: %s" % (name, e.strerror or e))

    parts = {
        "TITLE": html.escape("ljperf: " + title, quote=True),
        "RENDERER": html.escape(" / ".join(
            read_text(os.path.join(share, "renderer-versions.txt")).split("\n")).strip(" /")
            or "d3-flame-graph, d3"),
        "RENDERER_CSS": asset("d3-flamegraph.css").replace("</", "<\\/"),
        "PAGE_CSS": asset("ljperf-page.css").replace("</", "<\\/"),
        "DATA": json_for_html(data),
        "D3": _script_safe(asset("d3.min.js")),
        "FLAMEGRAPH": _script_safe(asset("d3-flamegraph.min.js")),
        "PAGE_JS": _script_safe(asset("ljperf-page.js")),
    }
    page = re.sub(r"@@([A-Z_0-9]+)@@", lambda m: parts.get(m.group(1), m.group(0)),
                  asset("flamegraph.html.in"))
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(tmp, out)


# -- Commands ------------------------------------------------------------------

def event_meta(event):
    e = (event or "").split(":")[0]
    if e in ("cpu-clock", "task-clock"):
        return "ns"
    return ""


def render(perf, outdir, data, opts, meta):
    folded, kinds_path = fold(perf, outdir, data, opts)
    stacks = load_folded(folded)
    if not stacks:
        raise Fail("no samples: the profile is empty (did the program run long enough "
                   "and use the CPU? try a longer run or a higher -F)")
    event = perf_event_name(perf, outdir, data) or meta.get("event")
    m = {"title": meta.get("title"), "event": event, "unit": event_meta(event),
         "frequency": meta.get("frequency"), "recorded": meta.get("recorded"),
         "duration": meta.get("duration"), "target": meta.get("target")}
    for fmt in getattr(opts, "format", None) or ():
        say("  %-14s %s" % (fmt, fold(perf, outdir, data, opts, fmt)[0]))
    html_out = os.path.join(outdir, "flamegraph.html")
    try:
        render_html(stacks, load_kinds(kinds_path), m, html_out)
    except Fail as e:
        raise Fail("%s (profile.folded is written: %s)" % (e, folded), e.code)
    return folded, html_out, sum(w for _, w in stacks), event


def print_result(outdir, folded, html_out, total, event, data):
    unit = event_meta(event)
    amount = ("%.2f s of %s" % (total / 1e9, event)) if unit == "ns" else \
        ("%d %s" % (total, event or "events"))
    say("profile: %s in %s" % (amount, outdir))
    say("  flame graph    %s" % html_out)
    say("  folded stacks  %s" % folded)
    say("  pprof          %s  (go tool pprof -http=: %s)"
        % (os.path.join(outdir, "profile.pb.gz"), os.path.join(outdir, "profile.pb.gz")))
    say("  perf data      %s  (perf report -i %s --buildid-dir %s)"
        % (data, data, os.path.join(outdir, ".debug")))


def cmd_record(opts):
    cmd = list(opts.cmd or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    attaching = opts.attach is not None or opts.nginx is not None
    if attaching and cmd:
        raise Fail("give either -p PID or a command, not both (--nginx is an -p)", 2)
    if not attaching and not cmd:
        raise Fail("nothing to record: give -- CMD [ARGS...] or -p PID", 2)
    if opts.freq <= 0:
        raise Fail("-F: the frequency must be > 0", 2)
    if opts.duration is not None and opts.duration <= 0:
        raise Fail("--duration: must be > 0 seconds", 2)
    perf = need_perf()
    event = opts.event or DEFAULT_EVENT
    check_access(perf, event)
    try:
        if attaching:
            return record_attached(opts, perf, event, attach_pids(opts))
        resolve_command(cmd[0])
        return record_command(opts, perf, event, cmd)
    except KeyboardInterrupt:
        raise Fail("interrupted", 130)


def perf_record_argv(perf, outdir, data, event, opts):
    return ([perf, "--buildid-dir", os.path.join(outdir, ".debug"), "record", "-q"] +
            list(no_bpf_event(perf)) +
            ["-e", event, "-k", "mono", "-g", "--call-graph", "fp",
             "--user-regs=" + PC_USER_REGS, "-F", str(opts.freq), "-o", data])


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


def record_command(opts, perf, event, cmd):
    outdir = make_outdir(opts.output)
    data = os.path.join(outdir, "perf.data")
    # perf's messages go to perf-record.log, the program's stderr to ours:
    # the program is started through `sh -c 'exec "$@" 2>&N'` (same pid).
    errfd = spare_fd()
    argv = perf_record_argv(perf, outdir, data, event, opts) + [
        "--", "/bin/sh", "-c", 'exec "$@" 2>&%d %d>&-' % (errfd, errfd), "sh"] + cmd
    env = dict(os.environ)
    env["LUAJIT_PERF"] = "1"
    env["LUAJIT_PERF_DIR"] = outdir
    meta = new_meta(opts, " ".join(cmd), "command", event, command=cmd, pid=None)
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
    write_meta(outdir, meta)
    prune_dumps(perf, outdir, data)
    return finish(perf, outdir, data, opts, meta, status)


def record_attached(opts, perf, event, pids):
    """Switches recording on in PIDS (not in an nginx master: its Lua VM is
    idle and its workers have their own switch) and holds it on for this
    recording (a second ljperf gets one clear error); off again at the end,
    on errors and Ctrl-C too."""
    targets = open_targets(pids)
    try:
        sw, never = switch_on(targets, [t for t in targets if t.pid != opts.nginx])
        try:
            return record_switched(opts, perf, event, targets, sw, never)
        finally:
            sw.stop()
    finally:
        close_targets(targets)


def record_switched(opts, perf, event, targets, sw, never):
    """perf record of TARGETS, started as soon as the switch's requests are
    written: a process's samples before it switched on keep their host
    frames, its Lua frames start with its switch."""
    outdir = make_outdir(opts.output)
    data = os.path.join(outdir, "perf.data")
    pids = [t.pid for t in targets]
    title = ("nginx %d" % opts.nginx if opts.nginx is not None else
             "pid " + ",".join(map(str, pids)))
    argv = perf_record_argv(perf, outdir, data, event, opts) + [
        "-p", ",".join(map(str, pids))]
    meta = new_meta(opts, title, "pid", event, command=[], pid=pids[0], attached=pids)
    log = os.path.join(outdir, "perf-record.log")
    rec = Recording(argv, dict(os.environ), log, opts.duration)
    timer = threading.Timer(NOT_YET, note_not_yet, (targets, sw))
    timer.daemon = True
    timer.start()
    try:
        rec.run()
    finally:
        timer.cancel()
    meta["duration"] = round(rec.elapsed, 3)
    check_recorded(data, log)
    status = meta["status"] = attach_status(rec, title, pids)
    report_attached(targets, sw, never, rec.elapsed)
    # Snapshot the processes' jitdumps (they keep growing) and perf maps.
    recorded = sample_pids(perf, outdir, data)
    procs = recorders(targets, set(sw.switched), recorded)
    try:
        got = collect_attached(outdir, procs)
        sw.stop()                   # recording off now, not after the rendering
        for t in targets:
            if t.pid in sw.switched and not t.dump_seen and not proc_alive(t.pid):
                remove_left(t)      # it exited: its files are ours to clean
        plain = link_ns_dumps(outdir, got, recorded)
        if not plain:
            say("warning: a recorded process's pid in its own pid namespace is another "
                "one's too: perf inject --jit is skipped (it would name their code "
                "alike); Lua frames are named from the jitdumps")
        meta["pids"] = sorted(t.pid for t in got)
        meta["switched"] = {str(p): round(s, 3) for p, s in sorted(sw.switched.items())}
        write_meta(outdir, meta)
        since = time.time()
        return finish(perf, outdir, data, opts, meta, status, plain,
                      lambda: [t.remove_injected(since) for t in got])
    finally:
        close_targets(p for p in procs if p not in targets)


def finish(perf, outdir, data, opts, meta, status, do_inject=True, injected=None):
    """perf inject --jit (then INJECTED(), e.g. to remove the .so files it
    wrote outside DIR), the flame graph and the other outputs."""
    src = data
    jit = os.path.join(outdir, "perf.jit.data")
    try:
        if do_inject and inject(perf, outdir, data, jit):
            src = jit
        if do_inject and injected is not None:
            injected()
        folded, html_out, total, event = render(perf, outdir, src, opts, meta)
    except Fail as e:
        # one line: the error, and what happened to the program
        raise Fail("%s [%s]" % (e, status), e.code)
    say(status)
    print_result(outdir, folded, html_out, total, event, src)
    return 0


def move_maps(outdir):
    """The perf maps of the processes that wrote a jitdump into OUTDIR (the
    VM always writes /tmp/perf-PID.map): a copy into OUTDIR, then removed."""
    for p in sorted(dumps_in(outdir)):
        if os.path.exists(perf_map(p)):
            try:
                shutil.copyfile(perf_map(p), os.path.join(outdir, "perf-%d.map" % p))
                os.unlink(perf_map(p))
            except OSError as e:
                say("warning: cannot move %s into %s: %s"
                    % (perf_map(p), outdir, e.strerror or e))


def proc_alive(pid):
    """PID exists and is not a zombie (exited, not yet reaped)."""
    st = read_text("/proc/%d/stat" % pid)
    r = st.rfind(")")
    return r >= 0 and st[r + 2:r + 3] not in ("Z", "X", "")


def attach_status(rec, title, pids):
    if rec.stopped:
        return "detached from %s after %.1f s (--duration)" % (title, rec.stopped_at)
    if rec.interrupted:
        return "detached from %s (%s)" % (title, signame(rec.interrupted))
    if any(proc_alive(p) for p in pids):
        return "perf record ended early; %s still running" % title
    return "%s exited" % title


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


def write_meta(outdir, meta):
    try:
        with open(os.path.join(outdir, "ljperf.json"), "w") as f:
            json.dump(meta, f, indent=1)
            f.write("\n")
    except OSError as e:
        raise Fail("cannot write into %s: %s" % (outdir, e.strerror or e))


def cmd_report(opts):
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
        folded, html_out, total, event = render(perf, outdir, src, opts, meta)
    except KeyboardInterrupt:
        raise Fail("interrupted", 130)
    print_result(outdir, folded, html_out, total, event, src)
    return 0


# -- Command line --------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise Fail("%s: error: %s (see %s --help)" % (self.prog, message, self.prog), 2,
                   raw=True)


RECORD_HELP = """\
Runs CMD under perf record, or attaches to a running process with -p, and
writes DIR/flamegraph.html and DIR/profile.folded (see `ljperf --help`).

CMD runs with LUAJIT_PERF=1 and LUAJIT_PERF_DIR=DIR, so its jitdump and the
files perf inject makes stay in DIR; its /tmp/perf-PID.map is moved into DIR
after the recording. CMD must use the ljperf-patched LuaJIT. Its stdin,
stdout and stderr are yours; its exit status is printed, and the profile is
written whatever it is.

Stopping: when CMD exits; after --duration S seconds (perf stops and sends
CMD SIGTERM; SIGKILL if it is still there 10 s later); or Ctrl-C (perf and
CMD both get it, the profile is still written).

-p PID[,PID...] attaches to running processes of the ljperf-patched LuaJIT.
ljperf asks those that do not record yet to switch recording on (no
LUAJIT_PERF or profiling code needed; through /proc/PID/mem, so you must be
allowed to ptrace them) and starts perf at once: each process switches at
its next GC step or trace exit (ljperf says when, or at the end that it
never did, and why), its samples before that have their host frames. Off
again when ljperf ends; if ljperf is killed they switch off by themselves
within 3 s (docs/remote.md). A process that had recording on keeps it. A
pid that can never switch (not the patched LuaJIT, or LUAJIT_PERF_REMOTE=0)
is recorded with its host frames; if none can, ljperf refuses at once. Its
jitdump (found in /proc/PID/maps, or where LUAJIT_PERF_DIR in
/proc/PID/environ, default /tmp, says) and perf map are copied into DIR, not
removed (the process still writes them; removed if it exited and ljperf had
switched it on). A process in a container (other pid and mount namespaces)
is reached through /proc/PID/root. Recording ends after --duration (from
perf's start), on Ctrl-C, or when the processes exit; a process that exits
is said so, its samples kept. --nginx MASTER_PID attaches to an nginx
master and its workers (switched on as above; a containerized one by its
pid here), and follows the processes it starts while recording (workers
after a reload, a new binary). Use --per-process for one tree per process. Workers started with LUAJIT_PERF get it from the master's
Lua VM; a new binary (SIGUSR2) gets only the variables of nginx's `env`
directives: add `env LUAJIT_PERF;`.

Permissions: ljperf samples user space only. Without root (CAP_PERFMON) that
needs kernel.perf_event_paranoid <= 2 (Debian kernels: 3 forbids all perf
use), and -p needs the process to run as your user."""

REPORT_HELP = """\
Renders DIR/profile.folded, DIR/profile.kinds and DIR/flamegraph.html again
from DIR/perf.jit.data (running perf inject --jit first if it is missing or
older than DIR/perf.data) and the jitdumps in DIR."""

MAIN_HELP = __doc__ + """
Flame graph colours (frame kinds)
  Lua function      green   interpreted Lua code (NAME@CHUNK:LINE, CHUNK:LINE)
  JIT trace         aqua    Lua code running as a compiled trace (NAME_[j])
  builtin           yellow  LuaJIT library functions (string.byte, ffi.meta___call)
  VM / runtime      purple  LuaJIT itself: lj_* (interpreter with --keep-vm,
                            GC, JIT compiler, FFI), lua_*/luaL_* C API
  C                 red     the host program and its libraries
  kernel            orange  kernel frames (only with a non-:u -e EVENT)
  process / all     grey    the root frames;  [unknown] and [no call chain]
                            (perf printed the sample without frames): light grey
  Search highlights matches in magenta. Click a frame to zoom in, click a
  frame below it (or Reset zoom) to zoom out.
"""


def add_render_options(p):
    g = p.add_argument_group("flame graph options (lj_merge)")
    g.add_argument("--lines", action="store_true",
                   help="Lua frames with their current line (LABEL:LINE)")
    g.add_argument("--keep-vm", action="store_true",
                   help="keep the VM's interpreter frames (lj_BC_*, lj_vm_*, ...)")
    g.add_argument("--per-process", action="store_true",
                   help="one tree per process (root frame comm-PID)")
    g.add_argument("--per-thread", action="store_true",
                   help="one tree per thread (root frame comm-PID/TID)")
    g.add_argument("--format", metavar="FMT[,FMT]", type=formats, default=[],
                   help="also write these (comma list): speedscope "
                        "(DIR/profile.speedscope.json, for speedscope.app)")


def formats(text):
    fmts = [f for f in text.split(",") if f]
    for f in fmts:
        if f not in FORMATS:
            raise argparse.ArgumentTypeError("unknown format %r (known: %s)"
                                              % (f, ", ".join(FORMATS)))
    return fmts


def pid_list(text):
    try:
        pids = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("not a pid list: %r" % text)
    if not pids:
        raise argparse.ArgumentTypeError("no pid given")
    return pids


def make_parser():
    p = _Parser(prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
                description=MAIN_HELP)
    sub = p.add_subparsers(dest="command", metavar="{record,report,diff}",
                           parser_class=_Parser)
    r = sub.add_parser("record", help="record a program (or a running process) and "
                                      "write its flame graph",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description=RECORD_HELP,
                       usage="%(prog)s [-o DIR] [-F HZ] [--duration S] [options] "
                             "-- CMD [ARGS...]\n"
                             "       %(prog)s -p PID [-o DIR] [-F HZ] [--duration S] "
                             "[options]\n"
                             "       %(prog)s --nginx MASTER_PID [-o DIR] [options]")
    r.add_argument("-o", "--output", metavar="DIR",
                   help="where everything goes (default: ./ljperf-YYYYmmdd-HHMMSS)")
    r.add_argument("-F", "--freq", metavar="HZ", type=int, default=DEFAULT_HZ,
                   help="samples per second (default: %d)" % DEFAULT_HZ)
    r.add_argument("--duration", metavar="S", type=float,
                   help="stop recording after S seconds (a started CMD is then "
                        "terminated, an attached process keeps running)")
    r.add_argument("-p", "--pid", dest="attach", metavar="PID[,PID...]", type=pid_list,
                   help="attach to these running processes instead of starting CMD "
                        "(recording is switched on in them, and off again after)")
    r.add_argument("--nginx", metavar="MASTER_PID", type=int,
                   help="attach to an nginx master and its workers (and the workers "
                        "a reload or binary upgrade starts while recording)")
    r.add_argument("-e", "--event", metavar="EVENT",
                   help="perf event (default: %s, user space only; perf uses "
                        "cpu-clock:u where there are no hardware counters)" % DEFAULT_EVENT)
    add_render_options(r)
    r.add_argument("cmd", nargs=argparse.REMAINDER, metavar="CMD [ARGS...]",
                   help="the program to run (after --)")
    rp = sub.add_parser("report", help="render DIR's flame graph again",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        description=REPORT_HELP)
    rp.add_argument("dir", metavar="DIR", help="a directory made by ljperf record")
    add_render_options(rp)
    add_diff_parser(sub)
    return p


def add_diff_parser(sub):
    d = sub.add_parser("diff", help="differential flame graph of two profiles",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description=diff_module().__doc__.split("\n\n", 1)[1].split(
                           "\nCalled by")[0])
    d.add_argument("before", metavar="BEFORE", help="ljperf output directory or folded file")
    d.add_argument("after", metavar="AFTER", help="ljperf output directory or folded file")
    d.add_argument("-o", "--output", metavar="FILE",
                   help="where to write (html default: ./diff.html; folded: stdout)")
    d.add_argument("--absolute", action="store_true",
                   help="compare raw weights, not shares of each profile's total")
    d.add_argument("--format", choices=("html", "folded"), default="html",
                   help="html page (default) or `STACK BEFORE AFTER` lines")


def diff_module():
    """tools/ljperf/diff.py (next to this file's source, on sys.path)."""
    import diff
    return diff


def main(argv=None):
    p = make_parser()
    opts = p.parse_args(argv)
    if opts.command == "record":
        return cmd_record(opts)
    if opts.command == "report":
        return cmd_report(opts)
    if opts.command == "diff":
        return diff_module().run(opts, sys.modules[__name__])
    p.print_help(sys.stderr)
    return 2


def entry():
    try:
        rc = main()
    except Fail as e:
        if e.raw:
            sys.stderr.write(str(e) + "\n")
        else:
            say(str(e))
        rc = e.code
    except KeyboardInterrupt:
        say("interrupted")
        rc = 130
    except BrokenPipeError:
        rc = 141
    except SystemExit:
        raise
    except BaseException as e:          # never a traceback
        say("internal error: %s: %s" % (type(e).__name__, str(e).splitlines()[0]
                                         if str(e) else ""))
        rc = 3
    sys.exit(rc)


if __name__ == "__main__":
    entry()
