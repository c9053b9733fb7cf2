"""pprof: write merged ljperf stacks as a gzipped pprof profile.proto.

The converter's command line (perf-script/pprof.py starts it; the encoder
and the folded mapping are ljperf.pprof): folded stacks, or an ljperf
output directory, as a gzipped pprof profile.

  pprof.py --from-folded FILE|DIR [-o OUT] [--weights count|ns] [--period NS]

FILE is folded stacks (root;...;leaf WEIGHT); DIR an ljperf output directory
(profile.folded, profile.kinds for the frame kinds, ljperf.json for the
frequency, start and duration; perf evlist for the event)."""

import argparse
import collections
import datetime
import json
import os
import shutil
import sys

from ljperf import pprof
from ljperf.folded import load_kinds
from ljperf.perfcmd import event_name


def recorded_event(d):
    """The event DIR/perf.data holds (ljperf.json has the one asked for:
    perf records cpu-clock when there is no PMU for cycles), or None."""
    data = os.path.join(d, "perf.data")
    if not os.path.isfile(data):
        return None
    return event_name(shutil.which("perf") or "perf", d, data)


def sane_meta(meta):
    """The fields of ljperf.json (META, as JSON gave it) this converter
    uses, those of the right type and range only: event and recorded
    strings, frequency (Hz) and duration (s) finite numbers in range."""
    meta = meta if isinstance(meta, dict) else {}
    out = {k: meta[k] for k in ("event", "recorded") if isinstance(meta.get(k), str)}
    for k, lo, hi in (("frequency", 1, 1e9), ("duration", 0, 1e9)):
        v = meta.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and lo <= v <= hi:
            out[k] = v
    return out


def main(argv=None):
    p = argparse.ArgumentParser(prog="pprof.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--from-folded", metavar="FILE|DIR", required=True,
                   help="folded stacks, or an ljperf output directory")
    p.add_argument("-o", "--output", metavar="OUT", default="-",
                   help="the gzipped profile (default: stdout, not a terminal)")
    p.add_argument("--weights", choices=("count", "ns"),
                   help="what a folded weight is (default: ns for a DIR recorded "
                        "with cpu-clock/task-clock, else count)")
    p.add_argument("--period", metavar="NS", type=int,
                   help="nanoseconds per sample (default: 1e9 / the DIR's frequency, "
                        "else 1e9 / 999, ljperf's default)")
    p.add_argument("--duration", metavar="S", type=float, help="recording length")
    opts = p.parse_args(argv)
    src, kinds, meta = opts.from_folded, {}, {}
    skipped = collections.Counter()         # malformed lines, of both files
    if os.path.isdir(src):
        kinds = load_kinds(os.path.join(src, "profile.kinds"), skipped)
        try:
            with open(os.path.join(src, "ljperf.json"), encoding="utf-8") as f:
                meta = json.load(f)
        except (OSError, ValueError):
            meta = {}
        src = os.path.join(src, "profile.folded")
    meta = sane_meta(meta)
    event = recorded_event(opts.from_folded) or meta.get("event") or ""
    weights = opts.weights or ("ns" if event.split(":")[0] in ("cpu-clock", "task-clock")
                               else "count")
    period = opts.period or round(1e9 / (meta.get("frequency") or 999))
    duration = opts.duration if opts.duration is not None else meta.get("duration") or 0
    try:
        start = round(datetime.datetime.fromisoformat(meta["recorded"]).timestamp() * 1e9)
    except (KeyError, TypeError, ValueError, OverflowError, OSError):
        start = 0
    if not 0 <= start < 1 << 63:          # pprof's time_nanos: int64, after 1970
        start = 0
    prof = pprof.Profile(period_ns=period, duration_ns=round(duration * 1e9), time_ns=start,
                   event=event)
    try:
        with open(src, encoding="utf-8", errors="surrogateescape") as f:
            n = pprof.from_folded(f, prof, weights, kinds, skipped)
    except OSError as e:
        sys.exit("pprof.py: cannot read %s: %s" % (src, e.strerror or e))
    bad = "skipped %d malformed lines" % skipped["lines"] if skipped else ""
    if not n and skipped:
        sys.exit("pprof.py: no stacks in %s (%s)" % (src, bad))
    if opts.output == "-":
        if sys.stdout.isatty():
            sys.exit("pprof.py: not writing a binary profile to a terminal: give -o FILE")
        prof.write(sys.stdout.buffer)
    else:
        prof.write(opts.output)
    if bad:
        sys.stderr.write("pprof.py: %s\n" % bad)
    return 0


if __name__ == "__main__":
    sys.exit(main())
