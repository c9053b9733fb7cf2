/*
** Patch points in trace machine code (ljperf).
**
** While recording (DISPMODE_FPREC), trace code keeps rbp at a record slot
** {next, call site}: the two words stock traces save r13 and r12 in
** (TRACEPP_SLOT from the stack pointer a trace is entered with). next is
** the record of the Lua frame the trace runs in, and each C call stores its
** return address as the call site. perf thus walks from any callee, framed
** or not, to the trace's code at the call and on through the Lua frames.
** ->vm_fp_jentry sets rbp, next and (to the trace's entry: perf then reads
** trace code, never a stale word) the call site when the interpreter enters
** a trace; RETF moves next (asm_retf), and a trace exit relinks rbp. A
** trace that jumps to another trace in a frame it made (BASE moves up: a
** loop calling a function with a loop of its own, an up-recursion) goes
** through ->vm_fp_link, which writes the records of the frames it made
** (lj_fprec_tracelink) and points next at the target's: so in trace code,
** next is always the record of the frame at BASE, the lowest base.
**
** That work sits behind patch points the assembler reserves (lj_asm_x86.h):
** - before a block in line (RETF's, and a call whose target must stay: a
**   register, the GC step), a 2-byte short jump over it (asm_ppsite);
** - a C call's own target (its rel32, or the literal a far call goes
**   through): a thunk at the MCode area's bottom while recording, which
**   stores the call site and jumps on (asm_ppcall). Off costs nothing.
** - a link's jump into a frame the trace made: a thunk while recording,
**   which hands the target's entry and start PC to ->vm_fp_link
**   (asm_pplink). Off costs nothing; a link at the same base needs none.
** Every trace is assembled in the off form, whatever the mode, so its IR,
** layout, addresses and jitdump never depend on it.
**
** Invariants:
** - While DISPMODE_FPREC is set, every patch point of every trace of the
**   state holds its on image (a 2-byte NOP falling into its block, a
**   thunk's address); while it is not, its off image. Only those bytes
**   ever change, and the blocks and thunks only write the record slot,
**   fprec_vbase and rbp.
** - Only the thread that owns the state flips them: when the mode changes
**   (lj_dispatch_update) and, for a new trace, when it is saved, after it
**   was described to perf. The thread then runs C code, at an instruction
**   boundary of any trace it is in, so either form is whole wherever the
**   trace goes on; lj_perf_all, describing traces again (a fork child),
**   turns them off around it. Protection goes through lj_mcode_patch (W^X
**   kept).
** - rbp points at the slot in trace code while recording, except after a
**   start inside a trace (the kick, a GC step) until its next RETF or exit:
**   those samples miss the trace's frames, as before it had any.
** - A trace keeps its points (T->pp), freed with the trace; the thunks and
**   literals live in its MCode area, like exit stubs.
*/

#define lj_tracepp_c
#define LUA_CORE

#include "lj_obj.h"

#if LJ_HASJIT && LJ_HASFPREC

#include "lj_gc.h"
#include "lj_jit.h"
#include "lj_mcode.h"
#include "lj_trace.h"
#include "lj_dispatch.h"
#include "lj_tracepp.h"

LJ_ASMF void lj_vm_fp_jentry(void);
LJ_ASMF void lj_vm_fp_jentry_off(void);

void lj_tracepp_init(global_State *g)
{
  g->fprec_jentry = (void *)lj_vm_fp_jentry_off;
}

/* A patch point the assembler just emitted: LEN bytes at P, with their
** images. Kept relative to the MCode area until the trace's mcode is known.
** Assembly starts over (lj_tracepp_reset) whenever the assembler retries.
*/
void lj_tracepp_add(jit_State *J, MCode *p, MSize len, uint64_t off,
		    uint64_t on)
{
  TracePP *pp;
  if (J->ppn >= J->ppsz)
    lj_mem_growvec(J->L, J->ppbuf, J->ppsz, LJ_MAX_MEM32, TracePP);
  pp = &J->ppbuf[J->ppn++];
  pp->ofs = (int32_t)(p - (MCode *)J->mcarea);
  pp->len = len;
  pp->off = off;
  pp->on = on;
}

