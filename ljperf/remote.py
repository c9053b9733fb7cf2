"""ljperf's remote switch: turns recording (map, jitdump, frames, and with
--mem allocation samples) on in a
running ljperf-patched LuaJIT process and off again (docs/remote-switch.md).

The patched VM has one control block per process (vm_patch/src/
lj_perfremote.h, LJPerfCtl) in the initialised writable data of the file that holds it (the
executable, libluajit-5.1.so, nginx, tarantool ...). We find it by its magic
in the process's file-backed writable mappings and write it through
/proc/PID/mem: exactly who may ptrace the process may do this. Every
lua_State of the process polls it at its GC steps and trace exits and acts
when `seq` changed: we do not wait for that (perf samples from the start),
a thread watches the acks and says when each process has switched on. A
process that has not switched all its Lua states on after KICK_AFTER while
it uses CPU (a loop that reaches no poll) is kicked (kick.py). A
request holds while its lease (`deadline`, CLOCK_MONOTONIC ns) has not
lapsed: the same thread renews it every RENEW seconds; if we die, the
process switches off by itself at its first safe point after it.
"""

import errno
import os
import struct
import threading
import time

from ljperf import kick

MAGIC = b"\x7fLuaJIT-perfctl\0"
VERSION = 3
KICK_VERSION = 2            # the first with the kick's fields
MEM_VERSION = 3             # the first that samples allocations (mem_rate)
# vm_patch/src/lj_perfremote.h, LJPerfCtl. Version 1 (VMs before the kick) is the
# first 10 fields: it is switched the same way, but never kicked. Version 2
# has the same size as 3: mem_rate was unused.
FIELDS = (("magic", "16s"), ("version", "I"), ("size", "I"), ("seq", "I"), ("want", "I"),
          ("deadline", "q"), ("target", "I"), ("owner", "I"), ("ack", "I"),
          ("nremote", "i"), ("nstates", "I"), ("lock", "I"), ("states", "Q"),
          ("kick", "Q"), ("inject", "Q"), ("o_next", "I"), ("o_disp", "I"),
          ("nkick", "I"), ("o_mcarea", "I"), ("o_stubs", "I"), ("nstubgr", "I"),
          ("stubsp", "I"), ("nstub", "I"), ("o_vmstate", "i"), ("mem_rate", "I"))
LAYOUT = struct.Struct("<" + "".join(f for _, f in FIELDS))
LAYOUT_V1 = struct.Struct("<" + "".join(f for _, f in FIELDS[:10]))
LAYOUTS = {1: LAYOUT_V1, KICK_VERSION: LAYOUT, VERSION: LAYOUT}
OFS_SEQ, OFS_WANT, OFS_DEADLINE, OFS_TARGET, OFS_MEM_RATE = 24, 28, 32, 40, 124
PARTS_ALL = 0x07            # LUAJIT_PERF_MAP | JITDUMP | FRAMES
PART_MEM = 0x10             # LUAJIT_PERF_MEM
PART_HEAP = 0x20            # a heap snapshot per Lua state (lj_perfint.h PERF_HEAP;
                            # a VM without it acks and does nothing)
LEASE = 3.0                 # seconds a request holds without renewal
RENEW = 1.0                 # seconds between renewals
ACK_POLL = 0.02             # seconds between looks at the acks
SCAN_MAX = 256 << 20        # bytes of one mapping we scan at most
KICK_AFTER = 0.1            # seconds after a request before the first kick
KICK_EVERY = 0.1            # seconds between kicks of one process
KICK_UNTIL = 5.0            # seconds after a request after which we stop kicking


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
                if at % 8 == 0 and at + LAYOUT_V1.size <= len(data):
                    version, size = struct.unpack_from("<II", data, at + 16)
                    if size == getattr(LAYOUTS.get(version), "size", None):
                        found.append(lo + at)
                at = data.find(MAGIC, at + 1)
    return found


class Block:
    def __init__(self, pid, addr):
        self.pid, self.addr = pid, addr

    def read(self):
        """The block's fields (those a version 1 block lacks: 0)."""
        with open("/proc/%d/mem" % self.pid, "rb", buffering=0) as m:
            m.seek(self.addr)
            raw = m.read(LAYOUT.size)
        if len(raw) < LAYOUT_V1.size:       # a zombie: no memory left
            raise OSError(errno.ESRCH, "pid %d has exited" % self.pid)
        version = struct.unpack_from("<I", raw, 16)[0]
        layout = LAYOUT if version >= KICK_VERSION and len(raw) == LAYOUT.size else LAYOUT_V1
        c = dict.fromkeys((k for k, _ in FIELDS), 0)
        c.update(zip((k for k, _ in FIELDS), layout.unpack_from(raw)))
        return c

    def write(self, ofs, fmt, *vals):
        with open("/proc/%d/mem" % self.pid, "r+b", buffering=0) as m:
            m.seek(self.addr + ofs)
            m.write(struct.pack(fmt, *vals))


