"""ljperf's messages: one line on stderr per event, and Fail, the error a
command ends with (one line, an exit status). Every ljperf module reports
through these; the CLI (cli.entry) prints a Fail and exits with its code."""

import sys

PROG = "ljperf"


class Fail(Exception):
    """An error reported as one line; CODE is the exit status. RAW messages
    are printed as they are (argparse's, which name the subcommand)."""

    def __init__(self, msg, code=1, raw=False):
        Exception.__init__(self, msg)
        self.code = code
        self.raw = raw


def say(msg):
    sys.stderr.write("%s: %s\n" % (PROG, msg))
    sys.stderr.flush()


def one_line(text, limit=300):
    """The most telling line of a tool's stderr."""
    lines = [ln.strip() for ln in (text or "").splitlines()
             if ln.strip() and not ln.strip().endswith(":")]
    for ln in lines:
        low = ln.lower()
        if "error" in low or "failed" in low or "cannot" in low or "not " in low:
            return ln[:limit]
    return (lines[-1] if lines else "no message")[:limit]


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""
