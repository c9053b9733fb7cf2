"""After perf record: what `ljperf record` and `ljperf report` make of a
recording. The jitdumps are pruned to the code that was sampled, perf
inject --jit names that code, perf script | lj_merge folds the stacks
(profile.folded, profile.kinds, profile.pb.gz), and the page is written
(flamegraph.html). A --mem recording's allocation samples are folded
again, by lj_merge --mem, into the memory profiles (alloc.folded,
inuse.folded, mem.kinds, mem.pb.gz, alloc.html, inuse.html)."""

import glob
import json
import os
import re
import shutil
import subprocess

from ljperf import children, inline
from ljperf import offcpu_pages
from ljperf import jitdump
from ljperf import perfscript
from ljperf.locate import lj_merge_argv
from ljperf.messages import Fail, one_line, read_text, say
from ljperf.perfcmd import event_name, perf_argv
from ljperf.folded import load_folded, load_kinds
from ljperf.render import MEM_NAMES, event_unit, render_html


def dumps_in(d):
    """{pid: path} of the jit-PID.dump files in D."""
    out = {}
    for p in glob.glob(os.path.join(d, "jit-*.dump")):
        s = os.path.basename(p)[4:-5]
        if s.isdigit():
            out[int(s)] = p
    return out


def sampled_addrs(perf, outdir, data):
    """Every user address in DATA's samples (IPs and callchains), and the
    byte before each (a return address's call), or None if perf fails."""
    r = children.run(perf_argv(perf, outdir, "script", "-i", data, "-F", "ip"),
                       stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, errors="replace")
    if r.returncode != 0:
        return None
    addrs = set()
    for s in perfscript.iter_samples(r.stdout.split("\n")):
        for a, _, _, _ in s.frames:
            if 0 < a < 0x800000000000:
                addrs.add(a)
                addrs.add(a - 1)
    return addrs


def inline_addrs(dump):
    """The bytecode addresses the trace inline stacks next to DUMP name
    (jit-PID.dump.inline): the loads of the functions traces inlined must
    survive pruning, or lj_merge cannot name them."""
    out = set()
    try:
        for t in inline.read(dump + ".inline"):
            out.update(pc for pc, _ in t.nodes)
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as e:
        say("warning: %s.inline: %s" % (dump, e))
    return out


def prune_dumps(perf, outdir, data):
    """perf inject --jit writes one .so per CODE_LOAD: a program that loads
    20 000 functions gets 20 000 files and inject takes many seconds. Before
    inject, each DIR/jit-PID.dump keeps only the loads that cover a sampled
    address (what inject and lj_merge need); the full dump is kept as
    jit-PID.dump.full."""
    dumps = dumps_in(outdir)
    if not dumps:
        return
    addrs = sampled_addrs(perf, outdir, data)
    if addrs is None:
        say("warning: perf script -F ip failed; perf inject gets the full jitdumps")
        return
    for p in dumps.values():
        full, tmp = p + ".full", p + ".pruned"
        try:
            if os.path.exists(full):   # pruned before (ljperf report): start over
                shutil.copyfile(full, p)
            kept, total = jitdump.prune(p, tmp, addrs | inline_addrs(p))
            if kept < total:
                os.replace(p, full)
                os.replace(tmp, p)
            else:
                os.unlink(tmp)
        except (OSError, ValueError) as e:
            say("warning: cannot prune %s for perf inject: %s" % (p, e))
            if os.path.exists(tmp):
                os.unlink(tmp)


def inject(perf, outdir, data, out):
    """perf inject --jit; True if OUT was written."""
    log = os.path.join(outdir, "perf-inject.log")
    with open(log, "w") as logf:
        r = children.run(perf_argv(perf, outdir, "inject", "--jit", "-i", data, "-o", out),
                           stdin=subprocess.DEVNULL, stdout=logf, stderr=logf)
    if r.returncode != 0 or not os.path.exists(out):
        say("warning: perf inject --jit failed (%s); Lua frames are named from the "
            "jitdump instead" % one_line(read_text(log)))
        try:
            os.unlink(out)
        except OSError:
            pass
        return False
    return True


# Other outputs `--format` adds, by lj_merge --format: the file in DIR.
FORMATS = {"speedscope": "profile.speedscope.json"}


