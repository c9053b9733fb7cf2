/*
** Writer cost: N loads of distinct 64-byte functions with L line entries
** each. Prints the time per load for the chosen outputs.
**   bench_emit N L map|jitdump|both [DIR]
** Removes its /tmp/perf-PID.map at the end (set BENCH_KEEP_MAP=1 to keep it);
** the jitdump stays in DIR (default $LUAJIT_PERF_DIR or /tmp) for perf inject.
*/
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ljperf_emit.h"

#define FSIZE 64

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
  if (argc < 4) { fprintf(stderr, "usage: %s N L map|jitdump|both [DIR]\n", argv[0]); return 2; }
  size_t n = strtoul(argv[1], NULL, 0), nl = strtoul(argv[2], NULL, 0);
  unsigned mask = !strcmp(argv[3], "map") ? LJP_MAP :
		  !strcmp(argv[3], "jitdump") ? LJP_JITDUMP : LJP_MAP | LJP_JITDUMP;
  uint8_t *code = mmap(NULL, n * FSIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  LJPLine *lines = calloc(nl ? nl : 1, sizeof(LJPLine));
  if (code == MAP_FAILED || !lines) { perror("alloc"); return 1; }
  for (size_t i = 0; i < n; i++) {  /* mov eax, i; ret; then int3 padding */
    uint8_t *p = code + i * FSIZE;
    memset(p, 0xcc, FSIZE);
    p[0] = 0xb8; memcpy(p + 1, &i, 4); p[5] = 0xc3;
  }
  mprotect(code, n * FSIZE, PROT_READ | PROT_EXEC);
  if (ljp_emit_open(mask, argc > 4 ? argv[4] : NULL) != mask) { fprintf(stderr, "open failed\n"); return 1; }
  char name[64];
  double t0 = now_s();
  for (size_t i = 0; i < n; i++) {
    uint64_t a = (uint64_t)(uintptr_t)(code + i * FSIZE);
    for (size_t k = 0; k < nl; k++) {
      lines[k].addr = a + k * (FSIZE / (nl ? nl : 1));
      lines[k].line = (uint32_t)(10 + k);
      lines[k].file = "@/srv/app/lib/module_with_a_long_name.lua";
    }
    snprintf(name, sizeof(name), "lua:func_%zu@module_with_a_long_name.lua:%zu", i, i % 1000);
    ljp_emit_load(a, FSIZE, name, NULL, lines, nl);
  }
  double t1 = now_s();
  ljp_emit_close();
  double t2 = now_s();
  free(lines);
  printf("loads %zu lines %zu outputs %s: %.3f s total, %.2f us/load (close %.3f ms)\n",
	 n, nl, argv[3], t1 - t0, (t1 - t0) * 1e6 / (double)n, (t2 - t1) * 1e3);
  if ((mask & LJP_MAP) && !getenv("BENCH_KEEP_MAP")) {
    snprintf(name, sizeof(name), "/tmp/perf-%d.map", (int)getpid());
    unlink(name);
  }
  return 0;
}
