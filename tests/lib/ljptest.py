"""The one helper library of the tests: programs under real perf
(PerfSession), ljperf itself (Session), and what they share.

Everything a test writes (perf data, jitdumps, injected .so files, the
build-id cache) goes to a private temporary directory that is removed at
the end, and the /tmp/perf-PID.map, /tmp/jit-PID.dump and
/tmp/jitted-PID-*.so files of the programs a test started are deleted.
Session runs ljperf with HOME pointing into its directory (so a write to
~/.debug would show). Missing perf, Chromium or build outputs make tests
FAIL with a message, never skip.
"""

import glob
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

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ljperf import resolve as ljresolve
from ljperf import perfscript
from ljperf import remote as ljremote
from ljperf.heapsnap import BadSnapshot, Snapshot


def jitdump_under_test():
    """The jitdump reader the emitter tests check, loaded from its file:
    $LJP_JITDUMP_PY (a mutated copy, to show a test fails) or
    ljperf/jitdump.py. It imports only the standard library."""
    import importlib.util
    path = os.environ.get("LJP_JITDUMP_PY") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "ljperf", "jitdump.py")
    spec = importlib.util.spec_from_file_location("jitdump", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["jitdump"] = mod
    spec.loader.exec_module(mod)
    return mod


def tmp_files(pid):
    """What the emitter writes in /tmp for process PID when LUAJIT_PERF_DIR
    is unset: its perf map, its jitdump and the jitdump's .inline file."""
    return ["/tmp/perf-%d.map" % pid, "/tmp/jit-%d.dump" % pid,
            "/tmp/jit-%d.dump.inline" % pid]


def dump_pids(d):
    """Pids of the processes that wrote a jitdump under D (a test's
    LUAJIT_PERF_DIR): its programs and the children they forked, which
    get their files at fork."""
    pids = set()
    for f in glob.glob(os.path.join(d, "**", "jit-*.dump"), recursive=True):
        m = re.search(r"jit-(\d+)\.dump$", f)
        if m:
            pids.add(int(m.group(1)))
    return pids


def remove_tmp_files(pids):
    """Removes tmp_files() of each of PIDS (processes the test started)."""
    for pid in pids:
        for f in tmp_files(pid):
            try:
                os.unlink(f)
            except OSError:
                pass


class TestFailure(Exception):
    printed = False             # check() printed it already


def check(cond, msg):
    """Prints one result line; a failed one ends the test (TestFailure)."""
    print(("PASS: " if cond else "FAIL: ") + msg)
    sys.stdout.flush()
    if not cond:
        e = TestFailure(msg)
        e.printed = True
        raise e


def folded(path):
    """{stack: weight} of a folded file, or of DIR/profile.folded
    (ljperf.folded.load_folded, the package's one reader; a stack seen
    twice is summed)."""
    from ljperf.folded import load_folded
    if os.path.isdir(path):
        path = os.path.join(path, "profile.folded")
    out = {}
    for frames, w in load_folded(path):
        s = ";".join(frames)
        out[s] = out.get(s, 0) + w
    return out


def fail(msg):
    raise TestFailure(msg)


# ELF e_machine values (a jitdump header carries its target's too).
EM_X86_64, EM_AARCH64 = 62, 183


def elf_machine(path):
    """e_machine of a little-endian ELF file, from its header; None if PATH
    is not an ELF file."""
    with open(path, "rb") as f:
        head = f.read(20)
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    return int.from_bytes(head[18:20], "little")


def build_dir():
    return os.environ.get("LJPERF_BUILD") or os.path.join(ROOT, "build")


def built(*parts):
    """BUILD/PARTS..., failing the test if it is not there."""
    p = os.path.join(build_dir(), *parts)
    if not os.path.exists(p):
        fail("%s is not built (looked for %s)" % (parts[-1], p))
    return p


def binpath(name):
    return built("bin", name)


def ljperf_bin():
    return os.environ.get("LJPERF") or built("bin", "ljperf")


def need_perf():
    if not shutil.which("perf"):
        fail("perf is not installed (Debian package linux-perf)")


def need_perf_and_wrk():
    """The servers' tests under load: perf and wrk installed, perf usable."""
    for tool in ("perf", "wrk"):
        if not shutil.which(tool):
            fail("%s is not installed (.ci/packages, .ci/openresty-packages)" % tool)
    perf_event()


# Libraries Debian builds without frame pointers: a frame-pointer chain
# cannot be followed through their code, whatever the VM does.
NOFP_LIBS = ("/libc.so", "/libm.so", "/libgcc_s.so", "/ld-linux", "/libstdc++",
             "[vdso]")


def is_nofp_dso(dso):
    return bool(dso) and any(x in dso for x in NOFP_LIBS)


_event = None
# perf record waits up to a second after the workload ends for its BPF
# side-band thread to time out; these tests sample user space only.
NO_BPF_EVENT = "--no-bpf-event"


def perf_event():
    """User-space cycles if the machine has hardware counters, else the
    cpu-clock software event. Fails the test if perf cannot record at all."""
    global _event
    if _event is None:
        if not shutil.which("perf"):
            fail("perf is not installed (Debian package linux-perf)")
        for ev in ("cycles:u", "cpu-clock:u"):
            with tempfile.TemporaryDirectory() as d:
                r = subprocess.run(["perf", "record", "-q", "-N", NO_BPF_EVENT, "-e", ev,
                                    "-o", os.path.join(d, "p.data"), "true"],
                                   capture_output=True, text=True)
                if r.returncode == 0:
                    _event = ev
                    break
        else:
            fail("perf record does not work here: %s" % r.stderr.strip()[-300:])
    return _event


class PerfSession:
    """A temporary directory for one test's perf artefacts."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="ljperf-test-")
        self.pids = set()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        remove_tmp_files(self.pids | dump_pids(self.dir))
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def env(self, extra=None):
        e = dict(os.environ)
        e["LUAJIT_PERF_DIR"] = self.dir
        e.update(extra or {})
        return e

    def record(self, cmd, env=None, freq=2000, callgraph="fp", regs=None,
               mono=True, out="perf.data", check=True):
        """Runs CMD under perf record; returns (data path, program stdout)."""
        data = self.path(out)
        args = ["perf", "--buildid-dir", self.path(".debug"), "record", "-q",
                NO_BPF_EVENT, "-e", perf_event(), "-F", str(freq), "-g",
                "--call-graph", callgraph, "-o", data]
        if mono:
            args += ["-k", "mono"]
        if regs:
            args += ["--user-regs=" + regs]
        r = subprocess.run(args + ["--"] + list(cmd), env=self.env(env),
                           capture_output=True, text=True)
        if check and r.returncode != 0:
            fail("%s failed (%d): %s" % (" ".join(cmd), r.returncode,
                                         (r.stderr or r.stdout)[-500:]))
        if not os.path.exists(data):
            fail("perf record wrote no data: " + r.stderr[-300:])
        return data, r.stdout

    def inject(self, data):
        out = data + ".jit"
        r = subprocess.run(["perf", "--buildid-dir", self.path(".debug"),
                            "inject", "--jit", "-i", data, "-o", out],
                           capture_output=True, text=True)
        if r.returncode != 0:
            fail("perf inject --jit failed: " + r.stderr[-500:])
        return out

    def script_text(self, data, fields="comm,pid,tid,time,ip,sym,dso",
                    extra=()):
        r = subprocess.run(["perf", "--buildid-dir", self.path(".debug"),
                            "script", "-i", data, "-F", fields] + list(extra),
                           capture_output=True, text=True)
        if r.returncode != 0:
            fail("perf script failed: " + r.stderr[-500:])
        return r.stdout

    def samples(self, data, fields="comm,pid,tid,time,ip,sym,dso", extra=()):
        text = self.script_text(data, fields, extra)
        out = list(perfscript.iter_samples(text.split("\n")))
        for s in out:
            if s.pid is not None:
                self.pids.add(s.pid)
        if not out:
            fail("perf recorded no samples")
        return out

    def dump(self, pid):
        """The jitdump of PID as an ljresolve.Dump (fails if missing)."""
        p = os.path.join(self.dir, "jit-%d.dump" % pid)
        if not os.path.exists(p):
            fail("no jitdump %s (is LUAJIT_PERF on?)" % p)
        return ljresolve.load_dump(p)


def main_window(samples, mainsym="main"):
    """Samples taken while main runs: between the first and the last sample
    whose chain contains MAINSYM (perf callchains include the leaf)."""
    idx = [i for i, s in enumerate(samples)
           if any(f[1] == mainsym for f in s.frames)]
    if not idx:
        return []
    return samples[idx[0]:idx[-1] + 1]


def has_sym(sample, sym):
    return any(f[1] == sym for f in sample.frames)


def syms(sample):
    return [f[1] for f in sample.frames]


def time_ns(sample):
    return perfscript.time_to_ns(sample.time)[0] if sample.time else 0


def run(cmd, env=None, timeout=None, **kw):
    """Runs CMD to its end with text output captured (a CompletedProcess).
    It runs in a session of its own: on TIMEOUT seconds the whole session
    (e.g. perf and the program it records) is killed and the test fails
    with one line."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True, **kw)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        fail("%s did not finish within %s s" % (" ".join(map(str, cmd)), timeout))
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


class Session:
    """A temporary directory for a test of ljperf, the processes the test
    started, and cleanup."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="ljperf-test-")
        self.home = os.path.join(self.dir, "home")
        os.mkdir(self.home)
        self.pids = set()
        self.procs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for pid in self.pids:
            for f in tmp_files(pid) + glob.glob("/tmp/jitted-%d-*.so" % pid):
                try:
                    os.unlink(f)
                except OSError:
                    pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, *names):
        return os.path.join(self.dir, *names)

    def env(self, extra=None, drop=()):
        e = dict(os.environ)
        e["HOME"] = self.home
        e.pop("LUAJIT_PERF", None)
        e.pop("LUAJIT_PERF_DIR", None)
        for k in drop:
            e.pop(k, None)
        e.update(extra or {})
        return e

    def ljperf(self, args, env=None, timeout=240, prefix=(), python=None):
        """Runs ljperf (with PYTHON, default ours); returns CompletedProcess (text)."""
        cmd = list(prefix) + [python or sys.executable, ljperf_bin()] + list(args)
        r = subprocess.run(cmd, env=env or self.env(), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=timeout)
        print("$ ljperf %s  -> %d" % (" ".join(args), r.returncode))
        for line in (r.stderr or "").splitlines():
            print("  | " + line)
        self.note_dir_pids(args)
        return r

    def note_dir_pids(self, args):
        """Remember the pids of the jitdumps of an output directory."""
        if "-o" in args:
            d = args[args.index("-o") + 1]
            for p in glob.glob(os.path.join(d, "jit-*.dump")):
                s = os.path.basename(p)[4:-5]
                if s.isdigit():
                    self.pids.add(int(s))

    def start(self, cmd, env=None, **kw):
        p = subprocess.Popen(cmd, env=env or self.env(), **kw)
        self.procs.append(p)
        self.pids.add(p.pid)
        return p

    def stop(self, p):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


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


# -- The remote switch's control blocks, and ljperf heap -p against a server ---

def block_state(pid):
    """[control block fields] of PID (one per VM copy; nginx has one)."""
    return [ljremote.Block(pid, a).read() for a in ljremote.find_blocks(pid)]


def is_off(pid):
    st = block_state(pid)
    return bool(st) and all(c["nremote"] == 0 and c["ack"] == c["seq"] for c in st)


def is_on(pid):
    return any(c["nremote"] > 0 for c in block_state(pid))


def load_snapshot(path):
    """PATH as an ljperf.heapsnap.Snapshot; a file that does not load fails."""
    try:
        return Snapshot(path)
    except BadSnapshot as e:
        fail(str(e))


def has_function(snap, chunk):
    """Does SNAP hold a function of CHUNK (its heap is the program's)?"""
    return any(snap.lua_type(i) == "function" and chunk in snap.name(i)
               for i in range(snap.n))


def kill_when_asked(proc, pid, timeout=30.0):
    """SIGKILLs PROC (an ljperf heap) as soon as PID's control block has a new
    request (seq moved); returns the seconds that took (None: never)."""
    seq0 = [c["seq"] for c in block_state(pid)]
    t0 = time.monotonic()
    asked = None
    while proc.poll() is None and time.monotonic() < t0 + timeout:
        if [c["seq"] for c in block_state(pid)] != seq0:
            asked = time.monotonic() - t0
            break
        time.sleep(0.001)
    proc.kill()
    proc.wait()
    return asked


def heap_leftovers(outdir, pids):
    """After a killed ljperf heap: (the files in OUTDIR and the PIDS'
    /tmp/ljperf-heap-PID-* files, the complete ones among them). The
    complete ones must load; those in /tmp are removed."""
    left = sorted(glob.glob(os.path.join(outdir, "*")) +
                  [f for p in pids for f in glob.glob("/tmp/ljperf-heap-%d-*" % p)])
    complete = [f for f in left if not f.endswith(".tmp")]
    for f in complete:
        load_snapshot(f)
    remove_heap_files(pids)
    return left, complete


def timed_stderr(proc, timeout=120):
    """Waits for PROC (killed if it is still running after TIMEOUT s):
    (its stderr, the seconds it took from here)."""
    t0 = time.monotonic()
    try:
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return err, time.monotonic() - t0


def report_heap_kill(outdir, pids, asked, off, off_wait, who):
    """Reports a SIGKILLed ljperf heap (ASKED: seconds until it asked, or
    None; OFF: whether WHO was off again within OFF_WAIT s): no partial
    file (heap_leftovers). True if all three hold."""
    left, complete = heap_leftovers(outdir, pids)
    ok = report(asked is not None, "ljperf heap asked after %.2f s: SIGKILLed" % (asked or 0))
    ok = report(complete == left,
                "no partial file: %d complete snapshot(s) left, each loads (%s)"
                % (len(left), ", ".join(os.path.basename(f) for f in left))) and ok
    return report(off, "within %.0f s %s off again (nremote 0, ack == seq)"
                  % (off_wait, who)) and ok


def remove_heap_files(pids):
    """Removes the remote snapshots PIDS (processes the test started) left in /tmp."""
    for p in pids:
        for f in glob.glob("/tmp/ljperf-heap-%d-*" % p):
            os.unlink(f)


def wait_for(cond, timeout=10.0, step=0.05):
    t = time.monotonic() + timeout
    while time.monotonic() < t:
        if cond():
            return True
        time.sleep(step)
    return cond()


def frames_of(fold):
    names = set()
    for s in fold:
        names.update(s.split(";"))
    return names


def has_frame(names, prefix):
    return any(n == prefix or n.startswith(prefix + "@") or n.startswith(prefix + "_[")
               for n in names)


def meta(d):
    with open(os.path.join(d, "ljperf.json")) as f:
        return json.load(f)


def last_line(text):
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def report(ok, msg):
    """Prints one result line; returns ok."""
    print(("PASS: " if ok else "FAIL: ") + msg)
    sys.stdout.flush()
    return ok


def main(test):
    """Runs TEST(): it fails by raising TestFailure (fail, check) or by
    returning a false value other than None (report's results); exit
    status 0 and OK otherwise."""
    try:
        ok = test()
    except TestFailure as e:
        if not e.printed:
            print("FAIL: " + str(e))
        sys.exit(1)
    if ok is not None and not ok:
        sys.exit(1)
    print("OK")
    sys.exit(0)
