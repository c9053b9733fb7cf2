"""lj_merge: fold `perf script` output into flame-graph stacks, with the Lua
frames of a ljperf-patched LuaJIT spliced into the host (C) stacks.

  perf record -k mono -g --call-graph fp --user-regs=r13 luajit app.lua
                                                  # aarch64: --user-regs=x21
  perf inject --jit -i perf.data -o perf.jit.data        # optional
  perf script -i perf.jit.data | lj_merge > out.folded
  flamegraph.pl out.folded > out.svg

perf script fields (-F) and what each enables
---------------------------------------------
  comm            root frame of every stack (required for useful output)
  pid, tid        per-process resolution (jit-PID.dump, perf-PID.map) and the
                  --pid / --tid roots. Plain `perf script` prints only the tid:
                  threads other than the main one are then mapped to their
                  process through the tids recorded in the jitdump files.
  time            picks the jitdump CODE_LOAD that was live at the sample's
                  time when code addresses are reused (without it the newest
                  load wins). With `-k mono` perf time is CLOCK_MONOTONIC
                  seconds, the jitdump timestamps are the same clock in ns.
  period          weights: each stack counts its period (e.g. ns for
                  cpu-clock); without it every sample counts 1.
  event           samples of the event with the most samples are kept (see --event).
  ip,sym,symoff,dso
                  the callchain (needs `perf record -g`). symoff is used to
                  place Lua frames inside their function for their lines
                  (--lines, pprof).
  uregs           with R13 recorded (`--user-regs=r13`; x21 on aarch64),
                  for --lines and pprof: the exact line running in the
                  innermost Lua function when the sample hit the interpreter
                  (R13, x21: the VM's bytecode PC; BX in recordings of
                  ljperf before 2026-11), else the function's frame record
                  only tells its first line.
  --show-task-events (not a field): fork, thread and exec events. A forked
                  child that loads no code of its own writes no jit-PID.dump:
                  with these events its frames are named from its parent's
                  dump (loads made before the fork), without them they stay
                  [unknown] unless perf inject named them.
  Recommended: perf script -F comm,pid,tid,time,period,event,ip,sym,symoff,dso,uregs \\
                 --show-task-events

Frames
------
  Lua functions  `NAME@CHUNK:LINE` or `CHUNK:LINE` (LINE = definition line);
                 with --lines `LABEL:CURLINE`: the line of the call for a
                 caller, the PC register's line for the running function, `?` when the
                 function has made no call and the PC register does not tell (no uregs,
                 or it runs a trace). pprof output carries that line (0 for
                 `?`) beside the name, with or without --lines. Named by
                 `perf inject --jit` (DSO jitted-PID-N.so) or, when perf prints [unknown], by
                 lj_merge from jit-PID.dump (or perf-PID.map) itself: the
                 output is the same with or without inject. The jitdump is
                 always preferred: it is time-aware. perf-PID.map is only a
                 fallback (no dump for that process): it has no time, and
                 when an address range is described again under a new name
                 (code freed and reloaded at the same address) perf applies
                 the FIRST line for the whole session, lj_merge the LAST;
                 either can be wrong for some samples.
  JIT traces     `TRACE_N::CHUNK:LINE::OWNER` becomes OWNER (`_[j]` appended
                 with --jit-tag); a caller frame of the same function right
                 below it (where the trace was entered) is merged into it.
                 Above OWNER come the Lua functions the trace inlined at the
                 sampled address (or at the call, for a trace that called C),
                 in call order, each a trace frame too, from
                 jit-PID.dump.inline next to the jitdump (without that file:
                 OWNER alone). Each one has its own line (--lines,
                 pprof). Frames that other traces made before jumping into this one are put
                 under it when the traces that jump in agree on them; a
                 trace that returned below the frame it started in shows the
                 caller it returned to.
  VM plumbing    lj_BC_*, lj_vm_*, lj_cont_*, lj_vmeta_*, lj_fff_* are dropped
                 (kept with --keep-vm), and so is the FFI call machinery
                 (lj_ccall_func with the ffi.meta___call right below it,
                 lj_ccallback_enter/leave): an FFI call shows as
                 caller;callee, from the interpreter as from a trace.
  VM helpers     lj_vm_mod, lj_vm_modi, lj_vm_floor... (arithmetic) stay, as
                 C frames: they set up no frame, so their caller is missing
                 from the chain; called from a trace, that caller is the trace
                 and the helper then sits right on the Lua frame the trace
                 was entered from.
  builtins       lj_ff_string_byte / lj_ffh_* / lj_cf_* become string.byte etc.
  C frames       as perf names them; argument lists are cut, `;` becomes `:`,
                 an unnamed frame in a known DSO becomes [dso-basename].
  [no call chain] a sample perf printed without frames: it drops a whole
                 chain holding a value in -4095..-1 (garbage read through
                 code without frame pointers).

Memory profiles (--mem)
-----------------------
  The patched VM samples GC allocations (mean gap RATE bytes) and makes each
  sampled allocation a page fault, carrying the frees of sampled blocks
  since the last one (docs/memory.md has the register contract):
    perf record -e page-faults/period=1/u -g --call-graph fp \
      --user-regs=r13,ax,bx,cx,dx,si,di,r8,r9,r10,r11,r12,r14
  A repeated sequence number (R8) is a duplicate fault: dropped. Bytes are
  scaled as Go does (1 / (1 - exp(-size/RATE)) allocations per sample); the
  output is allocated space, --inuse FILE the space in use: live at the end
  of the most recent completed GC cycle (--inuse-at now: not freed by the end).

Off-CPU and wall profiles (--off-cpu, --wall FILE)
---------------------------------------------------
  perf record -e context-switches/period=1/ --switch-events -g --call-graph fp ...
  perf script --ns --show-switch-events ... | lj_merge --off-cpu
  Each context-switch sample's stack weighs the nanoseconds until its thread
  was switched in again, under a leaf [preempted] (switched out runnable),
  [idle] (an event loop's epoll_wait/poll/select with no Lua frame) or
  [blocked]. --wall FILE also writes the CPU samples (their period in ns)
  and the off-CPU time as one profile: a thread's wall time.

Robustness: malformed or truncated lines are skipped and counted (one
summary line on stderr); a sample lj_merge cannot make sense of is dropped
and counted, never the run. When nothing usable is left, one line says so
and the exit status is 1. What the input lacks (-F fields) and what that
costs is said once on stderr ("note:").
"""


