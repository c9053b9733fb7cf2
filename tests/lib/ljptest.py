"""Support for ljperf tests that run programs under real perf.

Everything a test writes (perf data, jitdumps, injected .so files, the
build-id cache) goes to a private temporary directory that is removed at
the end, and /tmp/perf-PID.map files of the programs a test started are
deleted. perf problems make tests FAIL with a message, never skip.
"""

import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ljperf import resolve as ljresolve
from ljperf import perfscript


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
    pass


def folded(path):
    """{stack: weight} of a folded file (ljperf.folded.load_folded, the
    package's one reader; a stack seen twice is summed)."""
    from ljperf.folded import load_folded
    out = {}
    for frames, w in load_folded(path):
        s = ";".join(frames)
        out[s] = out.get(s, 0) + w
    return out


def fail(msg):
    raise TestFailure(msg)


def build_dir():
    return os.environ.get("LJPERF_BUILD") or os.path.join(ROOT, "build")


def binpath(name):
    p = os.path.join(build_dir(), "bin", name)
    if not os.path.exists(p):
        fail("%s not built (looked in %s)" % (name, p))
    return p


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


def report(ok, msg):
    """Prints one result line; returns ok."""
    print(("PASS: " if ok else "FAIL: ") + msg)
    sys.stdout.flush()
    return ok


def main(test):
    """Runs test() -> bool; exit status 0 only if it returned True."""
    try:
        ok = test()
    except TestFailure as e:
        print("FAIL: " + str(e))
        sys.exit(1)
    sys.exit(0 if ok else 1)
