"""perf as ljperf runs it: finding it, whether this user may sample with
it, and its command lines.

Every perf command ljperf (and pprof's converter) runs keeps its build-id
cache in the output directory, never in ~/.debug: perf_argv() builds the
`perf --buildid-dir DIR/.debug SUBCOMMAND ...` prefix, the one place that
says so. record_argv() adds what the ljperf-patched LuaJIT needs (-k mono
for perf inject --jit, frame-pointer call graphs, the machine's PC register)."""

import functools
import os
import shutil
import subprocess
import tempfile

from ljperf import children, offcpu, vmregs
from ljperf.messages import Fail, read_text

PARANOID_FILE = "/proc/sys/kernel/perf_event_paranoid"


def need_perf():
    perf = shutil.which("perf")
    if not perf:
        raise Fail("perf not found in PATH: install linux-perf "
                   "(Debian: apt-get install linux-perf)")
    return perf


def perf_argv(perf, outdir, sub, *args):
    """PERF SUB ARGS with the build-id cache in OUTDIR/.debug."""
    return [perf, "--buildid-dir", os.path.join(outdir, ".debug"), sub] + list(args)


@functools.lru_cache(maxsize=None)
def no_bpf_event(perf):
    """("--no-bpf-event",) if this perf has it (perf >= 5.1): without it perf
    record waits up to a second after the program ends, or after SIGINT, for
    its BPF side-band thread, which ljperf does not need (it samples user
    space)."""
    try:
        r = children.run([perf, "record", "-h"], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, errors="replace", timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return ("--no-bpf-event",) if "--no-bpf-event" in r.stdout + r.stderr else ()


# perf's ring buffer, in pages per CPU, for events that come in bursts: a
# full GC frees thousands of sampled blocks at once (their traps), a busy
# server switches often. perf's default (512 KiB) overflowed in about one
# --mem run of 50 here, losing frees; where the user may lock that much.
BURST_MMAP_PAGES = 1024


def may_lock_memory():
    """Root or CAP_IPC_LOCK: perf may map more than perf_event_mlock_kb."""
    return has_capability(1 << 14)


def record_argv(perf, outdir, data, event, freq, mem=False, off_cpu=False, arch=None):
    """perf record of EVENT at FREQ Hz into DATA, as ljperf records, and
    with MEM the allocation samples too, with OFF_CPU the context switches
    and the switch records: the target (-- CMD, or -p PIDS) follows. ARCH:
    the vmregs.Arch recorded on (default: this machine's, else x86-64's)."""
    arch = arch or vmregs.host_arch()[1] or vmregs.ARCHES["x86_64"]
    events = ["-e", event] + (["-e", vmregs.EVENT] if mem else []) + \
        (["-e", offcpu.EVENT, "--switch-events"] if off_cpu else [])
    regs = arch.pc_user_regs + ("," + vmregs.USER_REGS if mem else "")
    burst = ["-m", str(BURST_MMAP_PAGES)] if (mem or off_cpu) and may_lock_memory() else []
    return (perf_argv(perf, outdir, "record", "-q") + list(no_bpf_event(perf)) +
            events + burst + ["-k", "mono", "-g", "--call-graph", "fp",
                              "--user-regs=" + regs, "-F", str(freq), "-o", data])


def event_name(perf, outdir, data):
    """The event DATA holds (the first perf evlist prints), or None."""
    try:
        r = children.run(perf_argv(perf, outdir, "evlist", "-i", data),
                           stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, errors="replace")
    except OSError:
        return None
    lines = [ln.strip() for ln in r.stdout.splitlines() if ln.strip()]
    return lines[0] if r.returncode == 0 and lines else None


# -- May this user sample? -------------------------------------------------------

def has_capability(bits):
    """Whether this process's effective capabilities hold one of BITS (root
    if /proc does not say)."""
    for line in read_text("/proc/self/status").splitlines():
        if line.startswith("CapEff:"):
            try:
                return bool(int(line.split()[1], 16) & bits)
            except (IndexError, ValueError):
                break
    return os.geteuid() == 0


def privileged():
    """Root, or CAP_PERFMON / CAP_SYS_ADMIN: perf_event_paranoid does not apply."""
    return has_capability(1 << 21 | 1 << 38)


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
        r = children.run(perf_argv(perf, d, "record", "-q", "-N") + list(no_bpf_event(perf)) +
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


def check_off_cpu():
    """--off-cpu: a context switch is sampled in the kernel (schedule()),
    so its samples need kernel sampling: root (CAP_PERFMON) or
    perf_event_paranoid <= 1 (at 2 perf records the switch records but
    silently no switch sample)."""
    if privileged():
        return
    value = paranoid_value()
    if value is None or value > 1:
        raise Fail("--off-cpu needs kernel samples (a context switch is sampled in "
                   "the kernel's schedule()): run as root (or with CAP_PERFMON), or "
                   "sudo sysctl kernel.perf_event_paranoid=1 (it is %s)"
                   % ("unreadable" if value is None else value))


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