import argparse
import errno
import gc
import json
import os
import signal
import sys

from ljperf import vmregs, writers
from ljperf.memory import Memory
from ljperf.merger import Merger
from ljperf.offcpu import EVENT, OffCpu
from ljperf.perfscript import Reader
from ljperf.resolve import Resolver, one_line

PROG = "lj_merge"

# What a missing -F field costs, said once (only when it costs something).
_LACKS = (
    ("comm", "without comm: every root frame is [unknown]"),
    ("period", "without period: every sample counts 1"),
    ("sym", "without sym: C frames are [DSO] or [unknown]"),
    ("dso", "without dso: frames perf inject named are taken for C frames"),
)


def lacks(fields, merger, res, opts):
    """Notes on what the input lacks and what that costs (FIELDS: what its
    first sample shows)."""
    out = [msg for f, msg in _LACKS if f not in fields]
    if "pid" not in fields and "tid" not in fields:
        sole = merger.sole_pid
        out.append("without pid and tid: one process assumed%s" % (
            " (jit-%d.dump)" % sole if sole else
            ", but no single jit-PID.dump found" if sole is None else ""))
    if "time" not in fields and any(d is not None for d in res.dumps.values()):
        out.append("without time: where code addresses were reused the newest load "
                   "names them")
    if "uregs" not in fields and not merger.pc_seen:
        if opts.lines:
            out.append("without uregs: the running Lua function's line is its call's or `?`")
        elif wants_lines(opts):
            out.append("without uregs: in pprof the running Lua function's line is its "
                       "call's or 0 (unknown)")
    return out


