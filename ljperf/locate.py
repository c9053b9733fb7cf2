"""Where ljperf's pieces are: the directory it was started from (build/bin,
through the symlink build/bin/ljperf), the flame graph renderer beside it
(build/share/ljperf), and lj_merge (next to it, else in the source tree)."""

import os
import sys

from ljperf.messages import Fail

SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def bin_dir():
    """The directory of the started script, symlinks not resolved."""
    return os.path.dirname(os.path.abspath(sys.argv[0]))


def share_dir():
    env = os.environ.get("LJPERF_SHARE")
    cands = [env] if env else []
    cands.append(os.path.join(bin_dir(), os.pardir, "share", "ljperf"))
    for d in cands:
        if d and os.path.isfile(os.path.join(d, "d3-flamegraph.min.js")):
            return os.path.normpath(d)
    raise Fail("flame graph renderer not found in %s: build the project (cmake --build; "
               "it runs npm ci for d3-flame-graph) or set LJPERF_SHARE"
               % os.path.normpath(cands[-1]))


def lj_merge_argv():
    p = os.path.join(bin_dir(), "lj_merge")
    if not os.path.exists(p):
        p = os.path.join(SOURCE_ROOT, "perf-script", "lj_merge.py")
    if not os.path.exists(p):
        raise Fail("lj_merge not found (looked next to ljperf and in perf-script/)")
    return [sys.executable, p]
