#!/bin/sh
# Re-captures the fakevm fixtures (needs root or perf_event_paranoid <= 1,
# perf >= 6.1, a C compiler). Writes tests/lj_merge/fixtures/fakevm-*.txt and
# tests/lj_merge/fixtures/fakevm/ (jit-PID.dump, perf-PID.map). The expected
# stacks in tests/lj_merge/cases/fakevm-*.case are written by hand from what
# fakevm.c does: after a re-capture, update their counts and PIDs by hand.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
fix="$here/../fixtures"
tmp=$(mktemp -d /tmp/ljm-fakevm.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cc -O1 -g -fno-omit-frame-pointer -pthread -o "$tmp/fakevm" "$here/fakevm.c"
perf record -q -k mono -g --call-graph fp --user-regs=r13 -F 199 \
  -o "$tmp/perf.data" "$tmp/fakevm" 0.15 "$tmp" 2>/dev/null
perf inject --jit -i "$tmp/perf.data" -o "$tmp/perf.jit.data"
F=comm,pid,tid,time,period,event,ip,sym,symoff,dso,uregs
perf script -i "$tmp/perf.data" > "$tmp/raw.txt" 2>/dev/null
perf script -i "$tmp/perf.jit.data" > "$tmp/inject.txt" 2>/dev/null
perf script -i "$tmp/perf.data" -F $F > "$tmp/rawF.txt" 2>/dev/null
perf script -i "$tmp/perf.jit.data" -F $F > "$tmp/injectF.txt" 2>/dev/null
python3 "$here/trim.py" 3 "$tmp/raw.txt" \
  "$tmp/raw.txt" "$fix/fakevm-raw.txt" \
  "$tmp/inject.txt" "$fix/fakevm-inject.txt" \
  "$tmp/rawF.txt" "$fix/fakevm-rawF.txt" \
  "$tmp/injectF.txt" "$fix/fakevm-injectF.txt"
rm -rf "$fix/fakevm"
mkdir -p "$fix/fakevm"
for d in "$tmp"/jit-*.dump; do
  cp "$d" "$fix/fakevm/"
  pid=$(basename "$d" .dump | cut -d- -f2)
  if [ -f "/tmp/perf-$pid.map" ]; then mv "/tmp/perf-$pid.map" "$fix/fakevm/"; fi
done
ls -l "$fix/fakevm" "$fix"/fakevm-*.txt
