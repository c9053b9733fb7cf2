#!/bin/sh
# Re-captures the C-program and stock-VM fixtures (needs root or
# perf_event_paranoid <= 1, perf >= 6.1, cc; LUAJIT_BASE=path/to/luajit-base).
# Expected stacks in tests/lj_merge/cases/{cstack,sys,stock}-*.case are written
# by hand: after a re-capture, update their counts and PIDs by hand.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
fix="$here/../fixtures"
lj=${LUAJIT_BASE:-$here/../../../build/bin/luajit-base}
tmp=$(mktemp -d /tmp/ljm-c.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cc -O1 -g -fno-omit-frame-pointer -fno-inline -pthread -o "$tmp/cstack" "$here/cstack.c"
F=comm,pid,tid,time,period,ip,sym,symoff,dso,uregs

# fork + thread, default fields and -F $F (uregs: BX), 3 samples per stack
perf record -q -k mono -g --call-graph fp --user-regs=r13 -F 199 \
  -o "$tmp/c.data" "$tmp/cstack" 0.15 1 2>/dev/null
perf script -i "$tmp/c.data" > "$tmp/c.txt" 2>/dev/null
perf script -i "$tmp/c.data" -F $F > "$tmp/cF.txt" 2>/dev/null
perf script -i "$tmp/c.data" -F comm,tid,ip,sym > "$tmp/cmin.txt" 2>/dev/null
python3 "$here/trim.py" 3 "$tmp/c.txt" "$tmp/c.txt" "$fix/cstack.txt" \
  "$tmp/cF.txt" "$fix/cstack-F.txt"
# -F comm,tid,ip,sym has no time: keep the first 12 samples
awk 'BEGIN{RS=""; ORS="\n\n"} NR<=12' "$tmp/cmin.txt" > "$fix/cstack-min.txt"

# no callchain (record without -g): the ip is on the header line, comm is
# right-aligned; the first 12 samples
perf record -q -k mono -F 199 -o "$tmp/n.data" "$tmp/cstack" 0.1 0 2>/dev/null
perf script -i "$tmp/n.data" 2>/dev/null | head -12 > "$fix/nocallchain.txt"

# dropped chains: a normal chain, then chains holding -1 (printed without
# frames); 3 samples of each
perf record -q -k mono -g --call-graph fp -F 499 \
  -o "$tmp/g.data" "$tmp/cstack" 0.2 3 2>/dev/null
perf script -i "$tmp/g.data" > "$tmp/g.txt" 2>/dev/null
python3 "$here/trim.py" 3 "$tmp/g.txt" "$tmp/g.txt" "$fix/dropped.txt"

# syscalls: kernel frames above user frames
perf record -q -k mono -g --call-graph fp -F 499 \
  -o "$tmp/s.data" "$tmp/cstack" 0.1 2 2>/dev/null
perf script -i "$tmp/s.data" > "$tmp/s.txt" 2>/dev/null
python3 "$here/trim.py" --kernel 1 "$tmp/s.txt" "$tmp/s.txt" "$fix/sys.txt"

# stock LuaJIT interpreter: handlers alone or followed by junk addresses
perf record -q -k mono -g --call-graph fp -F 199 \
  -o "$tmp/l.data" "$lj" -joff "$here/fib.lua" 2>/dev/null
perf script -i "$tmp/l.data" > "$tmp/l.txt" 2>/dev/null
python3 "$here/trim.py" 2 "$tmp/l.txt" "$tmp/l.txt" "$tmp/l2.txt"
# keep samples with <= 3 callchain lines (the rest are junk chains)
awk 'BEGIN{RS=""; ORS="\n\n"} gsub(/\n\t/, "\n\t") <= 3' "$tmp/l2.txt" > "$fix/stock-joff.txt"
ls -l "$fix"/cstack*.txt "$fix/sys.txt" "$fix/stock-joff.txt"
