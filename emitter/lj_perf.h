/*
** ljperf hooks called by the patched LuaJIT VM (implemented in lj_perf.c).
** Compiled inside LuaJIT's src/ directory: the build copies emitter/ there.
** Without LJ_HASPERF (LUAJIT_DISABLE_PERF) the hooks are no-ops.
*/
#ifndef LJ_PERF_H
#define LJ_PERF_H

#include "lj_obj.h"
#include "lj_jit.h"

/* What a global_State describes to perf (global_State.perfmask): the
** LUAJIT_PERF_* bits of luajit.h (map, jitdump, frames), as
** luaJIT_perf_status returns them.
*/

/* The remote switch (ljperf record -p PID; docs/remote.md): one control
** block per process, in initialised writable data, found by ljperf by its
** magic and written through /proc/PID/mem. Every global_State polls it at
** its GC steps and trace exits: one load and compare while SEQ is what it
** last saw (all the time, unless asked). A state that reaches neither (a
** loop that never allocates, a trace that never exits) is kicked: with the
** process's threads stopped, ljperf points the state's instruction dispatch
** at ->vm_perfkick, which restores it and polls (lj_perf_kick), and makes a
** thread that runs trace code call lj_vm_perfinject, which saves every
** register, polls (lj_perf_inject) and returns into the trace. The block
** publishes what that needs: the list of states and where their dispatch
** tables and trace code are.
*/
#define LJPERF_CTL_MAGIC	"\x7fLuaJIT-perfctl"	/* 16 bytes with its NUL. */
#define LJPERF_CTL_VERSION	3	/* 3: LUAJIT_PERF_MEM, mem_rate */
typedef struct LJPerfCtl {
  char magic[16];	/* LJPERF_CTL_MAGIC */
  uint32_t version;	/* LJPERF_CTL_VERSION: the layout below. */
  uint32_t size;	/* sizeof(LJPerfCtl) */
  uint32_t seq;		/* ljperf: bumped (last) after each request. */
  uint32_t want;	/* ljperf: LUAJIT_PERF_* parts wanted; 0: off. */
  int64_t deadline;	/* ljperf: the lease, CLOCK_MONOTONIC ns. */
  uint32_t target;	/* ljperf: the pid asked (a fork child: not it). */
  uint32_t owner;	/* ljperf: its own pid. */
  uint32_t ack;		/* VM: the last SEQ a lua_State acted on. */
  int32_t nremote;	/* VM: lua_States switched on remotely now. */
  /* The kick (read by ljperf while every thread is stopped). */
  uint32_t nstates;	/* VM: states in the list below. */
  uint32_t lock;	/* VM: nonzero while the list changes. */
  global_State *states;	/* VM: states that accept the switch, linked by
			** their perfnext. */
  void *kick;		/* ->vm_perfkick */
  void *inject;		/* lj_vm_perfinject (0: no JIT) */
  uint32_t o_next;	/* From a global_State: its perfnext, */
  uint32_t o_disp;	/* its instruction dispatch (NKICK entries), */
  uint32_t nkick;
  uint32_t o_mcarea;	/* its first trace code area (J->mcarea; 0: no JIT) */
  uint32_t o_stubs;	/* and its exit stub groups (J->exitstubgroup): */
  uint32_t nstubgr;	/* that many, each STUBSP*NSTUB bytes of stubs. */
  uint32_t stubsp, nstub;
  uint32_t o_vmstate;	/* its vmstate (>= 0: in a trace) */
  uint32_t mem_rate;	/* ljperf: mean bytes between allocation samples
			** (LUAJIT_PERF_MEM; 0: the default). */
} LJPerfCtl;
#if LJ_HASPERF
LJ_DATA volatile LJPerfCtl lj_perf_ctl;
LJ_FUNC void LJ_FASTCALL lj_perf_remote(lua_State *L);
/* At a VM safe point (lj_gc_step, lj_trace_exit): a request changed, or
** switched on remotely (then the lease is checked on each poll).
*/
#define lj_perf_poll(L) \
  do { if (LJ_UNLIKELY(lj_perf_ctl.seq != G(L)->perfseen)) \
	 lj_perf_remote(L); } while (0)
LJ_FUNC void lj_perf_init(lua_State *L);	/* End of lua_newstate. */
LJ_FUNC void lj_perf_inject(global_State *g, void **rbp);  /* The kick. */
LJ_FUNC void lj_perf_close(global_State *g);	/* Start of lua_close. */
LJ_FUNC void lj_perf_chunk(lua_State *L, GCproto *pt);  /* Chunk loaded. */
LJ_FUNC void lj_perf_trace(jit_State *J, GCtrace *T);	 /* Trace saved. */
LJ_FUNC int luaopen_jit_perf(lua_State *L);	/* require "jit.perf" */
#else
#define lj_perf_init(L)		UNUSED(L)
#define lj_perf_close(g)	UNUSED(g)
#define lj_perf_chunk(L, pt)	UNUSED(pt)
#define lj_perf_trace(J, T)	UNUSED(T)
#define lj_perf_poll(L)		UNUSED(L)
#endif

/* Allocation samples (lj_perfmem.c): the mean gap in bytes between two, by
** default and at most (LUAJIT_PERF_MEMRATE, ljperf record --mem-rate).
*/
#define LJ_PERFMEM_RATE		524288u
#define LJ_PERFMEM_MINRATE	64u
#define LJ_PERFMEM_MAXRATE	0xffffffffu
/* Start wraps G's allocator (RATE 0: LUAJIT_PERF_MEMRATE or the default);
** 0 if it cannot. Stop unwraps it (CLOSING: lua_close).
*/
LJ_FUNC int lj_perfmem_start(global_State *g, uint64_t rate);
LJ_FUNC void lj_perfmem_stop(global_State *g, int closing);
LJ_FUNC int lj_perfmem_on(global_State *g);
/* A GC cycle of G starts (END 0) or completes (END 1): lj_gc.c, once per
** boundary; nothing per allocation.
*/
LJ_FUNC void lj_perfmem_gc(global_State *g, int end);
/* While switched on remotely, at each poll: frees waiting 100 ms go out. */
LJ_FUNC void lj_perfmem_poll(global_State *g);

#endif
