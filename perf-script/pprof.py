#!/usr/bin/env python3
"""pprof.py --from-folded FILE|DIR [-o OUT]: folded stacks, or an ljperf
output directory, as a gzipped pprof profile (see --help). The converter is
ljperf.pprof_cli; this script starts it from the source tree."""

import os
import sys


def main():
    # Entry script: puts the source root, found through symlinks, on
    # sys.path for the ljperf package (the rule: ljperf/__init__.py).
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    from ljperf import pprof_cli
    return pprof_cli.main()


if __name__ == "__main__":
    sys.exit(main())
