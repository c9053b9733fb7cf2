"""ljperf: one command from a LuaJIT program to a flame graph.

  ljperf record [-o DIR] [-F HZ] [--duration S] [--mem] -- CMD [ARGS...]
  ljperf record -p PID[,PID...] [-o DIR] [-F HZ] [--duration S]
  ljperf record --nginx MASTER_PID [-o DIR] [-F HZ] [--duration S]
  ljperf report DIR
  ljperf diff BEFORE AFTER [-o FILE] [--absolute] [--format html|folded]
             (BEFORE, AFTER: DIRs, or folded files such as DIR/alloc.folded)
  ljperf heap FILE | ljperf heap diff BASE TARGET [FINAL] | ljperf heap -p PID -o DIR
             (heap snapshots written by jit.perf.heapsnapshot: who keeps it)

`record` runs CMD (or attaches to PID) under `perf record` with what the
ljperf-patched LuaJIT needs (-k mono, -g --call-graph fp, --user-regs=r13;
x21 on aarch64, where -p, --nginx and --mem are not there yet), then `perf
inject --jit`, `perf script` and lj_merge, and writes into DIR:

  flamegraph.html   interactive flame graph, one self-contained file
  profile.folded    folded stacks (flamegraph.pl, speedscope, inferno ...)
  profile.kinds     what each frame is (lj_merge --kinds)
  profile.pb.gz     pprof profile.proto (go tool pprof, Pyroscope, Parca)
  perf.data         the recording; perf.jit.data after perf inject --jit
  jit-PID.dump      the jitdump, cut to the code samples hit (perf inject
                    makes one .so per code load); jit-PID.dump.full: all of it;
                    jit-PID.dump.inline: the Lua functions each trace inlined
  jitted-PID-N.so, perf-PID.map, .debug/ (build-id cache),
  ljperf.json (what was recorded), *.log (perf's own messages)

`--mem` also samples the program's GC allocations (every 512 KiB on average,
--mem-rate) with their full stacks and tracks which the GC frees:

  alloc.html        what allocated how many bytes (flame graph, bytes)
  inuse.html        what holds the sampled bytes live at the end of the
                    last completed GC cycle (--inuse now: not freed by the end)
  alloc.folded, inuse.folded, mem.kinds, mem.json (bytes per object kind)
  mem.pb.gz         pprof heap profile: alloc_objects, alloc_space,
                    inuse_objects, inuse_space, label kind (go tool pprof)
                    (docs/memory.md)

`report DIR` renders profile.folded and flamegraph.html again from DIR's
perf data (e.g. with other --lines/--keep-vm options). `--format speedscope`
(record, report) also writes profile.speedscope.json.

`diff BEFORE AFTER` (two DIRs or folded files) writes a differential flame
graph: frames red where their share grew, blue where it shrank (diff.py).

Messages go to stderr; the program's own output is left alone. Exit status:
0 profile written (whatever the program's own exit status, which is
printed), 1 error (one line on stderr), 2 bad arguments.
"""

# The command line of ljperf (build/bin/ljperf, tools/ljperf/ljperf.py): its
# arguments and their checks; the work is in ljperf.record (record, report)
# and ljperf.diff. The docstring above is the top of `ljperf --help`.

import argparse
import os
import shutil
import sys

from ljperf import diff, heap, record, vmregs
from ljperf.attach import attach_pids
from ljperf.children import Ended, ending_signals
from ljperf.messages import PROG, Fail, say
from ljperf.perfcmd import check_access, check_off_cpu, need_perf
from ljperf.finish import FORMATS

DEFAULT_EVENT = "cycles:u"   # perf falls back to cpu-clock:u without a PMU
WALL_EVENT = "cpu-clock"     # --wall: a clock, kernel time included
CLOCKS = ("cpu-clock", "task-clock")
DEFAULT_HZ = 999
MEM_RATE_MIN, MEM_RATE_MAX = 64, (1 << 32) - 1   # LJ_PERFMEM_MINRATE, MAXRATE


