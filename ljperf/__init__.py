"""ljperf's Python side: everything after perf record, and the ljperf tool.

Reading what perf and the patched VM wrote:
  perfscript   the one reader of `perf script` text
  jitdump      jit-PID.dump (read, validate, prune)
  inline       jit-PID.dump.inline: the Lua functions each trace inlined
  frames       the frame vocabulary: what a callchain line is, how it prints
  resolve      address -> code load (jitdumps, perf maps; their file names)
  folded       the one reader of folded stacks and --kinds files
  vmregs       the VM's register and trap contract (a leaf: imports nothing)
lj_merge (perf-script/lj_merge.py):
  merger       one sample in, one stack key out; stacks folded into frames
  writers      folded, speedscope, --kinds, pprof outputs
  pprof        profile.proto by hand; folded stacks as pprof
  pprof_cli    the --from-folded converter's command line (perf-script/pprof.py)
  merge_cli    lj_merge's command line
ljperf (tools/ljperf/ljperf.py, build/bin/ljperf):
  cli          ljperf's command line and argument checks
  record       record (launch, attach; one finishing step), report
  finish       after perf record: prune, perf inject, perf script | lj_merge
  perfcmd      perf: found, allowed, its command lines (perf_argv)
  attach       attached processes: targets, their files, the switch held on
  remote       the remote switch (control block through /proc/PID/mem)
  kick         busy Lua code stopped for a moment to reach a safe point
  procs        processes from /proc (children, liveness, owner)
  render       the renderer's tree, the page
  diff         ljperf diff
  locate       where build/bin, share/ljperf and lj_merge are
  messages     Fail and the one-line messages

Standard library only. Nothing in here edits sys.path. No import cycles
(.ci/import_cycles.py checks it in CI). The package is found
because its parent directory, the source root, is on sys.path: the entry
scripts (perf-script/lj_merge.py, perf-script/pprof.py,
tools/ljperf/ljperf.py, examples/openresty/serve.py,
tests/arm64/on-hardware) put it there in their first lines, the one place
that does; CTest gives every test
PYTHONPATH=<source root> (ljperf_test_env in CMakeLists.txt); by hand, run
from the source root with `python3 -m tests.x.y` / `python3 -m bench.x`, or
set PYTHONPATH to it.
"""
