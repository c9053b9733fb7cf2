"""The kick (docs/remote-switch.md, The kick): a process whose Lua states reach no
poll of the remote switch (a loop that never allocates, a trace that never
exits) is made to reach one, once.

With every thread of the process stopped (ptrace SEIZE and INTERRUPT: no
signal is sent; a thread blocked in a call such as epoll_wait sees EINTR, as
with a debugger's attach), for each Lua state the control block lists:
- its instruction dispatch entries are pointed at ->vm_perfkick, which puts
  them back and polls before the state runs its next instruction (the
  entries are 8-byte words: written only while no thread runs, since a
  write through /proc/PID/mem need not be atomic);
- a thread that runs its trace code (or C code a trace called: stepped
  until it is back in the trace) is made to call lj_vm_perfinject there, as
  a signal handler would be called: it saves every register, polls as a GC
  step of the trace would, and returns to the same instruction.
Then every thread is let go, with the signal it was about to get, if any.
Trace machine code is never written.
"""

import ctypes
import os
import struct
import time

PTRACE_SINGLESTEP, PTRACE_GETREGS, PTRACE_SETREGS = 9, 12, 13
PTRACE_DETACH, PTRACE_SEIZE, PTRACE_INTERRUPT = 17, 0x4206, 0x4207
WALL, WNOHANG = 0x40000000, 1
SIGTRAP = 5
STOP_WAIT = 1.0         # seconds a thread may take to stop
LATE_WAIT = 30.0        # seconds we wait at most for a late one to let it go
MAX_STATES = 256        # list entries we follow at most
MAX_AREAS = 4096        # trace code areas per state we follow at most
MAX_STEPS = 5000        # single steps of a thread in C called from a trace
STACK_SCAN = 2048       # bytes above rsp where a trace's return address may be
STEP_WAIT = 0.02        # seconds one step may take (else: a blocking call)
RED_ZONE = 128          # bytes below rsp the interrupted code may use
NO_SYSCALL = (1 << 64) - 1  # orig_rax of a thread stopped in user code

REG_NAMES = ("r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi "
             "orig_rax rip cs eflags rsp ss fs_base gs_base ds es fs gs").split()


class Regs(ctypes.Structure):       # struct user_regs_struct (x86-64)
    _fields_ = [(n, ctypes.c_ulonglong) for n in REG_NAMES]


class KickError(Exception):
    """The process cannot be kicked."""


class KickRetry(Exception):
    """Not this time (a thread did not stop in time)."""


_libc = None


def libc():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p,
                                 ctypes.c_void_p]
        _libc.ptrace.restype = ctypes.c_long
    return _libc


def ptrace(req, tid, addr=None, data=None):
    if libc().ptrace(req, tid, addr, data) == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def wait_stop(tid, timeout=STOP_WAIT):
    """Waits for TID's next stop: (stopped, signal, event); (False, 0, 0) if
    it exited or did not stop in time."""
    t0 = time.monotonic()
    while True:
        try:
            got, status = os.waitpid(tid, WALL | WNOHANG)
        except ChildProcessError:
            return False, 0, 0
        if got == tid:
            if os.WIFSTOPPED(status):
                return True, os.WSTOPSIG(status), status >> 16
            return False, 0, 0              # exited
        t = time.monotonic() - t0
        if t >= timeout:
            return False, 0, 0
        if t > 0.002:                       # a step takes microseconds
            time.sleep(0.0005)


class Stopped:
    """Every thread of PID stopped (a context manager: all let go at exit,
    each with the signal it was about to receive)."""

    def __init__(self, pid):
        self.pid = pid
        self.tids = {}              # tid -> signal to deliver when let go
        self.late = set()           # traced, but not stopped (yet)

    def __enter__(self):
        try:
            while True:
                new = [t for t in self._tasks() if t not in self.tids]
                if not new:
                    return self
                for tid in new:
                    self._stop(tid)
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def _tasks(self):
        try:
            return sorted(int(t) for t in os.listdir("/proc/%d/task" % self.pid))
        except OSError:
            return []

    def _stop(self, tid):
        try:
            ptrace(PTRACE_SEIZE, tid)
        except OSError as e:
            if e.errno == 3:                # ESRCH: the thread ended
                self.tids[tid] = None
                return
            raise KickError("cannot ptrace pid %d (%s)" % (self.pid, e.strerror))
        self.tids[tid] = 0
        try:
            ptrace(PTRACE_INTERRUPT, tid)
        except OSError:
            self.tids[tid] = None
            return
        stopped, sig, event = wait_stop(tid)
        if not stopped:
            self._lost(tid)
            raise KickRetry("thread %d of pid %d did not stop" % (tid, self.pid))
        if event == 0 and sig != SIGTRAP:   # a signal-delivery stop: keep it
            self.tids[tid] = sig

    def _let_go(self, tid, sig):
        try:
            ptrace(PTRACE_DETACH, tid, None, sig)
        except OSError:
            pass

    def _lost(self, tid):
        """TID did not stop in time (or exited): it is let go when it does."""
        self.tids[tid] = None
        if os.path.isdir("/proc/%d/task/%d" % (self.pid, tid)):
            self.late.add(tid)

    def __exit__(self, *exc):
        for tid, sig in self.tids.items():
            if sig is not None:
                self._let_go(tid, sig)
        for tid in self.late:               # a stop is pending: wait for it
            stopped, sig, event = wait_stop(tid, LATE_WAIT)
            if stopped:
                self._let_go(tid, 0 if event or sig == SIGTRAP else sig)
        self.tids, self.late = {}, set()
        return False

    def threads(self):
        return [t for t, s in self.tids.items() if s is not None]

    def regs(self, tid):
        r = Regs()
        ptrace(PTRACE_GETREGS, tid, None, ctypes.addressof(r))
        return r

    def set_regs(self, tid, r):
        ptrace(PTRACE_SETREGS, tid, None, ctypes.addressof(r))

    def step(self, tid):
        """One instruction; False if TID stopped for something else, or
        did not come back at once (then it is stopped again first)."""
        ptrace(PTRACE_SINGLESTEP, tid)
        stopped, sig, event = wait_stop(tid, STEP_WAIT)
        if not stopped and not os.path.isdir("/proc/%d/task/%d" % (self.pid, tid)):
            self.tids[tid] = None           # it exited
            return False
        if not stopped:
            try:
                ptrace(PTRACE_INTERRUPT, tid)
            except OSError:
                self.tids[tid] = None
                return False
            stopped, sig, event = wait_stop(tid)
            if not stopped:
                self._lost(tid)
                return False
            if sig == SIGTRAP or event:
                return False
        if event:                           # a stop of ours, not a signal
            return False
        if sig != SIGTRAP:                  # deliver it when let go
            self.tids[tid] = self.tids[tid] or sig
            return False
        return True


