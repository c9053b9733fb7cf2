#!/usr/bin/env python3
"""ljperf: one command from a LuaJIT program to a flame graph (see --help).
The tool is the ljperf package (ljperf.cli); this script is how
build/bin/ljperf (a symlink to it) starts it. The page template and its
script and style are in page/, copied into build/share/ljperf."""

import os
import sys


def main():
    # Entry script: puts the source root, found through symlinks, first on
    # sys.path for the ljperf package (the rule: ljperf/__init__.py). First:
    # this directory, sys.path[0], holds this ljperf.py, not the package.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    sys.path.insert(0, root)
    from ljperf.cli import entry
    entry()


if __name__ == "__main__":
    main()
