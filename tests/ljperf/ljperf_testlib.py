"""Support for the ljperf tests (tests/ljperf/*.py).

Each test works in a private temporary directory (removed at the end), runs
ljperf with HOME pointing into it (so a write to ~/.debug would show), and
removes the /tmp/perf-PID.map, /tmp/jit-PID.dump and /tmp/jitted-PID-*.so
files of the processes it started. Missing perf, Chromium or build outputs
make tests FAIL with a message, never skip.
"""

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
from tests.lib import ljptest  # tmp_files: what a process leaves in /tmp


class TestFailure(Exception):
    printed = False


def fail(msg):
    raise TestFailure(msg)


def check(cond, msg):
    print(("PASS: " if cond else "FAIL: ") + msg)
    sys.stdout.flush()
    if not cond:
        e = TestFailure(msg)
        e.printed = True
        raise e


def build_dir():
    return os.environ.get("LJPERF_BUILD") or os.path.join(ROOT, "build")


def built(*parts):
    p = os.path.join(build_dir(), *parts)
    if not os.path.exists(p):
        fail("%s is not built (looked for %s)" % (parts[-1], p))
    return p


def ljperf_bin():
    return os.environ.get("LJPERF") or built("bin", "ljperf")


def need_perf():
    if not shutil.which("perf"):
        fail("perf is not installed (Debian package linux-perf)")


class Session:
    """A temporary directory, the processes a test started, and cleanup."""

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
            for f in ljptest.tmp_files(pid) + glob.glob("/tmp/jitted-%d-*.so" % pid):
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


def wait_for(cond, timeout=10.0, step=0.05):
    t = time.monotonic() + timeout
    while time.monotonic() < t:
        if cond():
            return True
        time.sleep(step)
    return cond()


def folded(d):
    """{stack: weight} of DIR/profile.folded."""
    return ljptest.folded(os.path.join(d, "profile.folded"))


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


def main(test):
    try:
        test()
    except TestFailure as e:
        if not e.printed:
            print("FAIL: " + str(e))
        sys.exit(1)
    print("OK")
    sys.exit(0)