class Mem:
    def __init__(self, pid):
        self.f = open("/proc/%d/mem" % pid, "r+b", buffering=0)

    def read(self, addr, n):
        self.f.seek(addr)
        b = self.f.read(n)
        if len(b) != n:
            raise OSError("short read at 0x%x" % addr)
        return b

    def u64(self, addr):
        return struct.unpack("<Q", self.read(addr, 8))[0]

    def write(self, addr, data):
        self.f.seek(addr)
        self.f.write(data)

    def close(self):
        self.f.close()


class States:
    """The Lua states a control block lists, read while the process is
    stopped: where their dispatch tables and trace code are."""

    def __init__(self, mem, ctl):
        self.ctl = ctl
        self.states, self.areas, self.stubs = [], [], []
        self.in_trace = False               # a state runs a trace
        g, seen = ctl["states"], set()
        while g and g not in seen and len(seen) < MAX_STATES:
            seen.add(g)
            self.states.append(g)
            if ctl["o_mcarea"]:
                self._jit(mem, g)
            g = mem.u64(g + ctl["o_next"])

    def _jit(self, mem, g):
        c = self.ctl
        if struct.unpack("<i", mem.read(g + c["o_vmstate"], 4))[0] >= 0:
            self.in_trace = True
        area = mem.u64(g + c["o_mcarea"])
        n = 0
        while area and n < MAX_AREAS:       # MCLink {next, size} heads each
            nxt, size = struct.unpack("<QQ", mem.read(area, 16))
            self.areas.append((area, area + size, g))
            area, n = nxt, n + 1
        raw = mem.read(g + c["o_stubs"], 8 * c["nstubgr"])
        self.stubs += [s for s in struct.unpack("<%dQ" % c["nstubgr"], raw) if s]

    def trace_state(self, addr):
        """The state whose trace code ADDR is in (not an exit stub), or None."""
        c = self.ctl
        if any(0 <= addr - s < c["stubsp"] * (c["nstub"] + 8) for s in self.stubs):
            return None                     # about to exit: it polls then
        for lo, hi, g in self.areas:
            if lo <= addr < hi:
                return g
        return None


def kick(pid, read_ctl):
    """Kicks the states of the control block READ_CTL() reads in PID once.
    Returns {"states": n, "traces": threads sent into lj_vm_perfinject};
    raises KickError (never: no ptrace) or KickRetry (not this time)."""
    mem = Mem(pid)
    try:
        with Stopped(pid) as stopped:
            ctl = read_ctl()
            if ctl["lock"]:
                return {"states": 0, "traces": 0}
            st = States(mem, ctl)
            entry = struct.pack("<Q", ctl["kick"]) * ctl["nkick"]
            for g in st.states:
                mem.write(g + ctl["o_disp"], entry)
            moved = 0
            for tid in stopped.threads():
                if ctl["inject"] and inject(stopped, mem, st, tid):
                    moved += 1
            return {"states": len(st.states), "traces": moved}
    except OSError as e:                    # a thread or the process ended
        raise KickRetry("pid %d: %s" % (pid, e.strerror or e))
    finally:
        mem.close()


def called_from_trace(mem, st, sp):
    """A return address into trace code in the STACK_SCAN bytes above SP:
    the thread runs C code that a trace called."""
    if not st.in_trace:
        return False
    try:
        raw = mem.read(sp, STACK_SCAN)
    except OSError:
        return False
    return any(st.trace_state(a) is not None
               for a in struct.unpack("<%dQ" % (STACK_SCAN // 8), raw))


def inject(stopped, mem, st, tid):
    """If TID runs trace code (or C code a trace called, stepped until it
    returns to it): makes it call lj_vm_perfinject before the instruction
    it was at. True if it does."""
    r = stopped.regs(tid)
    if r.orig_rax != NO_SYSCALL:
        return False                        # in a system call: not in a trace
    g = st.trace_state(r.rip)
    steps = 0
    if g is None and not called_from_trace(mem, st, r.rsp):
        return False
    while g is None and steps < MAX_STEPS:
        if not stopped.step(tid):
            return False
        r = stopped.regs(tid)
        g = st.trace_state(r.rip)
        steps += 1
    if g is None:
        return False
    sp = r.rsp - RED_ZONE - 16
    mem.write(sp, struct.pack("<QQ", r.rip, g))
    r.rsp, r.rip = sp, st.ctl["inject"]
    stopped.set_regs(tid, r)
    return True
