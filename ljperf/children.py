"""The processes ljperf starts (perf record, inject, script, evlist,
lj_merge) never outlive it, however it ends.

Invariants:
- Every child is started by popen() or run() here, from the main thread.
  Each asks the kernel for SIGTERM when ljperf dies (PR_SET_PDEATHSIG,
  even by SIGKILL): perf record then stops as on Ctrl-C, perf.data stays
  readable, and a program it started gets SIGTERM from it; the others just
  end. The kernel sends it when the *thread* that forked the child ends:
  hence the main thread only.
- SIGTERM and SIGHUP to ljperf raise Ended (ending_signals): the finally
  blocks run (perf stopped, processes switched off) and ljperf exits
  128 + SIG. While perf records, record.Recording stops it instead and
  record leaves the directory to `ljperf report`."""

import contextlib
import ctypes
import os
import signal
import subprocess

PR_SET_PDEATHSIG = 1          # <linux/prctl.h>
DEATH_SIGNAL = signal.SIGTERM
ENDING = (signal.SIGTERM, signal.SIGHUP)

# Looked up now, not in the forked child (a child may take no lock).
_prctl = ctypes.CDLL(None, use_errno=True).prctl
_prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                   ctypes.c_ulong)


def _dies_with(parent):
    def setup():
        _prctl(PR_SET_PDEATHSIG, DEATH_SIGNAL, 0, 0, 0)
        if os.getppid() != parent:        # it died before the prctl
            os.kill(os.getpid(), DEATH_SIGNAL)
    return setup


def popen(argv, **kw):
    """subprocess.Popen(ARGV, **KW), the child ending when ljperf does."""
    return subprocess.Popen(argv, preexec_fn=_dies_with(os.getpid()), **kw)


def run(argv, **kw):
    """subprocess.run(ARGV, **KW), the child ending when ljperf does."""
    return subprocess.run(argv, preexec_fn=_dies_with(os.getpid()), **kw)


class Ended(BaseException):
    """ljperf got SIGTERM or SIGHUP (SIG). Not an Exception: no `except
    Exception` may swallow it."""

    def __init__(self, sig, outdir=None):
        BaseException.__init__(self, sig)
        self.sig, self.outdir = sig, outdir


def _raise_ended(sig, frame):
    raise Ended(sig)


@contextlib.contextmanager
def ending_signals():
    """SIGTERM and SIGHUP raise Ended while this holds."""
    old = {s: signal.signal(s, _raise_ended) for s in ENDING}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
