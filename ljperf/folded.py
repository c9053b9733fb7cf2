"""The one reader of folded stacks and of frame kinds files, as lj_merge
writes them (writers.Folded, writers.Kinds): ljperf's pages, ljperf diff,
the pprof converter and the tests read them here.

  folded   `root;...;leaf WEIGHT` per line: WEIGHT an integer (samples,
           nanoseconds) or a decimal number (scaled bytes, a diff), finite
           and below 2**63 (pprof's int64); lines without one, or with
           WEIGHT <= 0, are skipped (counted in SKIPPED, a Counter, when
           given: SKIPPED["lines"])
  kinds    `KIND<TAB>NAME` per printed frame name (a name printed as frames
           of two kinds has two lines)
Files are read as UTF-8, invalid bytes as U+FFFD."""

import math

MAX_WEIGHT = 1 << 63


def parse(lines, skipped=None):
    """Yields (frames list root first, weight: int or float) per folded line
    of LINES (str, newline or not); malformed lines are skipped."""
    for line in lines:
        stack, sp, cnt = line.rstrip("\n").rpartition(" ")
        if sp and stack and len(cnt) <= 40:
            try:
                w = int(cnt)
            except ValueError:
                try:
                    w = float(cnt)
                except ValueError:
                    w = 0
            if 0 < w < MAX_WEIGHT and math.isfinite(w):
                yield stack.split(";"), w
                continue
        if skipped is not None and line.strip():
            skipped["lines"] += 1


def load_folded(path, skipped=None):
    """[(frames list, weight)] of a folded file (SKIPPED: see parse)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return list(parse(f, skipped))


def load_kinds(path, skipped=None):
    """{name: set of kinds} of a kinds file (empty if it cannot be read;
    lines without a tab counted in SKIPPED["lines"])."""
    kinds = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                k, tab, name = line.rstrip("\n").partition("\t")
                if tab:
                    kinds.setdefault(name, set()).add(k)
                elif skipped is not None and line.strip():
                    skipped["lines"] += 1
    except OSError:
        pass
    return kinds
