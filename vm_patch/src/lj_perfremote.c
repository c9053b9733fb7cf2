/*
** ljperf remote switch (patch 0004): ljperf record -p PID switches recording
** on and off in a process that did not ask for it (docs/remote-switch.md).
** - One control block per process (lj_perf_ctl, lj_perfremote.h) in
**   initialised data, found by ljperf by its magic, written through
**   /proc/PID/mem. Every global_State polls it at safe points
**   (lj_perf_poll) and switches through lj_perf.c as jit.perf would.
** - What the remote switch started it stops, when ljperf asks or its lease
**   lapses; parts that were on before stay on.
** - A state that reaches no poll is kicked: ljperf points its instruction
**   dispatch at ->vm_perfkick (lj_perf_kick), or makes a thread in trace
**   code call ->vm_perfinject (lj_perf_inject); both in vm_x64.dasc.
*/

#define lj_perfremote_c
#define LUA_CORE

#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lj_obj.h"
#include "lj_frame.h"
#include "lj_jit.h"
#include "lj_dispatch.h"
#include "lj_target.h"
#include "lj_fprec.h"
#include "lj_perfint.h"

#if LJ_HASPERFREMOTE

/* global_State.perfremote: the LUAJIT_PERF_* parts the remote switch
** started, and: */
#define PERF_REMOTE_ON		0x40u	/* switched on remotely */
#define PERF_REMOTE_REFUSE	0x80u	/* LUAJIT_PERF_REMOTE=0 */

/* The process's control block (lj_perfremote.h, docs/remote-switch.md).
** Initialised, so it sits in the .data of the file that holds the VM, where
** ljperf finds it by its magic; a fork child has its own copy.
*/
LJ_ASMF void lj_vm_perfkick(void);
#if LJ_HASJIT
LJ_ASMF void lj_vm_perfinject(void);
#endif

LJ_DATADEF volatile LJPerfCtl lj_perf_ctl __attribute__((used, aligned(64))) =
{
  LJPERF_CTL_MAGIC, LJPERF_CTL_VERSION, sizeof(LJPerfCtl), 0, 0, 0, 0, 0, 0, 0,
  0, 0, NULL, (void *)lj_vm_perfkick,
#if LJ_HASJIT
  (void *)lj_vm_perfinject,
#else
  NULL,
#endif
  offsetof(global_State, perfnext), GG_G2DISP, GG_LEN_SDISP,
#if LJ_HASJIT
  GG_G2J + offsetof(jit_State, mcarea),
  GG_G2J + offsetof(jit_State, exitstubgroup), LJ_MAX_EXITSTUBGR,
  EXITSTUB_SPACING, EXITSTUBS_PER_GROUP,
#else
  0, 0, 0, 0, 0,
#endif
  offsetof(global_State, vmstate), 0
};

/* While switched on remotely, perfseen = seq ^ PERF_POLLALL: every poll
** takes the slow path and checks the lease.
*/
#define PERF_POLLALL	0x80000000u

static int64_t perf_now(void)
{
  struct timespec ts;
  /* COARSE: a vDSO read, no syscall; a tick (<= 4 ms) late at most. */
  if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
    return INT64_MAX;  /* No clock: the lease counts as lapsed. */
  return (int64_t)ts.tv_sec*1000000000 + ts.tv_nsec;
}

/* A remote request is live: parts (or, with 0010, a heap snapshot) wanted,
** for this process (a fork child has a copy of its parent's block: not for
** it), lease not lapsed.
*/
static unsigned perf_remote_want(void)
{
  unsigned want = lj_perf_ctl.want & (PERF_PARTS|PERF_HEAP);
  if (want && lj_perf_ctl.target == (uint32_t)getpid() &&
      perf_now() < lj_perf_ctl.deadline)
    return want;
  return 0;
}

/* Slow path of lj_perf_poll. Starts the parts a live request wants that are
** not on yet (those already on stay as they are, and stay on after), or
** stops the ones it started when the request ended or lapsed. Called at a
** safe point; never while a trace is being recorded (then: next poll).
*/
void LJ_FASTCALL lj_perf_remote(lua_State *L)
{
  global_State *g = G(L);
  uint32_t seq = lj_perf_ctl.seq;
  unsigned want;
  if ((g->perfremote & PERF_REMOTE_REFUSE)) {  /* LUAJIT_PERF_REMOTE=0 */
    g->perfseen = seq;
    return;
  }
#if LJ_HASJIT
  if (G2J(g)->state != LJ_TRACE_IDLE) return;
#endif
  __atomic_thread_fence(__ATOMIC_ACQUIRE);  /* seq before the request. */
  want = perf_remote_want();
  if (want && !(g->perfremote & PERF_REMOTE_ON)) {
    unsigned parts = want & PERF_PARTS & ~lj_perf_status(g);
    unsigned failed = parts ? lj_perf_start(L, parts, lj_perf_ctl.mem_rate) : 0;
    if ((want & PERF_HEAP)) lj_heapsnap_remote(L, seq);  /* 0010 */
    g->perfremote = (uint8_t)((parts & ~failed) | PERF_REMOTE_ON);
    if ((g->perfremote & LUAJIT_PERF_FRAMES))
      lj_fprec_fixrbp(L);  /* The interpreter's rbp, saved by our caller. */
    if (failed) {
      char buf[32];
      fprintf(stderr, "ljperf: remote start: could not start:%s\n",
	      lj_perf_partnames(failed, buf));
    }
    __atomic_add_fetch(&lj_perf_ctl.nremote, 1, __ATOMIC_SEQ_CST);
  } else if (!want && (g->perfremote & PERF_REMOTE_ON)) {
    lj_perf_stop(L, g->perfremote & PERF_PARTS);
    g->perfremote = 0;
    __atomic_sub_fetch(&lj_perf_ctl.nremote, 1, __ATOMIC_SEQ_CST);
  }
  if ((g->perfremote & PERF_MEM)) lj_perfmem_poll(g);  /* 0006 */
  lj_perf_ctl.ack = seq;
  g->perfseen = (g->perfremote & PERF_REMOTE_ON) ? seq ^ PERF_POLLALL : seq;
}

