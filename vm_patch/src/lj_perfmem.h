/*
** ljperf allocation samples (patch 0006; lj_perfmem.c): while on, a
** state's allocator is wrapped and every RATE bytes on average an
** allocation, and the free of a sampled block, traps as a perf sample.
*/
#ifndef _LJ_PERFMEM_H
#define _LJ_PERFMEM_H

#include "lj_obj.h"

/* The mean gap in bytes between two samples, by default and at most
** (LUAJIT_PERF_MEMRATE, ljperf record --mem-rate).
*/
#define LJ_PERFMEM_RATE		524288u
#define LJ_PERFMEM_MINRATE	64u
#define LJ_PERFMEM_MAXRATE	0xffffffffu
/* Start wraps G's allocator (RATE 0: LUAJIT_PERF_MEMRATE or the default);
** 0 if it cannot. Stop unwraps it (CLOSING: lua_close).
*/
#if LJ_HASPERFMEM || !LJ_HASPERF  /* Else lj_perfint.h's no-ops (0009). */
LJ_FUNC int lj_perfmem_start(global_State *g, uint64_t rate);
LJ_FUNC void lj_perfmem_stop(global_State *g, int closing);
LJ_FUNC int lj_perfmem_on(global_State *g);
#endif
/* A GC cycle of G starts (END 0) or completes (END 1): lj_gc.c, once per
** boundary; nothing per allocation.
*/
LJ_FUNC void lj_perfmem_gc(global_State *g, int end);
#if LJ_HASPERFMEM || !LJ_HASPERF
/* While switched on remotely, at each poll: frees waiting 100 ms go out. */
LJ_FUNC void lj_perfmem_poll(global_State *g);
#endif

#endif