def merge_argv(outdir, opts, fmt, switched_at=None, event=None):
    """lj_merge's command line for OPTS, and the file it writes: FMT
    "folded" is DIR/profile.folded with DIR/profile.kinds and
    DIR/profile.pb.gz beside it; "mem" DIR/alloc.folded with inuse.folded,
    mem.kinds, mem.pb.gz and mem.json; "offcpu" DIR/offcpu.folded with
    offcpu.kinds, offcpu.pb.gz, "wall" those and wall.folded, wall.pb.gz;
    another lj_merge --format goes into
    DIR/FORMATS[FMT]. SWITCHED_AT ({"pid": seconds}, ljperf.json): each
    attached process's samples before its switch keep their host frames
    only (--from). EVENT: the samples to keep (lj_merge --event)."""
    if fmt in ("offcpu", "wall"):
        out = os.path.join(outdir, "offcpu.folded")
        argv = lj_merge_argv() + ["--off-cpu", "--jit-tag", "--jitdump", outdir,
                                  "--kinds", os.path.join(outdir, "offcpu.kinds"),
                                  "--pprof", os.path.join(outdir, "offcpu.pb.gz"),
                                  "-o", out]
        if fmt == "wall":
            argv += ["--wall", os.path.join(outdir, "wall.folded"),
                     "--wall-pprof", os.path.join(outdir, "wall.pb.gz")]
    elif fmt == "mem":
        out = os.path.join(outdir, "alloc.folded")
        argv = lj_merge_argv() + ["--mem", "--jit-tag", "--jitdump", outdir,
                                  "--kinds", os.path.join(outdir, "mem.kinds"),
                                  "--pprof", os.path.join(outdir, "mem.pb.gz"),
                                  "--inuse", os.path.join(outdir, "inuse.folded"),
                                  "--inuse-at", getattr(opts, "inuse", None) or "cycle",
                                  "--mem-summary", os.path.join(outdir, "mem.json"),
                                  "-o", out]
        if getattr(opts, "mem_kinds", False):
            argv.append("--mem-kinds")
    elif fmt == "folded":
        out = os.path.join(outdir, "profile.folded")
        argv = lj_merge_argv() + ["--jit-tag", "--jitdump", outdir,
                                  "--kinds", os.path.join(outdir, "profile.kinds"),
                                  "--pprof", os.path.join(outdir, "profile.pb.gz"),
                                  "-o", out]
    else:
        out = os.path.join(outdir, FORMATS[fmt])
        argv = lj_merge_argv() + ["--jit-tag", "--jitdump", outdir, "--format", fmt,
                                  "-o", out]
    for flag, opt in (("lines", "--lines"), ("keep_vm", "--keep-vm"),
                      ("per_process", "--pid"), ("per_thread", "--tid")):
        if getattr(opts, flag, False):
            argv.append(opt)
    for pid, t in sorted((switched_at or {}).items()):
        argv += ["--from", "%s:%.6f" % (pid, t)]
    if event:
        argv += ["--event", event]
    return argv, out


def fold(perf, outdir, data, opts, fmt="folded", switched_at=None, event=None):
    """perf script | lj_merge -> DIR/profile.folded and DIR/profile.kinds
    (FMT: "mem", or another lj_merge --format, merge_argv; SWITCHED_AT,
    EVENT: merge_argv)."""
    fields = "comm,pid,tid,time,period,event,ip,sym,symoff,dso"
    if opts.lines or fmt in ("folded", "mem"):
        fields += ",uregs"        # R13: the interpreted leaf's line (--lines, profile.pb.gz);
                                  # the allocation samples' registers (mem)
    merge, folded = merge_argv(outdir, opts, fmt, switched_at, event)
    log_sfx = "" if fmt == "folded" else "-offcpu" if fmt == "wall" else "-" + fmt
    # the switch records, and their times in ns (a switch can last a few us)
    more = ("--ns", "--show-switch-events") if fmt in ("offcpu", "wall") else ()
    slog = os.path.join(outdir, "perf-script%s.log" % log_sfx)
    with open(slog, "w") as slogf:
        # --show-task-events: a forked child without a jitdump of its own is
        # named from its parent's
        script = children.popen(perf_argv(perf, outdir, "script", "-i", data, "-F", fields,
                                            "--show-task-events", *more),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=slogf)
        try:
            m = children.popen(merge, stdin=script.stdout, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE)
        except OSError as e:
            script.kill()
            script.wait()
            raise Fail("cannot run lj_merge: %s" % (e.strerror or e))
        script.stdout.close()
        _, merr = m.communicate()
        script.wait()
    merr = merr.decode("utf-8", "replace")
    with open(os.path.join(outdir, "lj_merge%s.log" % log_sfx), "w") as f:
        f.write(merr)
    if script.returncode != 0:
        raise Fail("perf script failed: %s" % one_line(read_text(slog)))
    if m.returncode != 0:
        raise Fail("lj_merge failed: %s" % one_line(merr))
    kinds = {"mem": "mem.kinds", "offcpu": "offcpu.kinds", "wall": "offcpu.kinds"}
    return folded, os.path.join(outdir, kinds.get(fmt, "profile.kinds"))