def resolve_command(name):
    if os.sep in name:
        if not os.path.exists(name):
            raise Fail("command not found: %s" % name)
        if os.path.isdir(name) or not os.access(name, os.X_OK):
            raise Fail("cannot run %s: not an executable file" % name)
        return name
    found = shutil.which(name)
    if not found:
        raise Fail("command not found: %s" % name)
    return found


def mem_rate(text):
    """--mem-rate BYTES: a whole number of bytes, or with a k/m/g suffix
    (KiB, MiB, GiB), within what the VM takes (lj_perfmem.h)."""
    t = text.strip().lower().rstrip("b")
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(t[-1:], 1)
    if mult > 1:
        t = t[:-1]
    try:
        v = int(t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError("not a byte count: %r (e.g. 524288, 512k, 1m)"
                                         % text)
    if not MEM_RATE_MIN <= v <= MEM_RATE_MAX:
        raise argparse.ArgumentTypeError("%r: the mean gap between two allocation "
                                         "samples must be %d bytes to 4 GiB - 1"
                                         % (text, MEM_RATE_MIN))
    return v


def record_args(opts):
    """The command to run ([] to attach) after the checks argparse cannot
    make (Fail, exit status 2)."""
    cmd = list(opts.cmd or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    attaching = opts.attach is not None or opts.nginx is not None
    if attaching and cmd:
        raise Fail("give either -p PID or a command, not both (--nginx is an -p)", 2)
    if not attaching and not cmd:
        raise Fail("nothing to record: give -- CMD [ARGS...] or -p PID", 2)
    if opts.freq <= 0:
        raise Fail("-F: the frequency must be > 0", 2)
    if opts.duration is not None and opts.duration <= 0:
        raise Fail("--duration: must be > 0 seconds", 2)
    if opts.mem_rate is not None and not opts.mem:
        raise Fail("--mem-rate needs --mem", 2)
    if opts.wall:
        opts.off_cpu = True
        if opts.event and opts.event.split(":")[0].split("/")[0] not in CLOCKS:
            raise Fail("--wall adds CPU time to off-CPU time: -e must be a clock "
                       "(cpu-clock, task-clock), not %s" % opts.event, 2)
    return cmd


def check_arch(opts, host=None):
    """What ljperf records on this machine (HOST: (machine, vmregs.Arch or
    None), default this one's): one line and exit status 2 for the rest."""
    machine, arch = host or vmregs.host_arch()
    if arch is None:
        raise Fail("ljperf records on %s only, not on %s (lj_merge and `ljperf report` "
                   "read a recording anywhere)" % (" and ".join(vmregs.ARCHES), machine), 2)
    if (opts.attach is not None or opts.nginx is not None) and not arch.attach:
        raise Fail("-p/--nginx: attaching to a running process is x86-64 only for now "
                   "(its kick moves threads by x86-64 registers): on %s, start the program "
                   "with ljperf record -- CMD" % machine, 2)
    if opts.mem and not arch.mem:
        raise Fail("--mem: allocation samples are x86-64 only for now (the VM's traps "
                   "carry x86-64 registers): on %s, record without --mem" % machine, 2)


def cmd_record(opts):
    cmd = record_args(opts)
    check_arch(opts)
    perf = need_perf()
    event = opts.event or (WALL_EVENT if opts.wall else DEFAULT_EVENT)
    check_access(perf, event)
    if opts.off_cpu:
        check_off_cpu()
    try:
        if not cmd:
            return record.record_attach(opts, perf, event, attach_pids(opts))
        resolve_command(cmd[0])
        return record.record_launch(opts, perf, event, cmd)
    except KeyboardInterrupt:
        raise Fail("interrupted", 130)


# -- Command line --------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise Fail("%s: error: %s (see %s --help)" % (self.prog, message, self.prog), 2,
                   raw=True)


RECORD_HELP = """\
Runs CMD under perf record, or attaches to a running process with -p, and
writes DIR/flamegraph.html and DIR/profile.folded (see `ljperf --help`).

CMD runs with LUAJIT_PERF=1 and LUAJIT_PERF_DIR=DIR, so its jitdump and the
files perf inject makes stay in DIR; its /tmp/perf-PID.map is moved into DIR
after the recording. CMD must use the ljperf-patched LuaJIT. Its stdin,
stdout and stderr are yours; its exit status is printed, and the profile is
written whatever it is.

Stopping: when CMD exits; after --duration S seconds (perf stops and sends
CMD SIGTERM; SIGKILL if it is still there 10 s later); or Ctrl-C (perf and
CMD both get it, the profile is still written). SIGTERM or SIGHUP to
ljperf stop perf as Ctrl-C does but render nothing: `ljperf report DIR`
does that later (exit status 128 + the signal's number). However ljperf
ends, perf ends with it.

-p PID[,PID...] attaches to running processes of the ljperf-patched LuaJIT.
ljperf asks those that do not record yet to switch recording on (no
LUAJIT_PERF or profiling code needed; through /proc/PID/mem, so you must be
allowed to ptrace them) and starts perf at once: each process switches at
its next GC step or trace exit (ljperf says when, or at the end that it
never did, and why), its samples before that have their host frames. Off
again when ljperf ends; if ljperf is killed they switch off by themselves
within 3 s (docs/ljperf.md). A process that had recording on keeps it. A
pid that can never switch (not the patched LuaJIT, or LUAJIT_PERF_REMOTE=0)
is recorded with its host frames; if none can, ljperf refuses at once. Its
jitdump (found in /proc/PID/maps, or where LUAJIT_PERF_DIR in
/proc/PID/environ, default /tmp, says) and perf map are copied into DIR, not
removed (the process still writes them; removed if it exited and ljperf had
switched it on). A process in a container (other pid and mount namespaces)
is reached through /proc/PID/root. Recording ends after --duration (from
perf's start), on Ctrl-C, or when the processes exit; a process that exits
is said so, its samples kept. --nginx MASTER_PID attaches to an nginx
master and its workers (switched on as above; a containerized one by its
pid here), and follows the processes it starts while recording (workers
after a reload, a new binary). Use --per-process for one tree per process. Workers started with LUAJIT_PERF get it from the master's
Lua VM; a new binary (SIGUSR2) gets only the variables of nginx's `env`
directives: add `env LUAJIT_PERF;`.

Permissions: ljperf samples user space only. Without root (CAP_PERFMON) that
needs kernel.perf_event_paranoid <= 2 (Debian kernels: 3 forbids all perf
use), and -p needs the process to run as your user. --off-cpu and --wall
sample each context switch in the kernel: root or paranoid <= 1."""


REPORT_HELP = """\
Renders DIR/profile.folded, DIR/profile.kinds and DIR/flamegraph.html again
from DIR/perf.jit.data (running perf inject --jit first if it is missing or
older than DIR/perf.data) and the jitdumps in DIR."""


MAIN_HELP = __doc__ + """
Flame graph colours (frame kinds)
  Lua function      green   interpreted Lua code (NAME@CHUNK:LINE, CHUNK:LINE)
  JIT trace         aqua    Lua code running as a compiled trace (NAME_[j])
  builtin           yellow  LuaJIT library functions (string.byte, ffi.meta___call)
  VM / runtime      purple  LuaJIT itself: lj_* (interpreter with --keep-vm,
                            GC, JIT compiler, FFI), lua_*/luaL_* C API
  C                 red     the host program and its libraries
  kernel            orange  kernel frames (only with a non-:u -e EVENT)
  process / all     grey    the root frames;  [unknown] and [no call chain]
                            (perf printed the sample without frames): light grey
  Search highlights matches in magenta. Click a frame to zoom in, click a
  frame below it (or Reset zoom) to zoom out.
"""


def add_render_options(p):
    g = p.add_argument_group("flame graph options (lj_merge)")
    g.add_argument("--lines", action="store_true",
                   help="Lua frames with their current line (LABEL:LINE)")
    g.add_argument("--keep-vm", action="store_true",
                   help="keep the VM's interpreter frames (lj_BC_*, lj_vm_*, ...)")
    g.add_argument("--per-process", action="store_true",
                   help="one tree per process (root frame comm-PID)")
    g.add_argument("--per-thread", action="store_true",
                   help="one tree per thread (root frame comm-PID/TID)")
    g.add_argument("--idle", action="store_true",
                   help="off-CPU and wall pages: keep [idle] (an event loop waiting "
                        "with no Lua frame), left out by default")
    g.add_argument("--format", metavar="FMT[,FMT]", type=formats, default=[],
                   help="also write these (comma list): speedscope "
                        "(DIR/profile.speedscope.json, for speedscope.app)")
    g.add_argument("--inuse", choices=("cycle", "now"), default="cycle",
                   help="memory profiles (--mem): in use means live at the end of the "
                        "most recent completed GC cycle (cycle, the default, as Go's "
                        "heap profiles), or not freed by the end of the recording (now)")
    g.add_argument("--mem-kinds", action="store_true",
                   help="memory profiles (--mem): the kind of object allocated as the "
                        "leaf frame ([table], [string], ...)")


def formats(text):
    fmts = [f for f in text.split(",") if f]
    for f in fmts:
        if f not in FORMATS:
            raise argparse.ArgumentTypeError("unknown format %r (known: %s)"
                                              % (f, ", ".join(FORMATS)))
    return fmts


def pid_list(text):
    try:
        pids = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("not a pid list: %r" % text)
    if not pids:
        raise argparse.ArgumentTypeError("no pid given")
    return pids


def make_parser():
    p = _Parser(prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
                description=MAIN_HELP)
    sub = p.add_subparsers(dest="command", metavar="{record,report,diff,heap}",
                           parser_class=_Parser)
    r = sub.add_parser("record", help="record a program (or a running process) and "
                                      "write its flame graph",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description=RECORD_HELP,
                       usage="%(prog)s [-o DIR] [-F HZ] [--duration S] [options] "
                             "-- CMD [ARGS...]\n"
                             "       %(prog)s -p PID [-o DIR] [-F HZ] [--duration S] "
                             "[options]\n"
                             "       %(prog)s --nginx MASTER_PID [-o DIR] [options]")
    r.add_argument("-o", "--output", metavar="DIR",
                   help="where everything goes (default: ./ljperf-YYYYmmdd-HHMMSS)")
    r.add_argument("-F", "--freq", metavar="HZ", type=int, default=DEFAULT_HZ,
                   help="samples per second (default: %d)" % DEFAULT_HZ)
    r.add_argument("--duration", metavar="S", type=float,
                   help="stop recording after S seconds (a started CMD is then "
                        "terminated, an attached process keeps running)")
    r.add_argument("-p", "--pid", dest="attach", metavar="PID[,PID...]", type=pid_list,
                   help="attach to these running processes instead of starting CMD "
                        "(recording is switched on in them, and off again after)")
    r.add_argument("--nginx", metavar="MASTER_PID", type=int,
                   help="attach to an nginx master and its workers (and the workers "
                        "a reload or binary upgrade starts while recording)")
    r.add_argument("--mem", action="store_true",
                   help="also sample GC allocations and track their frees: "
                        "alloc.html, inuse.html, alloc.folded, inuse.folded, mem.pb.gz "
                        "(docs/memory.md)")
    r.add_argument("--mem-rate", metavar="BYTES", type=mem_rate,
                   help="with --mem: one allocation sample per BYTES allocated, on "
                        "average (default: 512k; suffixes k, m, g)")
    r.add_argument("--off-cpu", action="store_true",
                   help="also record where threads wait: each context switch's stack "
                        "weighed by the time until the thread ran again, [blocked], "
                        "[preempted] or [idle]: offcpu.html, offcpu.folded, offcpu.pb.gz "
                        "(root or perf_event_paranoid <= 1; docs/offcpu.md)")
    r.add_argument("--wall", action="store_true",
                   help="--off-cpu, and CPU samples (-e cpu-clock, kernel time too) "
                        "plus off-CPU time in one profile: wall.html, wall.folded, "
                        "wall.pb.gz")
    r.add_argument("-e", "--event", metavar="EVENT",
                   help="perf event (default: %s, user space only; perf uses "
                        "cpu-clock:u where there are no hardware counters)" % DEFAULT_EVENT)
    add_render_options(r)
    r.add_argument("cmd", nargs=argparse.REMAINDER, metavar="CMD [ARGS...]",
                   help="the program to run (after --)")
    rp = sub.add_parser("report", help="render DIR's flame graph again",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        description=REPORT_HELP)
    rp.add_argument("dir", metavar="DIR", help="a directory made by ljperf record")
    add_render_options(rp)
    add_diff_parser(sub)
    h = sub.add_parser("heap", help="who keeps the memory: a heap snapshot's summary, "
                                    "or what is new between snapshots",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description=heap.__doc__.split("\n\n", 1)[1],
                       usage="%(prog)s FILE\n       %(prog)s diff BASE TARGET [FINAL]\n"
                             "       %(prog)s -p PID[,PID...] -o DIR\n"
                             "       %(prog)s --nginx MASTER_PID -o DIR")
    h.add_argument("args", nargs="*", metavar="FILE | diff BASE TARGET [FINAL]",
                   help="snapshots written by jit.perf.heapsnapshot")
    h.add_argument("-p", "--pid", dest="attach", metavar="PID[,PID...]", type=pid_list,
                   help="take a snapshot of every Lua state of these running processes")
    h.add_argument("--nginx", metavar="MASTER_PID", type=int,
                   help="take a snapshot of each worker of this nginx master, in turn")
    h.add_argument("-o", "--output", metavar="DIR",
                   help="with -p or --nginx: where the snapshots go")
    return p


def add_diff_parser(sub):
    d = sub.add_parser("diff", help="differential flame graph of two profiles",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description=diff.__doc__.split("\n\n", 1)[1].split(
                           "\nCalled by")[0])
    d.add_argument("before", metavar="BEFORE", help="ljperf output directory or folded file")
    d.add_argument("after", metavar="AFTER", help="ljperf output directory or folded file")
    d.add_argument("-o", "--output", metavar="FILE",
                   help="where to write (html default: ./diff.html; folded: stdout)")
    d.add_argument("--absolute", action="store_true",
                   help="compare raw weights, not shares of each profile's total")
    d.add_argument("--format", choices=("html", "folded"), default="html",
                   help="html page (default) or `STACK BEFORE AFTER` lines")
    d.add_argument("--unit", choices=("bytes",),
                   help="weights are bytes (found by itself for alloc.folded and "
                        "inuse.folded of ljperf record --mem)")


def main(argv=None):
    p = make_parser()
    opts = p.parse_args(argv)
    if opts.command == "record":
        return cmd_record(opts)
    if opts.command == "report":
        return record.report(opts)
    if opts.command == "diff":
        return diff.run(opts)
    if opts.command == "heap":
        return heap.run(opts, sys.stderr)
    p.print_help(sys.stderr)
    return 2


def entry():
    try:
        with ending_signals():
            rc = main()
    except Ended as e:
        if e.outdir:
            say("%s: the recording is in %s; `ljperf report %s` renders it"
                % (record.signame(e.sig), e.outdir, e.outdir))
        else:
            say("ended by %s" % record.signame(e.sig))
        rc = 128 + e.sig
    except Fail as e:
        if e.raw:
            sys.stderr.write(str(e) + "\n")
        else:
            say(str(e))
        rc = e.code
    except KeyboardInterrupt:
        say("interrupted")
        rc = 130
    except BrokenPipeError:
        rc = 141
    except SystemExit:
        raise
    except BaseException as e:          # never a traceback
        say("internal error: %s: %s" % (type(e).__name__, str(e).splitlines()[0]
                                         if str(e) else ""))
        rc = 3
    sys.exit(rc)
