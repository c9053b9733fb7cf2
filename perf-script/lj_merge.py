#!/usr/bin/env python3
"""lj_merge: `perf script | lj_merge > folded` (see --help). The tool is
ljperf.merge_cli; this script is how perf-script/lj_merge.py and
build/bin/lj_merge (a symlink to it) start it."""

import os
import sys


def main():
    # Entry script: puts the source root, found through symlinks, on
    # sys.path for the ljperf package (the rule: ljperf/__init__.py).
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    from ljperf.merge_cli import entry
    entry()


if __name__ == "__main__":
    main()