def write_profile(perf, outdir, data, opts, meta):
    """DATA folded (perf script | lj_merge) into OUTDIR's profile.folded,
    profile.kinds and profile.pb.gz, the --format outputs, and the page
    flamegraph.html. Returns (folded, page, total weight, event)."""
    cut = meta.get("switched_at")
    event = event_name(perf, outdir, data) or meta.get("event")
    # With --mem (--off-cpu) the page faults (context switches) may outnumber
    # the CPU samples: name the event
    only = event if "mem_rate" in meta or meta.get("off_cpu") else None
    folded, kinds_path = fold(perf, outdir, data, opts, switched_at=cut, event=only)
    stacks = load_folded(folded)
    if not stacks:
        # A program that waits (--off-cpu) or allocates without computing
        # (--mem) may give no CPU sample: its other profile is the result.
        others = [f for f in ("offcpu.folded", "alloc.folded")
                  if os.path.exists(os.path.join(outdir, f)) and
                  load_folded(os.path.join(outdir, f))]
        if not others:
            raise Fail("no samples: the profile is empty (did the program run long enough "
                       "and use the CPU? try a longer run or a higher -F)")
        say("no CPU samples (the program hardly ran on the CPU): see %s" % others[0])
    m = {"title": meta.get("title"), "event": event, "unit": event_unit(event),
         "frequency": meta.get("frequency"), "recorded": meta.get("recorded"),
         "duration": meta.get("duration"), "target": meta.get("target")}
    for fmt in getattr(opts, "format", None) or ():
        say("  %-14s %s" % (fmt, fold(perf, outdir, data, opts, fmt, cut)[0]))
    html_out = os.path.join(outdir, "flamegraph.html")
    try:
        render_html(stacks, load_kinds(kinds_path), m, html_out)
    except Fail as e:
        raise Fail("%s (profile.folded is written: %s)" % (e, folded), e.code)
    return folded, html_out, sum(w for _, w in stacks), event


# The memory profiles' pages: folded file, page, what it weighs (MEM_NAMES).
MEM_PAGES = (("alloc.folded", "alloc.html", "alloc"),
             ("inuse.folded", "inuse.html", "inuse"))


def write_outputs(perf, outdir, data, opts, meta):
    """Everything of DATA into OUTDIR and what ljperf says of it: the CPU
    profile (write_profile), and for a --mem recording (META "mem_rate")
    the memory profiles, folded before any page is drawn: a page that
    cannot be drawn (no renderer) loses no folded output. Returns the
    function that says where everything is (after the program's status)."""
    mem = "mem_rate" in meta
    off = meta.get("off_cpu", False)
    if mem:
        fold(perf, outdir, data, opts, "mem", meta.get("switched_at"))
    if off:
        fold(perf, outdir, data, opts, "wall" if meta.get("wall") else "offcpu",
             meta.get("switched_at"))
    try:
        folded, html_out, total, event = write_profile(perf, outdir, data, opts, meta)
        pages = write_mem_pages(outdir, meta) if mem else None
        off_pages = offcpu_pages.write(outdir, meta, opts) if off else None
    except Fail as e:
        raise Fail("%s%s" % (e, "; alloc.folded and inuse.folded too" if mem else
                             "; offcpu.folded too" if off else ""), e.code)

    lost = lost_chunks(os.path.join(outdir, "perf-script.log"))

    def say_result():
        print_result(outdir, folded, html_out, total, event, data)
        if pages is not None:
            print_mem_result(outdir, pages)
        if off_pages is not None:
            offcpu_pages.say_result(outdir, off_pages)
        if lost:
            say("perf lost %d chunk%s of events (its ring buffer overflowed): the profiles "
                "miss samples%s" % (lost, "" if lost == 1 else "s",
                                    "; in use may count blocks whose frees were lost"
                                    if mem else ""))
    return say_result


def lost_chunks(log):
    """How many chunks of events perf script said were lost (LOG: its
    stderr: "Processed N events and lost M chunks!"), 0 if none."""
    m = re.search(r"\blost (\d+) chunks\b", read_text(log))
    return int(m.group(1)) if m else 0