def wants_lines(opts):
    """Whether a writer of OPTS carries each Lua frame's line without
    --lines (pprof: Location lines, so folded names stay as they are)."""
    return bool(opts.pprof) or writers.WRITERS[opts.format].LINES


def merge(f, opts, warn):
    """Reads perf script text from the binary file F. Returns (the Merger,
    the Reader's Stats, the Resolver); with --mem the Merger's `mem` is
    the Memory that read the samples (memory.py), else None."""
    res = Resolver(opts.jitdump, warn)
    merger = Merger(opts, res, wants_lines(opts))
    merger.mem = Memory(merger, opts) if opts.mem else None
    merger.off = OffCpu(merger, bool(opts.wall)) if opts.off_cpu else None
    rd = Reader(f)
    if opts.mem or opts.off_cpu:
        feed = merger.mem.feed if opts.mem else merger.off.feed
        for batch in rd.batches():
            feed(batch)
    else:
        for tb in rd.tallies():
            merger.feed_tally(tb)
    if res.nodump and any(v is not None for v in res.dumps.values()):
        ps = sorted(res.nodump)
        warn("no jit-PID.dump for pid %s%s: their Lua frames stay [unknown] (a forked "
             "child that loaded no code of its own uses its parent's dump when perf "
             "script runs with --show-task-events)"
             % (", ".join(map(str, ps[:5])), ", ..." if len(ps) > 5 else ""))
    return merger, rd.stats, res


def write(merger, opts, meta, out):
    """Feeds every stack to the writers of OPTS; returns the --kinds and
    --pprof writers (or None) for the caller to finish, and lists of
    (writer, path) of further text and binary outputs: --mem's --inuse,
    --off-cpu's --wall and --wall-pprof."""
    root_mode = 2 if opts.tid else (1 if opts.pid else 0)
    if merger.mem is not None:
        ws = merger.mem.write(merger, root_mode, dict(meta, kinds=opts.kinds, pprof=opts.pprof),
                              opts.format, opts.inuse)
        ws["main"].finish(out)
        return ws.get("kinds"), ws.get("pprof"), [(ws.get("inuse"), opts.inuse)], []
    if merger.off is not None:
        ws = merger.off.write(root_mode, dict(meta, kinds=opts.kinds, pprof=opts.pprof,
                                              wall_pprof=opts.wall_pprof),
                              opts.format, opts.wall)
        ws["main"].finish(out)
        return ws.get("kinds"), ws.get("pprof"), [(ws.get("wall"), opts.wall)], \
            [(ws.get("wall_pprof"), opts.wall_pprof)]
    main_w = writers.WRITERS[opts.format](meta)
    ws = [main_w]
    kinds_w = writers.Kinds(meta) if opts.kinds else None
    if kinds_w is not None:
        ws.append(kinds_w)
    pprof_w = writers.Pprof(meta) if opts.pprof else None
    if pprof_w is not None:
        ws.append(pprof_w)
    for st in merger.stacks(root_mode):
        for w in ws:
            w.stack(*st)
    main_w.finish(out)
    return kinds_w, pprof_w, [], []


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write("%s: error: %s (see --help)\n" % (PROG, message))
        sys.exit(2)


