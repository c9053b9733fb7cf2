/* fpwalk-host: runs the workloads of demo.lua and host C code under the
** x29 chain sampler (fpwalk.h) and prints, per workload, how many chains
** reach main, why the others end and in what code, and how many Lua frames
** the chains carry.
** Usage: fpwalk-host SYMS DEMO.lua [SAMPLES_PER_WORKLOAD]
** Each workload runs until it has that many samples (default 600).
** Lines "fpwalk NAME samples=N main=M lua=L ..." are for tests to read.
** FPWALK_FOLDED=PATH writes the chains as folded stacks, FPWALK_VERBOSE=1
** prints those that miss main. On a VM with the series (luaJIT_fpwin, arm64
** 0008) some workloads switch Lua frame recording first, and Lua switches it
** with host_fpwin(on), also from trace code through the FFI
** (host_fpwin_ffi); on others those workloads do not run. With the perf
** hooks (0009) four more switch it through luaJIT_perf_start/stop(L,
** "frames") and from Lua through jit.perf. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"

#include "fpwalk.h"
#include "fpclass.h"

/* Neither inlined nor cloned: each keeps its own frame and its name. */
#define HOST_NOINLINE __attribute__((noipa))

/* Lua frame recording's run-time switch (vm_patch 0008, lj_fpwin.c): NULL
** on a VM without it. */
extern int luaJIT_fpwin(lua_State *L, int on) __attribute__((weak));
/* The perf hooks' C API (vm_patch 0009 on arm64, luajit.h): NULL without. */
extern int luaJIT_perf_start(lua_State *L, const char *what) __attribute__((weak));
extern int luaJIT_perf_stop(lua_State *L, const char *what) __attribute__((weak));
extern int luaJIT_perf_status(lua_State *L) __attribute__((weak));
#define HOST_PERF_FRAMES 0x04	/* LUAJIT_PERF_FRAMES */
static lua_State *host_L;

/* host_fpwin(on): recording on (1) or off (0); returns 1 if it is on. */
static int host_fpwin(lua_State *L)
{
  lua_pushinteger(L, luaJIT_fpwin ? luaJIT_fpwin(L, (int)luaL_checkinteger(L, 1)) : 0);
  return 1;
}

/* The same through the FFI, so that trace code switches too. */
HOST_NOINLINE int host_fpwin_ffi(int on)
{
  return luaJIT_fpwin ? luaJIT_fpwin(host_L, on) : 0;
}

/* Pure C recursion: every frame has a record, so every chain must reach
** main. The sampler is checked by it. */
HOST_NOINLINE static long host_crec(int depth, long x)
{
  volatile long acc = x;
  if (depth > 0) return host_crec(depth - 1, x + 1) + 1;
  for (int i = 0; i < 20000; i++) acc = acc * 31 + i;
  return acc;
}

/* A chain the kernel must stop: x29 points at a record whose next fp is
** lower, while a loop runs. Every sample here ends "not rising" short of
** main; the sampler's rules are checked by it. */
HOST_NOINLINE static void host_badrec(void)
{
  uintptr_t rec[2] __attribute__((aligned(16)));
  rec[0] = (uintptr_t)rec - 64;
  rec[1] = (uintptr_t)__builtin_return_address(0);
  __asm__ volatile("mov x9, x29\n\tmov x29, %0\n\tmov x10, #40000\n"
                   "1:\n\tsubs x10, x10, #1\n\tb.ne 1b\n\tmov x29, x9"
                   : : "r"(rec) : "x9", "x10", "cc", "memory");
}

/* Called by demo.lua through the FFI with a callback. */
HOST_NOINLINE int host_each(int n, int (*cb)(int))
{
  int s = 0;
  for (int i = 0; i < n; i++) s += cb(i);
  return s;
}