def write_mem_pages(outdir, meta):
    """The pages alloc.html and inuse.html of OUTDIR's alloc.folded and
    inuse.folded (lj_merge --mem). Returns {folded file: (page or None,
    total bytes)}; a profile without samples gets no page (said once)."""
    kinds = load_kinds(os.path.join(outdir, "mem.kinds"))
    digest = mem_digest(outdir)
    out = {"digest": digest}
    for name, page, what in MEM_PAGES:
        stacks = load_folded(os.path.join(outdir, name))
        total = sum(w for _, w in stacks)
        out[name] = (None, total)
        if not stacks:
            continue
        label = MEM_NAMES[what]
        if what == "inuse":
            label += ", " + INUSE_VIEWS[digest["inuse_at"]]
        m = {"title": "%s (%s)" % (meta.get("title") or "", label),
             "event": "allocations (1 sample per %d bytes)" % meta["mem_rate"],
             "unit": event_unit(None, mem=True), "weightName": MEM_NAMES[what],
             "frequency": None, "recorded": meta.get("recorded"),
             "duration": meta.get("duration"), "target": meta.get("target")}
        try:
            render_html(stacks, kinds, m, os.path.join(outdir, page))
        except Fail as e:
            raise Fail("%s (%s is written: %s)" % (e, name, os.path.join(outdir, name)),
                       e.code)
        out[name] = (os.path.join(outdir, page), total)
    if not out["alloc.folded"][1]:
        say("warning: --mem: no allocation was sampled (did the program allocate more "
            "than --mem-rate %d bytes while recording? a smaller --mem-rate samples "
            "more)" % meta["mem_rate"])
    return out


# How in use was judged (lj_merge --mem-summary "inuse_at"), as said.
INUSE_VIEWS = {"cycle": "live at the last completed GC cycle",
               "now": "not freed by the end",
               "end": "not freed by the end: no GC cycle completed while recording"}


def mem_digest(outdir):
    """DIR/mem.json (lj_merge --mem-summary): {"inuse_at": VIEW, "kinds":
    {kind: [alloc bytes, in-use bytes]}}."""
    try:
        with open(os.path.join(outdir, "mem.json")) as f:
            d = json.load(f)
        if d.get("inuse_at") in INUSE_VIEWS and isinstance(d.get("kinds"), dict):
            return d
    except (OSError, ValueError):
        pass
    raise Fail("%s: missing or malformed (lj_merge --mem-summary)"
               % os.path.join(outdir, "mem.json"))


def print_mem_result(outdir, mem):
    (alloc_page, alloc), (inuse_page, inuse) = (mem[n] for n, _, _ in MEM_PAGES)
    digest = mem["digest"]
    say("memory: %s allocated, %s of it in use (%s; estimates from samples)"
        % (human_bytes(alloc), human_bytes(inuse), INUSE_VIEWS[digest["inuse_at"]]))
    kinds = sorted(digest["kinds"].items(), key=lambda kv: (-kv[1][0], kv[0]))
    if kinds:
        say("  %-14s %12s %12s" % ("kind", "allocated", "in use"))
        for k, (a, i) in kinds:
            say("  %-14s %12s %12s" % (k, human_bytes(a), human_bytes(i)))
    for label, page in (("allocations", alloc_page), ("in use", inuse_page)):
        if page:
            say("  %-14s %s" % (label, page))
    say("  pprof          %s  (go tool pprof -sample_index=inuse_space %s)"
        % (os.path.join(outdir, "mem.pb.gz"), os.path.join(outdir, "mem.pb.gz")))


def human_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return ("%d %s" if unit == "B" else "%.1f %s") % (n, unit)
        n /= 1024.0


def print_result(outdir, folded, html_out, total, event, data):
    unit = event_unit(event)
    amount = ("%.2f s of %s" % (total / 1e9, event)) if unit == "ns" else \
        ("%d %s" % (total, event or "events"))
    say("profile: %s in %s" % (amount, outdir))
    say("  flame graph    %s" % html_out)
    say("  folded stacks  %s" % folded)
    say("  pprof          %s  (go tool pprof -http=: %s)"
        % (os.path.join(outdir, "profile.pb.gz"), os.path.join(outdir, "profile.pb.gz")))
    say("  perf data      %s  (perf report -i %s --buildid-dir %s)"
        % (data, data, os.path.join(outdir, ".debug")))
