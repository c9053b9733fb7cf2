"""Processes, from /proc: children, liveness, owner. The one implementation
(ljperf, examples/openresty/serve.py and the tests use it)."""

import os

from ljperf.messages import read_text


def children_of(ppid):
    """Pids of PPID's children, sorted (from /proc/*/stat: the one
    implementation; examples/openresty/serve.py and the tests import it)."""
    kids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        st = read_text("/proc/%s/stat" % d)
        r = st.rfind(")")
        if r < 0:
            continue
        f = st[r + 2:].split()
        if len(f) > 1 and f[1] == str(ppid):
            kids.append(int(d))
    return sorted(kids)


def proc_alive(pid):
    """PID exists and is not a zombie (exited, not yet reaped)."""
    st = read_text("/proc/%d/stat" % pid)
    r = st.rfind(")")
    return r >= 0 and st[r + 2:r + 3] not in ("Z", "X", "")


def proc_uid(pid):
    for line in read_text("/proc/%d/status" % pid).splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[2])     # effective uid
    return None