class RemoteSwitch:
    """Switch recording on in PIDS (start), keep the lease and watch for the
    acks (a thread), and off (stop, idempotent). Only blocks we asked are
    touched again. ON_SWITCH(pid, seconds) is called (from the thread) when
    a process has switched on, SECONDS after its request."""

    def __init__(self, pids, on_switch=None, mem_rate=None, parts=PARTS_ALL):
        self.pids, self.on_switch, self.parts = pids, on_switch, parts
        self.mem_rate = mem_rate    # bytes: allocation samples wanted too
        self.no_mem = set()         # pids whose VM cannot sample allocations
        self.asked = []             # (Block, seq we wrote)
        self.switched = {}          # pid -> seconds from request to ack
        self.gone = set()           # pids whose memory we can no longer read
        self.complete = {}          # pid -> seconds until every Lua state had
        self.kicks = {}             # pid -> kicks done
        self.kick_error = {}        # pid -> why it cannot be kicked
        self._cpu = {}              # pid -> CPU ticks at the last look
        self._kicked = {}           # pid -> time of the last kick
        self._t0 = None
        self._stop = threading.Event()
        self._thread = None
        self.lock = threading.Condition()

    def start(self):
        """Writes the requests; returns the pids without a control block."""
        plan = []
        for pid in self.pids:
            addrs = find_blocks(pid)
            if not addrs:
                plan.append((pid, None))
                continue
            for a in addrs:
                b = Block(pid, a)
                check_free(b)
                plan.append((pid, b))
        self._t0 = time.monotonic()
        for pid, b in plan:
            if b is not None:
                mem = self.mem_rate
                if mem and b.read()["version"] < MEM_VERSION:
                    self.no_mem.add(pid)
                    mem = None
                self.asked.append((b, ask(b, pid, mem, self.parts)))
        if self.asked:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return [pid for pid, b in plan if b is None]

    def switch_times(self):
        """pid -> when (time.monotonic(), perf's -k mono clock) the process
        was seen switched on: every Lua state of it if that happened, else
        its first. Its samples before keep their host frames only (lj_merge
        --from): their Lua frames would lack their callers."""
        with self.lock:
            out = {p: self._t0 + s for p, s in self.switched.items()}
            out.update({p: self._t0 + s for p, s in self.complete.items()})
            return out

    def pending(self):
        """Asked pids that have not switched on (yet)."""
        with self.lock:
            return sorted({b.pid for b, _ in self.asked} - set(self.switched))

    def wait_on(self, timeout, every_state=False):
        """Waits up to TIMEOUT seconds for every asked pid to switch on (a
        Lua state of it, or with EVERY_STATE all of them); returns the ones
        that did not."""
        end = time.monotonic() + timeout
        with self.lock:
            while time.monotonic() < end and self._waiting(every_state):
                self.lock.wait(end - time.monotonic())
        if every_state:
            return sorted({b.pid for b, _ in self.asked} - set(self.complete))
        return self.pending()

    def _waiting(self, every_state=False):
        done = self.complete if every_state else self.switched
        return any(b.pid not in done and b.pid not in self.gone for b, _ in self.asked)

    def _run(self):
        renew = time.monotonic() + RENEW
        for b, _ in self.asked:
            self._cpu[b.pid] = cpu_ticks(b.pid)
        while True:
            wait = renew - time.monotonic()
            with self.lock:
                if self._waiting() or self._to_kick():
                    wait = min(wait, ACK_POLL)
            if self._stop.wait(max(wait, 0.0)):
                return
            self._check_acks()
            self._kick()
            if time.monotonic() >= renew:
                self._renew()
                renew = time.monotonic() + RENEW

    def _to_kick(self):
        """Asked blocks whose states are not all switched on yet, while we
        may still kick them."""
        if time.monotonic() - self._t0 >= KICK_UNTIL:
            return []
        return [b for b, _ in self.asked if b.pid not in self.complete and
                b.pid not in self.gone and b.pid not in self.kick_error]

    def _kick(self):
        t = time.monotonic()
        if t - self._t0 < KICK_AFTER:
            return
        for b in self._to_kick():
            if t - self._kicked.get(b.pid, 0.0) < KICK_EVERY:
                continue
            cpu = cpu_ticks(b.pid)
            if cpu == self._cpu.get(b.pid):
                continue                    # runs no code: nothing to kick
            self._cpu[b.pid] = cpu
            self._kicked[b.pid] = t
            try:
                if b.read()["version"] < KICK_VERSION:
                    self.kick_error[b.pid] = "its LuaJIT predates the kick"
                    continue
                kick.kick(b.pid, b.read)
                self.kicks[b.pid] = self.kicks.get(b.pid, 0) + 1
            except kick.KickError as e:
                self.kick_error[b.pid] = str(e)
            except (kick.KickRetry, OSError):
                pass                        # not now, or exited: the acks say so
            except Exception as e:          # never the lease's thread: say it
                self.kick_error[b.pid] = "internal error: %r" % (e,)

    def _check_acks(self):
        new = []
        with self.lock:
            for b, seq in self.asked:
                if (b.pid in self.complete) or b.pid in self.gone:
                    continue
                try:
                    c = b.read()
                except OSError:
                    self.gone.add(b.pid)            # exited
                    continue
                if c["ack"] == seq and c["nremote"] > 0 and b.pid not in self.switched:
                    self.switched[b.pid] = time.monotonic() - self._t0
                    new.append(b.pid)
                if c["ack"] == seq and c["nremote"] >= c["nstates"]:
                    self.complete[b.pid] = time.monotonic() - self._t0
            self.lock.notify_all()
        for pid in new:
            if self.on_switch is not None:
                self.on_switch(pid, self.switched[pid])

    def _renew(self):
        with self.lock:
            for b, seq in self.asked:
                try:
                    if b.read()["seq"] == seq:      # still our request
                        b.write(OFS_DEADLINE, "<q", lease_end())
                except OSError:
                    pass

    def stop(self, wait=0.0):
        """Switches the processes off (idempotent). WAIT: seconds to wait for
        them to ack (each switches off at its next safe point, and then
        flushes the frees its allocation samples hold back)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        written = []
        with self.lock:
            for b, seq in self.asked:
                try:
                    if b.read()["seq"] != seq:
                        continue
                    b.write(OFS_WANT, "<Iq", 0, 0)
                    b.write(OFS_TARGET, "<II", 0, 0)
                    b.write(OFS_SEQ, "<I", next_seq(seq))
                    written.append((b, next_seq(seq)))
                except OSError:
                    pass                    # the process is gone
            self.asked = []
        end = time.monotonic() + wait
        while written and time.monotonic() < end:
            time.sleep(ACK_POLL)
            written = [(b, seq) for b, seq in written if not acked(b, seq)]


def acked(b, seq):
    """Block B's process has answered request SEQ (or is gone)."""
    try:
        return b.read()["ack"] == seq
    except OSError:
        return True