def make_parser():
    p = _Parser(prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
                description=__doc__.split("Robustness:")[0],
                epilog="Robustness: malformed or truncated input lines are skipped "
                       "and counted (one summary line on stderr); samples that make no "
                       "sense are dropped and counted. Empty input gives empty output "
                       "and a warning. Exit status: 0 ok (also with skipped lines or "
                       "dropped samples), 1 I/O error (input, output, --kinds, --pprof) "
                       "or nothing usable in the input (all of it skipped or dropped: "
                       "one line, no output), 2 bad "
                       "arguments, 3 internal error (a bug: please report it), 130 "
                       "interrupted, 141 output pipe closed (SIGPIPE).")
    p.add_argument("input", nargs="?", default="-",
                   help="perf script text (default: stdin)")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    p.add_argument("--format", choices=("folded", "speedscope", "pprof"), default="folded",
                   help="folded stacks `root;...;leaf COUNT` (default), speedscope "
                        "JSON (one sampled profile per root frame) or pprof (gzipped "
                        "profile.proto for go tool pprof, Pyroscope, Parca: binary, "
                        "to -o FILE or a redirected stdout; every Lua location with "
                        "its current line, without --lines too)")
    p.add_argument("--pid", action="store_true",
                   help="root frame comm-PID (one tree per process; default: comm)")
    p.add_argument("--tid", action="store_true",
                   help="root frame comm-PID/TID (one tree per thread)")
    p.add_argument("--lines", action="store_true",
                   help="Lua frames as LABEL:CURLINE in folded and speedscope output "
                        "(current line, from the jitdump's DEBUG_INFO; the leaf from R13 "
                        "with -F uregs); pprof carries it always")
    p.add_argument("--jit-tag", action="store_true",
                   help="append _[j] to frames running as JIT traces")
    p.add_argument("--keep-vm", action="store_true",
                   help="keep VM plumbing frames (lj_BC_*, lj_vm_*, lj_cont_*, "
                        "lj_vmeta_*, lj_fff_*)")
    p.add_argument("--jitdump", metavar="DIR",
                   help="where jit-PID.dump (and perf-PID.map) files are, or one "
                        "jit-PID.dump file; then nothing else is searched. Default: the "
                        "directories the input shows (jit-PID.dump mmap with perf script "
                        "--show-mmap-events, jitted-*.so DSOs of perf inject), "
                        "$LUAJIT_PERF_DIR, then /tmp. Needed for Lua frames printed as "
                        "[unknown] (no inject) and for lines (--lines, pprof)")
    p.add_argument("--kinds", metavar="FILE",
                   help="also write what each printed frame is, one `KIND<TAB>NAME` "
                        "line per frame name: root (comm), lua, trace, builtin, vm, "
                        "c or kernel (used by ljperf to colour flame graphs)")
    p.add_argument("--pprof", metavar="FILE",
                   help="also write the profile as pprof (gzipped profile.proto, with "
                        "every Lua location's current line) to FILE, in the same pass")
    p.add_argument("--event", metavar="NAME",
                   help="keep samples of this event (default: the event with the most "
                        "samples; 'all' keeps every sample)")
    p.add_argument("--mem", action="store_true",
                   help="memory profile from the VM's allocation traps (page faults "
                        "with the 'LJMEM' tag in CX; record -e '" + vmregs.EVENT +
                        "' --user-regs=r13," + vmregs.USER_REGS + ", docs/memory.md): "
                        "the output is allocated space in bytes, scaled as Go does; "
                        "--pprof and --format pprof write alloc_objects, alloc_space, "
                        "inuse_objects and inuse_space (see docs/memory.md)")
    p.add_argument("--inuse", metavar="FILE",
                   help="with --mem: also write the space in use (--inuse-at) as "
                        "folded stacks; pprof's inuse_* types are the same")
    p.add_argument("--inuse-at", choices=("cycle", "now"), default="cycle",
                   help="with --mem: in use means live at the end of the most recent "
                        "completed GC cycle (cycle, the default; Go's heap profiles), "
                        "or not freed by the end of the input (now). With no completed "
                        "cycle recorded, now (said on stderr)")
    p.add_argument("--mem-kinds", action="store_true",
                   help="with --mem: the kind of object allocated (string, table, table "
                        "array, table hash, closure, ...) as the leaf frame: [table]")
    p.add_argument("--mem-summary", metavar="FILE",
                   help="with --mem: write {\"inuse_at\": VIEW, \"kinds\": {KIND: "
                        "[alloc bytes, in-use bytes]}} (JSON) to FILE")
    p.add_argument("--off-cpu", action="store_true",
                   help="off-CPU profile from context-switch samples and switch records "
                        "(record -e %s --switch-events; perf script --ns "
                        "--show-switch-events): each switched-out stack weighs the ns "
                        "until its thread ran again, under a leaf [blocked], [preempted] "
                        "or [idle]; --pprof and --format pprof: sample type off_cpu"
                        % EVENT.replace("%", "%%"))
    p.add_argument("--wall", metavar="FILE",
                   help="with --off-cpu: also write the wall profile as folded stacks, "
                        "the CPU samples of the other event (a clock: period in ns) "
                        "and the off-CPU stacks together")
    p.add_argument("--wall-pprof", metavar="FILE",
                   help="with --wall: also write it as pprof (sample type wall)")
    p.add_argument("--from", metavar="PID:SECONDS", dest="cut", action="append",
                   type=cut_arg, default=[],
                   help="PID's samples taken before SECONDS (perf's clock, as perf "
                        "script prints `time`) keep their host frames only, no Lua or "
                        "trace frames; counted on stderr; repeatable. ljperf record -p "
                        "passes each process's switch time: before it, a Lua frame "
                        "would lack its Lua callers")
    return p