/* host_call(f, ...): C between Lua frames (a sandwich). */
static int host_call(lua_State *L)
{
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

/* How recording is switched before a workload: not (left as is), by
** luaJIT_fpwin(L, 0/1), by luaJIT_perf_stop/start(L, "frames") (checked with
** luaJIT_perf_status), or by its Lua function through jit.perf. A workload
** that switches runs only where its switch exists. */
typedef enum {
  HOST_ASIS, HOST_FPWIN_OFF, HOST_FPWIN_ON, HOST_PERF_OFF, HOST_PERF_ON, HOST_LUAPERF
} HostSwitch;
typedef struct HostWork { const char *name; const char *lua; HostSwitch sw; } HostWork;

/* lua NULL: C code of the host (by name in host_run). Others: a global
** function of demo.lua. */
static const HostWork host_work[] = {
  { "c_recursion", NULL, HOST_ASIS },
  { "c_bad_record", NULL, HOST_ASIS },
  { "lua_recursion_interp", "rec_interp", HOST_ASIS },
  { "lua_recursion_jit", "rec_jit", HOST_ASIS },
  { "coroutines", "coro", HOST_ASIS },
  { "ffi_callback", "ffi_cb", HOST_ASIS },
  { "hot_loop_trace", "hot", HOST_ASIS },
  { "c_lua_sandwich", "sandwich", HOST_ASIS },
  { "lib_callbacks", "lib_callbacks", HOST_ASIS },
  { "deep_recursion", "deep_recursion", HOST_ASIS },
  { "lua_errors", "lua_errors", HOST_ASIS },
  { "switch_torture", "switch_torture", HOST_FPWIN_ON },
  { "off_recursion_interp", "rec_interp", HOST_FPWIN_OFF },
  { "off_coroutines", "coro", HOST_FPWIN_OFF },
  { "off_sandwich", "sandwich", HOST_FPWIN_OFF },
  { "off_lua_errors", "lua_errors", HOST_FPWIN_OFF },
  { "perf_lua_on", "perf_on", HOST_LUAPERF },
  { "perf_lua_off", "perf_off", HOST_LUAPERF },
  { "perf_capi_on", "rec_interp", HOST_PERF_ON },
  { "perf_capi_off", "rec_interp", HOST_PERF_OFF },
};
#define HOST_NWORK ((int)(sizeof(host_work) / sizeof(host_work[0])))

HOST_NOINLINE static void host_run(lua_State *L, int w, int want)
{
  int n0, n, round = 0;
  double t0 = (double)clock() / CLOCKS_PER_SEC;
  fpw_samples(&n0);
  fpw_phase = w;
  switch (host_work[w].sw) {
  case HOST_ASIS: break;
  case HOST_FPWIN_OFF: case HOST_FPWIN_ON:
    if (!luaJIT_fpwin) return;
    luaJIT_fpwin(L, host_work[w].sw == HOST_FPWIN_ON);
    break;
  case HOST_PERF_OFF: case HOST_PERF_ON: {
    int on = host_work[w].sw == HOST_PERF_ON;
    if (!luaJIT_perf_status) return;
    if ((on ? luaJIT_perf_start : luaJIT_perf_stop)(L, "frames") != 0 ||
        !(luaJIT_perf_status(L) & HOST_PERF_FRAMES) != !on) {
      fprintf(stderr, "fpwalk-host: %s: luaJIT_perf_%s(L, \"frames\") did not\n",
              host_work[w].name, on ? "start" : "stop");
      exit(1);
    }
    break;
  }
  case HOST_LUAPERF:
    if (!luaJIT_perf_status) return;
    break;
  }
  do {
    if (!host_work[w].lua) {
      if (w == 0) host_crec(40, w); else host_badrec();
    } else {
      lua_getglobal(L, host_work[w].lua);
      if (lua_pcall(L, 0, 0, 0)) {
        fprintf(stderr, "fpwalk-host: %s: %s\n", host_work[w].name, lua_tostring(L, -1));
        exit(1);
      }
    }
    fpw_samples(&n);
    /* clock() is a syscall under qemu that takes a share of the samples
    ** (outside the workload): read it every 16th round only. */
  } while (n - n0 < want &&
           ((++round & 15) || (double)clock() / CLOCKS_PER_SEC - t0 < 60.0));
}

typedef struct HostStat {
  int samples, main, lua, depth, stop[FPW_NSTOP];
  int leafall[FPC_NCLASS], leaf[FPC_NCLASS], last[FPC_NCLASS];
} HostStat;

/* FPWALK_FOLDED=PATH: every chain as a folded stack, root first, under
** its workload as "[NAME]". */
static void host_folded(const char *path, const FpwSample *s, int n)
{
  FILE *f = fopen(path, "w");
  if (!f) { perror(path); exit(1); }
  for (int i = 0; i < n; i++) {
    fprintf(f, "[%s]", host_work[s[i].phase].name);
    for (int j = s[i].n - 1; j >= 0; j--) fprintf(f, ";%s", fpc_name(s[i].a[j]));
    fprintf(f, " 1\n");
  }
  if (fclose(f)) { perror(path); exit(1); }
}

/* FPWALK_VERBOSE set: each chain not reaching main, addresses and classes. */
static void host_dump(const FpwSample *s)
{
  printf("chain %s (%s):", host_work[s->phase].name, fpw_stopname[s->stop]);
  for (int i = 0; i < s->n; i++)
    printf(" %#lx/%s", (unsigned long)s->a[i], fpc_classname[fpc_class(s->a[i])]);
  printf("\n");
}

static void host_count(const FpwSample *s, HostStat *st)
{
  int reach = 0;
  st->samples++;
  st->depth += s->n;
  st->leafall[fpc_class(s->a[0])]++;
  st->stop[s->stop]++;
  for (int i = 0; i < s->n; i++) {
    int c = fpc_class(s->a[i]);
    if (c == FPC_MAIN) reach = 1;
    if (c == FPC_LUA && i > 0) st->lua++;
  }
  if (reach) { st->main++; return; }
  if (getenv("FPWALK_VERBOSE")) host_dump(s);
  st->leaf[fpc_class(s->a[0])]++;
  st->last[fpc_class(s->a[s->n - 1])]++;
}

static void host_classes(const char *what, const int *cnt)
{
  printf("  %-11s", what);
  for (int c = 0; c < FPC_NCLASS; c++)
    if (cnt[c]) printf(" %s %d", fpc_classname[c], cnt[c]);
  printf("\n");
}

static void host_report(void)
{
  static HostStat st[HOST_NWORK];
  int n;
  const FpwSample *s = fpw_samples(&n);
  for (int i = 0; i < n; i++) host_count(&s[i], &st[s[i].phase]);
  if (getenv("FPWALK_FOLDED")) host_folded(getenv("FPWALK_FOLDED"), s, n);
  printf("%-22s %7s %7s %6s %6s %6s %6s", "workload", "samples", "main%", "depth",
         "luafr", "fp0", "!rise");
  printf(" %6s %6s %6s\n", "align", "fault", "max");
  for (int w = 0; w < HOST_NWORK; w++) {
    HostStat *t = &st[w];
    printf("%-22s %7d %6.1f%% %6.1f %6d %6d %6d %6d %6d %6d\n", host_work[w].name,
           t->samples, t->samples ? 100.0 * t->main / t->samples : 0.0,
           t->samples ? (double)t->depth / t->samples : 0.0, t->lua,
           t->stop[FPW_END], t->stop[FPW_NOTRISING], t->stop[FPW_UNALIGNED],
           t->stop[FPW_UNREADABLE], t->stop[FPW_MAXDEPTH]);
  }
  printf("\nwhere samples land (class of the sampled pc)\n");
  for (int w = 0; w < HOST_NWORK; w++) {
    printf("%s\n", host_work[w].name);
    host_classes("leaf:", st[w].leafall);
  }
  printf("\nchains not reaching main: class of the sampled pc (leaf) and of the last address\n");
  for (int w = 0; w < HOST_NWORK; w++) {
    if (st[w].main == st[w].samples) continue;
    printf("%s\n", host_work[w].name);
    host_classes("leaf:", st[w].leaf);
    host_classes("ends in:", st[w].last);
  }
  printf("\n");
  for (int w = 0; w < HOST_NWORK; w++) {
    printf("fpwalk %s samples=%d main=%d lua=%d depth=%d", host_work[w].name,
           st[w].samples, st[w].main, st[w].lua, st[w].depth);
    for (int i = 0; i < FPW_NSTOP; i++)
      printf(" stop.%s=%d", fpw_tag[i], st[w].stop[i]);
    for (int c = 0; c < FPC_NCLASS; c++)
      printf(" leaf.%s=%d", fpc_classname[c], st[w].leafall[c]);
    printf("\n");
  }
}

int main(int argc, char **argv)
{
  lua_State *L;
  int want = argc > 3 ? atoi(argv[3]) : 600;
  if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    printf("usage: fpwalk-host SYMS DEMO.lua [SAMPLES_PER_WORKLOAD]\n");
    return 0;
  }
  if (argc < 3 || want <= 0) {
    fprintf(stderr, "usage: fpwalk-host SYMS DEMO.lua [SAMPLES_PER_WORKLOAD]\n");
    return 2;
  }
  if (fpc_load_syms(argv[1])) return 1;
  L = luaL_newstate();
  luaL_openlibs(L);
  lua_register(L, "host_call", host_call);
  lua_register(L, "host_fpwin", host_fpwin);
  host_L = L;
  if (luaL_dofile(L, argv[2])) {
    fprintf(stderr, "fpwalk-host: %s\n", lua_tostring(L, -1));
    return 1;
  }
  if (fpw_start(500, HOST_NWORK * want + 64)) { perror("fpwalk-host: sampler"); return 1; }
  for (int w = 0; w < HOST_NWORK; w++) host_run(L, w, want);
  fpw_stop();
  fpc_load_vm(L);
  host_report();
  lua_close(L);
  return 0;
}
