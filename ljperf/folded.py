"""The one reader of folded stacks and of frame kinds files, as lj_merge
writes them (writers.Folded, writers.Kinds): ljperf's pages, ljperf diff,
the pprof converter and the tests read them here.

  folded   `root;...;leaf WEIGHT` per line: WEIGHT an integer (samples,
           nanoseconds) or a decimal number (scaled bytes, a diff); lines
           without one, or with WEIGHT <= 0, are skipped
  kinds    `KIND<TAB>NAME` per printed frame name (a name printed as frames
           of two kinds has two lines)
Files are read as UTF-8, invalid bytes as U+FFFD."""


def parse(lines):
    """Yields (frames list root first, weight: int or float) per folded line
    of LINES (str, newline or not); malformed lines are skipped."""
    for line in lines:
        stack, sp, cnt = line.rstrip("\n").rpartition(" ")
        if not sp or not stack:
            continue
        try:
            w = int(cnt)
        except ValueError:
            try:
                w = float(cnt)
            except ValueError:
                continue
        if w > 0:
            yield stack.split(";"), w


def load_folded(path):
    """[(frames list, weight)] of a folded file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return list(parse(f))


def load_kinds(path):
    """{name: set of kinds} of a kinds file (empty if it cannot be read)."""
    kinds = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                k, tab, name = line.rstrip("\n").partition("\t")
                if tab:
                    kinds.setdefault(name, set()).add(k)
    except OSError:
        pass
    return kinds