def cut_arg(text):
    """--from PID:SECONDS -> (pid, seconds)."""
    pid, sep, t = text.partition(":")
    try:
        if sep and int(pid) > 0 and float(t) >= 0:
            return int(pid), float(t)
    except ValueError:
        pass
    raise argparse.ArgumentTypeError("expected PID:SECONDS (e.g. 4242:81234.567890), "
                                     "got %r" % text)


def open_input(path):
    """The binary input file, or an error message."""
    if path == "-":
        return sys.stdin.buffer, None
    if os.path.isdir(path):
        return None, "cannot read %s: is a directory" % path
    try:
        return open(path, "rb"), None
    except OSError as e:
        return None, "cannot open %s: %s" % (path, e.strerror)


def write_outputs(merger, opts, event):
    """The main output, --kinds, --pprof, --inuse, --wall and
    --wall-pprof; an error message or None."""
    meta = {"event": event, "span": merger.span(),
            "name": os.path.basename(opts.input) if opts.input != "-" else "perf script"}
    mem = merger.mem
    if mem is not None:
        meta.update(event=mem.event_name(), span=mem.span(), unit="bytes", rate=mem.rate())
    if merger.off is not None:
        meta.update(event="off-cpu", span=merger.off.span(), unit="nanoseconds")
    binary = getattr(writers.WRITERS[opts.format], "BINARY", False)
    if binary and not opts.output and sys.stdout.isatty():
        return "%s output is binary: give -o FILE or redirect stdout" % opts.format
    out = None
    try:
        if binary:
            out = open(opts.output, "wb") if opts.output else sys.stdout.buffer
        else:
            out = (open(opts.output, "w", encoding="utf-8", errors="replace")
                   if opts.output else sys.stdout)
        kinds, prof, texts, bins = write(merger, opts, meta, out)
        out.flush()
    except OSError as e:
        if isinstance(e, BrokenPipeError) or e.errno == errno.EPIPE:
            raise
        return "write error: %s" % (e.strerror or e)
    finally:
        if out is not None and out not in (sys.stdout, sys.stdout.buffer):
            out.close()
    for w, path in [(kinds, opts.kinds)] + texts:
        if w is not None:
            try:
                with open(path, "w", encoding="utf-8", errors="replace") as kf:
                    w.finish(kf)
            except OSError as e:
                return "cannot write %s: %s" % (path, e.strerror or e)
    for w, path in [(prof, opts.pprof)] + bins:
        if w is not None:
            try:
                with open(path, "wb") as pf:
                    w.finish(pf)
            except OSError as e:
                return "cannot write %s: %s" % (path, e.strerror or e)
    if mem is not None and opts.mem_summary:
        try:
            with open(opts.mem_summary, "w") as sf:
                json.dump(mem.digest(), sf, sort_keys=True)
                sf.write("\n")
        except OSError as e:
            return "cannot write %s: %s" % (opts.mem_summary, e.strerror or e)
    return None


