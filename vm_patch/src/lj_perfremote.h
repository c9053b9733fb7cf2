/*
** ljperf remote switch (patch 0004; lj_perfremote.c): ljperf record -p
** switches recording on and off in a running process.
*/
#ifndef _LJ_PERFREMOTE_H
#define _LJ_PERFREMOTE_H

#include "lj_obj.h"

/* The remote switch (ljperf record -p PID; docs/remote-switch.md): one control
** block per process, in initialised writable data, found by ljperf by its
** magic and written through /proc/PID/mem. Every global_State polls it at
** its GC steps and trace exits: one load and compare while SEQ is what it
** last saw (all the time, unless asked). A state that reaches neither (a
** loop that never allocates, a trace that never exits) is kicked: with the
** process's threads stopped, ljperf points the state's instruction dispatch
** at ->vm_perfkick, which restores it and polls (lj_perf_kick), and makes a
** thread that runs trace code call ->vm_perfinject, which saves every
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
#if LJ_HASPERFREMOTE
LJ_DATA volatile LJPerfCtl lj_perf_ctl;
LJ_FUNC void LJ_FASTCALL lj_perf_remote(lua_State *L);
/* At a VM safe point (lj_gc_step, lj_trace_exit): a request changed, or
** switched on remotely (then the lease is checked on each poll).
*/
#define lj_perf_poll(L) \
  do { if (LJ_UNLIKELY(lj_perf_ctl.seq != G(L)->perfseen)) \
	 lj_perf_remote(L); } while (0)
/* lj_perf_init: G accepts the switch unless REFUSE (a scratch state) or
** LUAJIT_PERF_REMOTE=0. lj_perf_close: G leaves it. */
LJ_FUNC void lj_perfremote_init(global_State *g, int refuse);
LJ_FUNC void lj_perfremote_close(global_State *g);
/* LUAJIT_PERF_REMOTE if the remote switch started some part of MASK. */
#define lj_perfremote_status(g, mask) \
  (((g)->perfremote & (mask)) ? (unsigned)LUAJIT_PERF_REMOTE : 0u)
#else
#define lj_perf_poll(L)		UNUSED(L)
#endif
/* Called by ->vm_perfkick and ->vm_perfinject (vm_x64.dasc). */
LJ_FUNCA void LJ_FASTCALL lj_perf_kick(lua_State *L, const BCIns *pc);
LJ_FUNCA void lj_perf_inject(global_State *g, void **rbp);

#endif
