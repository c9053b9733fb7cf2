"""ljperf's attached processes (`record -p`, `--nginx`): who each one is and
where its files are, as the process itself names them (docs/remote.md,
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
"""

import os
import shutil

from ljremote import ns_pid


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
        return os.path.join(d, "jit-%d.dump" % self.nspid)

    def files(self):
        """[(directory as it names it, file name)] of what recording makes
        in it: the jitdump, its .inline, the perf map."""
        dump = self.dump_path()
        d, name = os.path.split(dump)
        return [(d, name), (d, name + ".inline"), ("/tmp", "perf-%d.map" % self.nspid)]

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