/* The states the kick may reach (lj_perf_ctl.states): each state that
** accepts the switch, from the end of lua_newstate to the start of lua_close.
** ljperf reads the list only while every thread is stopped and LOCK is 0.
*/
static void perf_lock(void)
{
  while (__atomic_exchange_n(&lj_perf_ctl.lock, 1, __ATOMIC_ACQUIRE))
    sched_yield();
}

static void perf_unlock(void)
{
  __atomic_store_n(&lj_perf_ctl.lock, 0, __ATOMIC_RELEASE);
}

static void perf_register(global_State *g)
{
  perf_lock();
  g->perfnext = lj_perf_ctl.states;
  lj_perf_ctl.states = g;
  lj_perf_ctl.nstates++;
  perf_unlock();
}

static void perf_unregister(global_State *g)
{
  global_State *volatile *pp;
  perf_lock();
  for (pp = &lj_perf_ctl.states; *pp; pp = &(*pp)->perfnext)
    if (*pp == g) {
      *pp = g->perfnext;
      lj_perf_ctl.nstates--;
      break;
    }
  perf_unlock();
}

void lj_perfremote_init(global_State *g, int refuse)
{
  const char *remote = getenv("LUAJIT_PERF_REMOTE");
  if (refuse || (remote && !strcmp(remote, "0")))
    g->perfremote = PERF_REMOTE_REFUSE;
  else
    perf_register(g);
}

void lj_perfremote_close(global_State *g)
{
  perf_unregister(g);
  if ((g->perfremote & PERF_REMOTE_ON))
    __atomic_sub_fetch(&lj_perf_ctl.nremote, 1, __ATOMIC_SEQ_CST);
  g->perfremote = 0;
}

/* ->vm_perfkick, the instruction dispatch ljperf gave a state that reached
** no poll: the entries go back to what the dispatch mode says (the mode did
** not change, the entries did), then the state polls, with the current PC
** in its C frame for the top frame record (the previous one after: a line
** hook compares with it). The VM dispatches the instruction again.
*/
#define PERF_DISPMODE_INS	0x04	/* DISPMODE_INS, private to lj_dispatch.c */

void LJ_FASTCALL lj_perf_kick(lua_State *L, const BCIns *pc)
{
  global_State *g = G(L);
  void *cf = cframe_raw(L->cframe);
  const BCIns *oldpc = cframe_pc(cf);
  g->dispatchmode ^= PERF_DISPMODE_INS;
  lj_fprec_update(g);
  setcframe_pc(cf, pc);
  lj_perf_poll(L);
  setcframe_pc(cf, oldpc);
}

#if LJ_HASJIT
/* The kick's way into a thread that runs trace code of G: ljperf, with the
** thread stopped between two instructions of a trace, made it call
** ->vm_perfinject (vm_x64.dasc), which saves every register the trace may use, calls
** this with *RBP the trace's rbp, and resumes the trace with what *RBP is
** then. Polls as a GC step of the trace would (lj_gc_step_jit), nothing
** more; the trace's own rbp becomes L's top frame record if that switched
** recording on. Nothing here allocates GC objects. At a trace's entry, or
** while a trace is recorded, there is nothing to do: the poll comes later.
*/
void lj_perf_inject(global_State *g, void **rbp)
{
  lua_State *L = gco2th(gcref(g->cur_L));
  TValue *base = L->base, *top = L->top;
  int on = g->fprec_on;
  if (g->vmstate < 0 || G2J(g)->state != LJ_TRACE_IDLE || !tvref(g->jit_base))
    return;
  L->base = tvref(g->jit_base);
  L->top = curr_topL(L);
  lj_perf_poll(L);
  if (!on && g->fprec_on) {
    void *rec = lj_fprec_top(L);
    if (rec) *rbp = rec;
  }
  L->base = base;
  L->top = top;
}

#endif

#else

/* Without LJ_HASPERFREMOTE (LUAJIT_DISABLE_PERF, arm64) no control block
** is there: nothing kicks the VM. */
void LJ_FASTCALL lj_perf_kick(lua_State *L, const BCIns *pc)
{
  UNUSED(L); UNUSED(pc);
}

void lj_perf_inject(global_State *g, void **rbp)
{
  UNUSED(g); UNUSED(rbp);
}

#endif