def cpu_ticks(pid):
    """User and system CPU ticks PID used so far (None: gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def lease_end():
    return now_ns() + int(LEASE * 1e9)


def next_seq(seq):
    return (seq + 1) & 0x7fffffff or 1


def check_free(b):
    """Refuses a block another live ljperf holds a live request in."""
    c = b.read()
    if c["owner"] and c["owner"] != os.getpid() and c["target"] == ns_pid(b.pid) and \
       c["want"] and c["deadline"] > now_ns() and os.path.isdir("/proc/%d" % c["owner"]):
        raise RemoteError("pid %d is already being recorded by another ljperf "
                          "(pid %d); wait for it to end" % (b.pid, c["owner"]))


def ask(b, pid, mem_rate=None, parts=PARTS_ALL):
    """Writes a request for PARTS (and allocation samples every MEM_RATE
    bytes) into B; returns its seq."""
    seq = next_seq(b.read()["seq"])
    # The request first, seq last: the VM reads seq, then the rest.
    if mem_rate:
        b.write(OFS_MEM_RATE, "<I", mem_rate)
    b.write(OFS_WANT, "<Iq", parts | (PART_MEM if mem_rate else 0), lease_end())
    b.write(OFS_TARGET, "<II", ns_pid(pid), os.getpid())
    b.write(OFS_SEQ, "<I", seq)
    return seq
