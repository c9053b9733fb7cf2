"""ljperf's attached processes (`record -p`, `--nginx`): who each one is and
where its files are, as the process itself names them (docs/remote-switch.md,
Files and Containers).

A process in another pid namespace knows itself by its NSpid (the last
field of that line of /proc/PID/status) and writes /tmp/perf-NSPID.map and
$LUAJIT_PERF_DIR/jit-NSPID.dump in its own mount namespace; for a host
process NSPID is PID and the paths are ours. Either way we reach them through
/proc/PID/root (allowed to whoever may ptrace the process, as /proc/PID/mem).
The directories are opened when ljperf starts and held open: a container's
private /tmp goes away with its last process, an open directory keeps its
files readable (and removable) after the process exited. A root directory
held open would not: the container's mounts are detached from it then.

Attaching (below Target): the pids to attach to, the remote switch
(ljperf.remote) written into them and held on while perf records, what is
said about those that did not switch, and their files collected into the
output directory afterwards.
"""

import os
import shutil
import subprocess

from ljperf import children, remote
from ljperf.messages import Fail, say
from ljperf.perfcmd import perf_argv, privileged
from ljperf.procs import children_of, proc_alive, proc_uid
from ljperf.remote import ns_pid
from ljperf.resolve import MAP_DIR, dump_path, map_name, map_path


