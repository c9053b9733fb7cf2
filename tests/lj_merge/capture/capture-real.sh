#!/bin/sh
# Captures the lj_merge fixtures of the REAL patched VM (needs root or
# perf_event_paranoid <= 1, perf >= 6.1, cc, a built tree: LJPERF_BUILD, default
# ../../../build; it must have bin/luajit and tests/fpchain/host).
#
#   sh tests/lj_merge/capture/capture-real.sh [SCENARIO...]
#
# Scenarios (workloads in capture/real/, run from a scratch directory so the
# chunk names are short: interp.lua, not /tmp/.../interp.lua):
#   interp  luajit -joff interp.lua     interpreter: calls, string.byte, %
#   jit     luajit jit.lua              traces (loops, inlined calls, helpers)
#   ffi     luajit ffi.lua              FFI calls from a trace and from the
#                                       interpreter, an FFI callback into Lua
#   host    tests/fpchain/host 400 100000
#                                       C host: main -> lua_pcall -> Lua -> C
#                                       -> lua_call -> Lua -> C
#   coro    luajit -joff coro.lua       a coroutine resumed from Lua
#   corojit luajit coro.lua             the same, JIT on
#   fork    luajit -joff fork.lua       parent + 2 forked children (one with a
#                                       jitdump of its own, one without)
# Each: LUAJIT_PERF=1 LUAJIT_PERF_DIR=<scratch>,
#   perf record -e cpu-clock -k mono -g --call-graph fp --user-regs=r13 -F 499
#   perf inject --jit
# and four texts of the same samples, trimmed with trim.py (1 sample per
# distinct callchain, 6 for host, at most MAX=30 of them, spread over the run):
#   raw.txt      perf script                          (no inject)
#   inject.txt   perf script                          (after inject)
#   rawF.txt     perf script -F $F --show-task-events (no inject)
#   injectF.txt  perf script -F $F --show-task-events (after inject)
#   F = comm,pid,tid,time,period,ip,sym,symoff,dso,uregs
# plus the jit-PID.dump and perf-PID.map files of the run (the addresses in
# the texts are only meaningful with them). Everything goes to
# tests/lj_merge/fixtures/real/SCENARIO/. The expected stacks in
# tests/lj_merge/cases/real-*.case are written by hand: after a re-capture,
# update their PIDs and counts by hand (the workloads are built so that
# every sample of a phase has the same stack).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
fix="$here/../fixtures/real"
build=${LJPERF_BUILD:-$here/../../../build}
build=$(cd "$build" && pwd)
lj="$build/bin/luajit"
host="$build/tests/fpchain/host"
MAX=${MAX:-30}
F=comm,pid,tid,time,period,ip,sym,symoff,dso,uregs
tmp=$(mktemp -d /tmp/ljm-real.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
scenarios=${*:-interp jit ffi host coro corojit fork}

for sc in $scenarios; do
  d="$tmp/$sc"
  mkdir -p "$d"
  cp "$here"/real/*.lua "$d/"
  keep=1
  case $sc in
    interp) cmd="$lj -joff interp.lua 0.4" ;;
    jit)    cmd="$lj jit.lua 0.4" ;;
    ffi)    cc -O2 -g -fno-omit-frame-pointer -shared -fPIC -o "$d/libljmffi.so" \
                 "$here/real/ljmffi.c"
            cmd="$lj ffi.lua 0.4" ;;
    host)   cmd="$host 600 100000"; keep=6 ;;
    coro)   cmd="$lj -joff coro.lua 0.4" ;;
    corojit) cmd="$lj coro.lua 0.4" ;;
    fork)   cmd="$lj -joff fork.lua 0.3" ;;
    *) echo "unknown scenario $sc" >&2; exit 2 ;;
  esac
  (cd "$d" && LUAJIT_PERF=1 LUAJIT_PERF_DIR="$d" \
     perf --buildid-dir "$tmp/.debug" record -q -e cpu-clock -k mono -g \
       --call-graph fp --user-regs=r13 -F 499 -o "$d/perf.data" $cmd >/dev/null)
  perf --buildid-dir "$tmp/.debug" inject --jit -i "$d/perf.data" -o "$d/perf.jit.data"
  for v in raw inject; do
    data="$d/perf.data"
    if [ $v = inject ]; then data="$d/perf.jit.data"; fi
    perf --buildid-dir "$tmp/.debug" script -i "$data" > "$d/$v.full" 2>/dev/null
    perf --buildid-dir "$tmp/.debug" script -i "$data" -F $F --show-task-events \
      > "$d/${v}F.full" 2>/dev/null
  done
  rm -rf "$fix/$sc"
  mkdir -p "$fix/$sc"
  python3 "$here/trim.py" --max "$MAX" $keep "$d/raw.full" \
    "$d/raw.full" "$fix/$sc/raw.txt" "$d/inject.full" "$fix/$sc/inject.txt" \
    "$d/rawF.full" "$fix/$sc/rawF.txt" "$d/injectF.full" "$fix/$sc/injectF.txt"
  for f in "$d"/jit-*.dump; do
    [ -f "$f" ] || continue
    cp "$f" "$fix/$sc/"
    pid=$(basename "$f" .dump | cut -d- -f2)
    if [ -f "/tmp/perf-$pid.map" ]; then mv "/tmp/perf-$pid.map" "$fix/$sc/"; fi
  done
  # processes that wrote no dump (fork child B) may still have left a map
  for pid in $(awk '$0 !~ /PERF_RECORD/ && $0 ~ /^[^ \t]/ {print $2}' "$fix/$sc/rawF.txt" |
               cut -d/ -f1 | sort -u); do
    if [ -f "/tmp/perf-$pid.map" ]; then mv "/tmp/perf-$pid.map" "$fix/$sc/"; fi
  done
  ls -l "$fix/$sc"
done