def summary(merger, st, res, opts, warn):
    """The stderr lines after a run: what was skipped, dropped, lacking."""
    say = sys.stderr.write
    bad = st.skipped() + merger.bad
    if bad:
        say("%s: skipped %d malformed lines\n" % (PROG, bad))
    if merger.dropped:
        say("%s: dropped %d samples lj_merge could not make sense of\n"
            % (PROG, merger.dropped))
    if merger.before_switch:
        say("%s: %d samples taken before their process switched recording on "
            "keep their host frames only (--from)\n" % (PROG, merger.before_switch))
    if merger.other_events:
        say("%s: ignored %d samples of other events than %s (see --event)\n"
            % (PROG, merger.other_events, merger.ev_filter))
    if merger.mem is not None:
        say("%s: %s\n" % (PROG, merger.mem.summary()))
    if merger.off is not None:
        say("%s: %s\n" % (PROG, merger.off.summary()))
    if st.samples == 0:
        warn("no samples in input" if st.lines else "empty input")
    elif merger.off is not None and not merger.off.switches:
        warn("no context switch weighed: record with -e %s --switch-events and "
             "perf script --show-switch-events (context-switch samples are kernel "
             "samples: root, or kernel.perf_event_paranoid <= 1)" % EVENT)
    elif merger.mem is not None and not merger.mem.trap_events:
        warn("no memory trap samples (page faults with the LJMEM tag in CX): record "
             "with -e '" + vmregs.EVENT + "' --user-regs=r13," + vmregs.USER_REGS + " and "
             "perf script -F ...,uregs")
    else:
        notes = lacks(st.fields or set(), merger, res, opts)
        if notes:
            say("%s: note: input %s\n" % (PROG, "; ".join(notes)))


def main(argv=None):
    # One tuple per sample, freed at once, no reference cycles: the cyclic
    # GC's young-generation passes would only cost time (~10%).
    gc.set_threshold(50000, 20, 100)
    p = make_parser()
    opts = p.parse_args(argv)
    if (opts.inuse or opts.mem_kinds or opts.mem_summary) and not opts.mem:
        p.error("--inuse, --mem-kinds and --mem-summary need --mem")
    if opts.off_cpu and opts.mem:
        p.error("--off-cpu and --mem are separate passes")
    if opts.wall and not opts.off_cpu:
        p.error("--wall needs --off-cpu")
    if opts.wall_pprof and not opts.wall:
        p.error("--wall-pprof needs --wall")
    if opts.jitdump and not os.path.exists(opts.jitdump):
        p.error("--jitdump: no such file or directory: %s" % opts.jitdump)
    warned = set()

    def warn(msg):
        if msg not in warned:
            warned.add(msg)
            sys.stderr.write("%s: warning: %s\n" % (PROG, msg))

    inp, err = open_input(opts.input)
    if err:
        sys.stderr.write("%s: %s\n" % (PROG, err))
        return 1
    try:
        merger, st, res = merge(inp, opts, warn)
    except ValueError as e:
        sys.stderr.write("%s: error: %s\n" % (PROG, e))
        return 2
    except OSError as e:
        sys.stderr.write("%s: read error: %s\n" % (PROG, e.strerror or e))
        return 1
    finally:
        if inp is not sys.stdin.buffer:
            inp.close()
    bad = st.skipped() + merger.bad
    if st.samples <= merger.dropped and (bad or merger.dropped):
        # the input was all damage: no output, one line
        sys.stderr.write("%s: nothing usable in the input: %s\n" % (PROG, "; ".join(
            x for x in ("skipped %d malformed lines" % bad if bad else "",
                        "dropped %d samples lj_merge could not make sense of"
                        % merger.dropped if merger.dropped else "") if x)))
        return 1
    err = write_outputs(merger, opts, merger.settle())
    if err:
        sys.stderr.write("%s: %s\n" % (PROG, err))
        return 1
    summary(merger, st, res, opts, warn)
    return 0


def entry():
    try:
        rc = main()
    except KeyboardInterrupt:
        rc = 130
    except BrokenPipeError:
        # `lj_merge ... | head`: stop quietly (as if killed by SIGPIPE)
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        rc = 128 + signal.SIGPIPE
    except SystemExit:
        raise
    except BaseException as e:      # never a traceback
        sys.stderr.write("%s: internal error: %s\n" % (PROG, one_line(e)))
        rc = 3
    sys.exit(rc)


if __name__ == "__main__":
    entry()