def proc_environ(pid):
    """PID's environment as it was started ({} if unreadable)."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    env = {}
    for item in raw.split(b"\0"):
        k, eq, v = item.partition(b"=")
        if eq:
            env[k.decode("utf-8", "replace")] = v.decode("utf-8", "replace")
    return env


def mapped_dump(pid, nspid):
    """The jit-NSPID.dump PID has mapped (its path as PID sees it), or None."""
    suffix = "/jit-%d.dump" % nspid
    try:
        with open("/proc/%d/maps" % pid) as f:
            for line in f:
                parts = line.rstrip("\n").split(None, 5)
                if len(parts) == 6 and parts[5].endswith(suffix):
                    return parts[5]
    except OSError:
        pass
    return None


def same_mount_ns(pid):
    try:
        return os.readlink("/proc/self/ns/mnt") == os.readlink("/proc/%d/ns/mnt" % pid)
    except OSError:
        return True


class Target:
    """One attached process: PID (ours), NSPID (its own), its environment,
    the jitdump it writes already (DUMP_SEEN, as it names it) and the
    directory it writes one into, /tmp and that directory held open."""

    def __init__(self, pid):
        self.pid = pid
        self.nspid = ns_pid(pid)
        self.env = proc_environ(pid)
        self.dump_seen = mapped_dump(pid, self.nspid)
        self.dump_dir = (os.path.dirname(self.dump_seen) if self.dump_seen else
                         self.env.get("LUAJIT_PERF_DIR") or "/tmp")
        self.foreign = self.nspid != pid or not same_mount_ns(pid)
        self.dirs = {}
        for d in ("/tmp", self.dump_dir):
            self._dir(d)

    def _dir(self, d):
        """Descriptor of directory D as the process sees it, or None."""
        if d not in self.dirs:
            base = "/proc/%d/root" % self.pid if d.startswith("/") else \
                   "/proc/%d/cwd/" % self.pid
            try:
                self.dirs[d] = os.open(base + d, os.O_RDONLY | os.O_DIRECTORY |
                                       os.O_CLOEXEC)
            except OSError:
                self.dirs[d] = None
        return self.dirs[d]

    def child(self, pid):
        """A process PID this one started while recorded and that exited
        since, if it left a jitdump where this one writes its own; None. Only
        in our pid namespace: in another one its own pid, which names its
        files, went with it."""
        d = os.path.dirname(self.dump_path())
        fd = self._dir(d)
        if self.nspid != self.pid or fd is None:
            return None
        try:
            os.stat("jit-%d.dump" % pid, dir_fd=fd)
        except OSError:
            return None
        c = Target.__new__(Target)
        c.pid = c.nspid = pid
        c.env, c.dump_seen, c.dump_dir, c.foreign = self.env, None, d, self.foreign
        c.dirs = {k: os.dup(v) for k, v in self.dirs.items() if v is not None}
        return c

    def close(self):
        for fd in self.dirs.values():
            if fd is not None:
                os.close(fd)
        self.dirs = {}

    def refuses(self):
        """LUAJIT_PERF_REMOTE=0 in its environment: its VM ignores the switch."""
        return self.env.get("LUAJIT_PERF_REMOTE") == "0"

    def shown(self, path):
        """PATH (as the process names it) as a user reaches it from here."""
        return "/proc/%d/root%s" % (self.pid, path) if self.foreign else path

    def dump_path(self):
        """Where its jitdump is (alive: where it has it mapped), as it names it."""
        seen = mapped_dump(self.pid, self.nspid)
        d = os.path.dirname(seen) if seen else self.dump_dir
        return dump_path(d, self.nspid)

    def files(self):
        """[(directory as it names it, file name)] of what recording makes
        in it: the jitdump, its .inline, the perf map."""
        dump = self.dump_path()
        d, name = os.path.split(dump)
        return [(d, name), (d, name + ".inline"), (MAP_DIR, map_name(self.nspid))]

    def copy(self, d, name, dst):
        """Copies file NAME of its directory D to DST; False if it has none."""
        fd = self._dir(d)
        if fd is None:
            return False
        try:
            src = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=fd)
        except OSError:
            return False
        with os.fdopen(src, "rb") as f, open(dst, "wb") as out:
            shutil.copyfileobj(f, out)
        return True

    def remove(self, d, name):
        fd = self._dir(d)
        if fd is not None:
            try:
                os.unlink(name, dir_fd=fd)
            except OSError:
                pass

    def remove_injected(self, since):
        """Removes the jitted-NSPID-N.so files perf inject wrote next to its
        jitdump (in its own file system) at SINCE or later."""
        d = os.path.dirname(self.dump_path())
        fd = self._dir(d)
        if fd is None:
            return
        prefix = "jitted-%d-" % self.nspid
        for name in os.listdir(fd):
            if name.startswith(prefix) and name.endswith(".so"):
                try:
                    if os.stat(name, dir_fd=fd).st_mtime >= since - 1:
                        os.unlink(name, dir_fd=fd)
                except OSError:
                    pass


# -- Attaching (-p, --nginx): docs/remote-switch.md -----------------------------------

NOT_YET = 1.0       # seconds after which ljperf names the pids not switched on yet
NO_BLOCK = "no ljperf control block in it (not the ljperf-patched LuaJIT)"
REFUSES = "LUAJIT_PERF_REMOTE=0 in its environment"


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
            targets.append(Target(p))
    except BaseException:
        close_targets(targets)
        raise
    return targets


def close_targets(targets):
    for t in targets:
        t.close()


def switch_on(targets, wanted, mem_rate=None):
    """Writes the remote switch's requests (with allocation samples every
    MEM_RATE bytes if given) into the WANTED targets that do not refuse it,
    and returns at once (perf starts next): the switch says per pid when it
    has switched on. Returns (the switch, {pid: why it never will}).
    Refuses in one line when no target can have Lua frames."""
    asked = [t.pid for t in wanted if not t.refuses()]
    on_already = {t.pid for t in wanted if t.dump_seen}

    def switched(pid, seconds):
        if pid not in on_already:
            say("pid %d: switched recording on after %.2f s" % (pid, seconds))
    sw = remote.RemoteSwitch(asked, on_switch=switched, mem_rate=mem_rate)
    try:
        noblock = set(sw.start())
    except remote.RemoteError as e:
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
    for p in sorted(sw.no_mem):
        say("pid %d cannot sample its allocations: its LuaJIT predates ljperf's "
            "allocation samples (rebuild it with this ljperf); recording its CPU "
            "profile only" % p)
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
    """The pids with samples in DATA (perf script -F pid)."""
    r = children.run(perf_argv(perf, outdir, "script", "-i", data, "-F", "pid"),
                       stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, errors="replace")
    return {int(x) for x in r.stdout.split() if x.isdigit()}


def family(pids):
    """PIDS and their children now (what sample_pids finds without perf,
    but for children that have exited)."""
    return set(pids) | {c for p in pids for c in children_of(p)}


def recorders(targets, on, pids):
    """The processes whose files to collect: the TARGETS that record (ON:
    switched on, or writing a jitdump already), and the other PIDS with
    samples (processes they started while recorded) that write one."""
    out = [t for t in targets if t.pid in on or t.dump_seen]
    known = {t.pid for t in targets}
    for p in sorted(pids - known):
        if proc_alive(p):
            child = Target(p)
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
    its .inline) and perf map of each of PROCS (Target). Returns
    those that had a jitdump."""
    got = []
    for t in procs:
        (d, dump), (_, inline), (m, pmap) = t.files()
        try:
            if not t.copy(d, dump, os.path.join(outdir, "jit-%d.dump" % t.pid)):
                continue
            t.copy(d, inline, os.path.join(outdir, "jit-%d.dump.inline" % t.pid))
            t.copy(m, pmap, map_path(outdir, t.pid))
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
