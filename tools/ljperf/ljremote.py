"""ljperf's remote switch: turns recording (map, jitdump, frames) on in a
running ljperf-patched LuaJIT process and off again (docs/remote.md).

The patched VM has one control block per process (emitter/lj_perf.h,
LJPerfCtl) in the initialised writable data of the file that holds it (the
executable, libluajit-5.1.so, nginx, tarantool ...). We find it by its magic
in the process's file-backed writable mappings and write it through
/proc/PID/mem: exactly who may ptrace the process may do this. Every
lua_State of the process polls it at its GC steps and trace exits and acts
when `seq` changed. A request holds while its lease (`deadline`,
CLOCK_MONOTONIC ns) has not lapsed: we renew it every RENEW seconds; if we
die, the process switches off by itself at its first safe point after it.
"""

import os
import struct
import threading
import time

MAGIC = b"\x7fLuaJIT-perfctl\0"
VERSION = 1
# magic, version, size, seq, want, deadline, target, owner, ack, nremote
LAYOUT = struct.Struct("<16sIIIIqIIIi")
OFS_SEQ, OFS_DEADLINE, OFS_TARGET = 24, 32, 40
PARTS_ALL = 0x07            # LUAJIT_PERF_MAP | JITDUMP | FRAMES
LEASE = 3.0                 # seconds a request holds without renewal
RENEW = 1.0                 # seconds between renewals
ACK_WAIT = 10.0             # seconds the process gets to reach a safe point
SCAN_MAX = 256 << 20        # bytes of one mapping we scan at most


class RemoteError(Exception):
    pass


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def ns_pid(pid):
    """PID as the process itself sees it (last NSpid field: its own pid
    namespace), which the VM compares with getpid()."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError):
        pass
    return pid


def find_blocks(pid):
    """Addresses of the control blocks in PID (file-backed rw mappings)."""
    try:
        with open("/proc/%d/maps" % pid) as f:
            maps = f.read().splitlines()
    except OSError as e:
        raise RemoteError("cannot read /proc/%d/maps: %s" % (pid, e.strerror or e))
    found = []
    try:
        mem = open("/proc/%d/mem" % pid, "rb", buffering=0)
    except OSError as e:
        raise RemoteError("cannot open /proc/%d/mem (%s): ljperf needs the right to "
                          "ptrace pid %d (same user, and kernel.yama.ptrace_scope "
                          "0 or 1 with ljperf not a descendant: run as that user "
                          "with ptrace_scope 0, or as root)"
                          % (pid, e.strerror or e, pid))
    with mem:
        for line in maps:
            parts = line.split(None, 5)
            if len(parts) < 6 or not parts[1].startswith("rw") or \
               not parts[5].startswith("/"):
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            size = min(hi - lo, SCAN_MAX)
            try:
                mem.seek(lo)
                data = mem.read(size)
            except OSError as e:
                if not found and getattr(e, "errno", None) in (1, 13):
                    raise RemoteError("cannot read pid %d's memory (%s): ljperf needs "
                                      "the right to ptrace it" % (pid, e.strerror or e))
                continue
            at = data.find(MAGIC)
            while at >= 0:
                if at % 8 == 0 and at + LAYOUT.size <= len(data):
                    f = LAYOUT.unpack_from(data, at)
                    if f[1] == VERSION and f[2] == LAYOUT.size:
                        found.append(lo + at)
                at = data.find(MAGIC, at + 1)
    return found


class Block:
    def __init__(self, pid, addr):
        self.pid, self.addr = pid, addr

    def read(self):
        with open("/proc/%d/mem" % self.pid, "rb", buffering=0) as m:
            m.seek(self.addr)
            f = LAYOUT.unpack(m.read(LAYOUT.size))
        keys = ("magic", "version", "size", "seq", "want", "deadline", "target",
                "owner", "ack", "nremote")
        return dict(zip(keys, f))

    def write(self, ofs, fmt, *vals):
        with open("/proc/%d/mem" % self.pid, "r+b", buffering=0) as m:
            m.seek(self.addr + ofs)
            m.write(struct.pack(fmt, *vals))


class RemoteSwitch:
    """Switch recording on in PIDS (start), keep the lease (a thread), and
    off (stop, idempotent). Only blocks we asked are touched again."""

    def __init__(self, pids, say):
        self.pids, self.say = pids, say
        self.asked = []             # (Block, seq we wrote)
        self._stop = threading.Event()
        self._thread = None
        self.lock = threading.Lock()

    def start(self):
        plan = []
        for pid in self.pids:
            addrs = find_blocks(pid)
            if not addrs:
                plan.append((pid, None))
                continue
            for a in addrs:
                b = Block(pid, a)
                c = b.read()
                if c["owner"] and c["owner"] != os.getpid() and \
                   c["target"] == ns_pid(pid) and c["want"] and \
                   c["deadline"] > now_ns() and os.path.isdir("/proc/%d" % c["owner"]):
                    raise RemoteError("pid %d is already being recorded by another ljperf "
                                      "(pid %d); wait for it to end" % (pid, c["owner"]))
                plan.append((pid, b))
        for pid, b in plan:
            if b is None:
                continue
            c = b.read()
            seq = (c["seq"] + 1) & 0x7fffffff or 1
            deadline = now_ns() + int(LEASE * 1e9)
            # The request first, seq last: the VM reads seq, then the rest.
            b.write(28, "<Iq", PARTS_ALL, deadline)
            b.write(OFS_TARGET, "<II", ns_pid(pid), os.getpid())
            b.write(OFS_SEQ, "<I", seq)
            self.asked.append((b, seq))
        if self.asked:
            self._thread = threading.Thread(target=self._renew, daemon=True)
            self._thread.start()
        return [pid for pid, b in plan if b is None]

    def wait_on(self, timeout=ACK_WAIT, pids=None):
        """Pids (of PIDS, default all) whose process has not switched on
        within TIMEOUT seconds."""
        end = time.monotonic() + timeout
        left = [(b, seq) for b, seq in self.asked if pids is None or b.pid in pids]
        while left and time.monotonic() < end:
            nxt = []
            for b, seq in left:
                try:
                    c = b.read()
                except OSError:
                    continue                # exited
                if not (c["ack"] == seq and c["nremote"] > 0):
                    nxt.append((b, seq))
            left = nxt
            if left:
                time.sleep(0.02)
        return sorted({b.pid for b, _ in left})

    def _renew(self):
        while not self._stop.wait(RENEW):
            with self.lock:
                for b, seq in self.asked:
                    try:
                        c = b.read()
                        if c["seq"] == seq:     # still our request
                            b.write(OFS_DEADLINE, "<q", now_ns() + int(LEASE * 1e9))
                    except OSError:
                        pass

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self.lock:
            for b, seq in self.asked:
                try:
                    c = b.read()
                    if c["seq"] != seq:
                        continue
                    b.write(28, "<Iq", 0, 0)
                    b.write(OFS_TARGET, "<II", 0, 0)
                    b.write(OFS_SEQ, "<I", (seq + 1) & 0x7fffffff or 1)
                except OSError:
                    pass                    # the process is gone
            self.asked = []