/* A displacement from the stack pointer to the record slot, which the
** assembler completes with the trace's stack adjustment (asm_ppfixup).
*/
void lj_tracepp_adddisp(jit_State *J, MCode *disp)
{
  if (J->pdn >= J->pdsz)
    lj_mem_growvec(J->L, J->pdbuf, J->pdsz, LJ_MAX_MEM32, MCode *);
  J->pdbuf[J->pdn++] = disp;
}

static void tracepp_set(GCtrace *T, int on)
{
  uint32_t i;
  for (i = 0; i < T->npp; i++) {
    TracePP *pp = &T->pp[i];
    memcpy(T->mcode + pp->ofs, on ? &pp->on : &pp->off, pp->len);
  }
}

static void tracepp_flipone(jit_State *J, GCtrace *T, int on)
{
  MCode *area = lj_mcode_patch(J, T->mcode, 0);
  tracepp_set(T, on);
  lj_mcode_patch(J, area, 1);
}

/* Keeps the points and thunks of the trace being saved with it, in the off
** form it was assembled in (lj_perf_trace describes it so).
*/
void lj_tracepp_save(jit_State *J, GCtrace *T)
{
  uint32_t i, n = J->ppn;
  int32_t area = (int32_t)(T->mcode - (MCode *)J->mcarea);
  T->pp = NULL;
  T->npp = 0;
  T->thunks = J->thunklo ? (int32_t)(J->thunklo - T->mcode) : 0;
  T->szthunks = (uint32_t)(J->thunkhi - J->thunklo);
  lj_tracepp_reset(J);
  if (!n) return;
  T->pp = lj_mem_newvec(J->L, n, TracePP);
  for (i = 0; i < n; i++) {
    T->pp[i] = J->ppbuf[i];
    T->pp[i].ofs -= area;
  }
  T->npp = n;
}

/* The new trace, described, follows the current mode. */
void lj_tracepp_follow(jit_State *J, GCtrace *T)
{
  if (T->npp && (J2G(J)->dispatchmode & DISPMODE_FPREC))
    tracepp_flipone(J, T, 1);
}

/* Called when a trace is freed or flushed (then traceno is 0 and
** lj_trace_free skips this: its points go with the flush).
*/
void lj_tracepp_free(global_State *g, GCtrace *T)
{
  lj_mem_freevec(g, T->pp, T->npp, TracePP);
  T->pp = NULL;
  T->npp = 0;
}

/* An MCode area's header: lj_mcode.c's MCLink, which older trees keep
** private to that file (the same two fields in every tree).
*/
typedef struct TracePPArea {
  MCode *next;	/* The area allocated before it. */
  size_t size;	/* Its size in bytes. */
} TracePPArea;

/* The mode changed: the trace entry and every trace's points follow. Each
** MCode area is made writable once for all its traces (a protection change
** costs tens of microseconds; a switch must not cost that per trace).
*/
void lj_tracepp_flip(jit_State *J, int on)
{
  MCode *area;
  J2G(J)->fprec_jentry = on ? (void *)lj_vm_fp_jentry :
			      (void *)lj_vm_fp_jentry_off;
  for (area = J->mcarea; area; area = ((TracePPArea *)area)->next) {
    MCode *end = area + ((TracePPArea *)area)->size;
    int open = 0;
    TraceNo i;
    for (i = 1; i < (TraceNo)J->sizetrace; i++) {
      GCtrace *T = traceref(J, i);
      if (T && T->npp && T->mcode >= area && T->mcode < end) {
	if (!open) { lj_mcode_patch(J, area, 0); open = 1; }
	tracepp_set(T, on);
      }
    }
    if (open) lj_mcode_patch(J, area, 1);
  }
}

#endif
