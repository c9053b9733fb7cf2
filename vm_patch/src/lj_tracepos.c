/*
** Trace positions (ljperf).
**
** While the jitdump is written, a trace's machine code is mapped to the Lua
** frames that produced it, so a sample in a trace names the functions the
** trace inlined. Three tables, rebuilt for each trace and read by the
** emitter when the trace is saved (lj_perf_trace):
** - nodes: (function, PC, caller) of each recorded instruction and of the
**   inlined frames around it, up to the trace's root frame. Instructions
**   that follow each other on one line of one frame share the first one's
**   node (a profile resolves to lines);
** - marks: IR instructions are emitted in order, so "from REF on: NODE"
**   gives the node of every instruction. The recorder marks each bytecode;
**   loop unrolling marks each copy with its original's node;
** - code: the assembler emits each instruction's code below the previous
**   one's, so its MCP after each instruction bounds that instruction's code;
**   a run of instructions at one node is one entry.
** Only observed, never steering: the IR and machine code are the same with
** tracking on or off. Off (J->tracepos NULL), each hook is one test.
*/

#define lj_tracepos_c
#define LUA_CORE

#include "lj_obj.h"

#if LJ_HASTRACEPOS

#include "lj_frame.h"
#include "lj_jit.h"
#include "lj_perfint.h"
#include "lj_tracepos.h"

/* Grows *V (N used of *SZ elements of ESZ bytes) for one more. 0: no memory
** (positions of this trace are dropped, the trace itself is unaffected). */
int lj_tracepos_grow(void **v, uint32_t n, uint32_t *sz, size_t esz)
{
  if (n == *sz) {
    uint32_t nsz = *sz ? 2 * *sz : 64;
    void *nv = realloc(*v, nsz * esz);
    if (nv == NULL) return 0;
    *v = nv;
    *sz = nsz;
  }
  return 1;
}

void lj_tracepos_on(jit_State *J, int on)
{
  TracePos *tp = J->tracepos;
  if (on && tp == NULL) {
    J->tracepos = (TracePos *)calloc(1, sizeof(TracePos));
    /* valid stays 0 until the next trace starts from its first instruction. */
  } else if (!on && tp != NULL) {
    J->tracepos = NULL;
    free(tp->node);
    free(tp->mark);
    free(tp->code);
    free(tp);
  }
}

void lj_tracepos_setup(jit_State *J)
{
  TracePos *tp = J->tracepos;
  tp->nnode = tp->nmark = tp->ncode = tp->npath = 0;
  tp->mctop = NULL;
  tp->base = NULL;
  tp->line = -1;
  tp->valid = 1;
}

/* Instructions from REF on were emitted at NODE. Marks stay sorted by REF:
** after the loop optimisation rolls IR back, later marks are dropped. */
static LJ_AINLINE void tp_mark(TracePos *tp, IRRef ref, uint32_t node)
{
  TPMark *m;
  while (tp->nmark && tp->mark[tp->nmark-1].ref > ref) tp->nmark--;
  if (tp->nmark) {
    m = &tp->mark[tp->nmark-1];
    if (m->node == node) return;
    if (m->ref == ref) { m->node = node; return; }
  }
  if (!tp_room(tp->mark, tp->nmark, tp->szmark)) {
    tp->valid = 0;
    return;
  }
  m = &tp->mark[tp->nmark++];
  m->ref = ref;
  m->node = node;
}

/* The Lua frames of the instruction being recorded, innermost first: the
** running frame and the callers the trace entered since its root frame
** (J->baseslot counts the slots from the root frame's base). A vararg
** frame's lower part and pcall's own frame add no function. */
static uint32_t tp_frames(jit_State *J, GCproto **pts, const BCIns **pcs)
{
  lua_State *L = J->L;
  TValue *root = L->base - J->baseslot + 1 + LJ_FR2;
  TValue *base = L->base;
  const BCIns *pc = J->pc + 1;
  uint32_t n = 0;
  int upper = 0;  /* BASE is the upper part of a vararg frame. */
  for (;;) {
    TValue *f = base - 1;
    GCfunc *fn = frame_func(f);
    if (!upper && pc && isluafunc(fn) && n < TP_MAXDEPTH) {
      pts[n] = funcproto(fn);
      pcs[n++] = pc;
    }
    if (base <= root || J->framedepth <= 0) break;
    upper = 0;
    if (frame_islua(f)) {
      pc = frame_pc(f);
      base = frame_prevl(f) + 1;
    } else if (frame_iscont(f)) {
      pc = frame_contpc(f);
      base = frame_prevd(f) + 1;
    } else if (frame_isvarg(f)) {
      upper = 1;
      base = frame_prevd(f) + 1;
    } else if (frame_ispcall(f)) {
      pc = NULL;  /* pcall's frame: its Lua link follows. */
      base = frame_prevd(f) + 1;
    } else {
      break;  /* A C frame is never inside a trace. */
    }
  }
  return n;
}

/* A new node (PT, PC) at depth J of the path, its caller the one at J-1.
** 0: no memory (positions of this trace are dropped). */
static LJ_AINLINE int tp_push(TracePos *tp, uint32_t j, GCproto *pt, const BCIns *pc)
{
  TPNode *nd;
  if (!tp_room(tp->node, tp->nnode, tp->sznode)) {
    tp->valid = 0;
    return 0;
  }
  nd = &tp->node[tp->nnode];
  nd->pt = pt;
  nd->pc = pc;
  nd->parent = j ? tp->path[j-1] + 1 : 0;
  tp->path[j] = tp->nnode++;
  return 1;
}

/* The node of the instruction about to be recorded in a frame other than
** the previous instruction's: the whole path, sharing the callers' nodes
** with the previous path where they are the same frames. */
static LJ_NOINLINE void tp_ins_frames(jit_State *J, TracePos *tp)
{
  GCproto *pts[TP_MAXDEPTH];
  const BCIns *pcs[TP_MAXDEPTH];
  uint32_t n, k, j;
  tp->base = NULL;
  if ((n = tp_frames(J, pts, pcs)) == 0) return;
  for (k = 0; k < n && k < tp->npath; k++) {  /* Root first. */
    TPNode *nd = &tp->node[tp->path[k]];
    if (nd->pt != pts[n-1-k] || nd->pc != pcs[n-1-k]) break;
  }
  tp->base = J->L->base;
  if (k == n && n == tp->npath) return;  /* Same position. */
  for (j = k; j < n; j++)
    if (!tp_push(tp, j, pts[n-1-j], pcs[n-1-j])) return;
  tp->npath = n;
  tp->line = lj_perf_line(pts[0], proto_bcpos(pts[0], pcs[0]) - 1);
  tp_mark(tp, J->cur.nins, tp->path[n-1]);
}

/* Before recording an instruction: its node. In the previous instruction's
** frame (same base: same callers; a tail call may have replaced its
** function) only the innermost node may be new: on another line. */
void lj_tracepos_ins(jit_State *J)
{
  TracePos *tp = J->tracepos;
  GCfunc *fn;
  if (!tp->valid) return;
  if (J->L->base == tp->base && isluafunc(fn = frame_func(J->L->base - 1))) {
    GCproto *pt = funcproto(fn);
    BCLine line = lj_perf_line(pt, proto_bcpos(pt, J->pc));
    if (line == tp->line && line >= 0 &&
	tp->node[tp->path[tp->npath-1]].pt == pt)
      return;  /* Same line. */
    if (tp_push(tp, tp->npath-1, pt, J->pc + 1)) {
      tp->line = line;
      tp_mark(tp, J->cur.nins, tp->path[tp->npath-1]);
    }
    return;
  }
  tp_ins_frames(J, tp);
}

/* Index of the last mark with mark.ref <= REF (0 if none; NMARK > 0). */
static uint32_t tp_find(TracePos *tp, IRRef ref)
{
  uint32_t lo = 0, hi = tp->nmark;
  while (hi - lo > 1) {
    uint32_t mid = (lo + hi) / 2;
    if (tp->mark[mid].ref <= ref) lo = mid; else hi = mid;
  }
  return lo;
}

/* Loop unrolling copies instruction REF of the loop body next. REFs rise
** from copy to copy: the search goes on from the last copy's mark. */
void lj_tracepos_copy(jit_State *J, IRRef ref)
{
  TracePos *tp = J->tracepos;
  uint32_t k = tp->copyk;
  if (!tp->valid || !tp->nmark) return;
  if (k < tp->nmark && tp->mark[k].ref <= ref)
    while (k + 1 < tp->nmark && tp->mark[k+1].ref <= ref) k++;
  else
    k = tp_find(tp, ref);
  tp->copyk = k;
  tp_mark(tp, J->cur.nins, tp->mark[k].node);
}

/* Each (re)start of the assembly: code entries from MCTOP down. */
void lj_tracepos_asmstart(jit_State *J, MCode *mctop)
{
  TracePos *tp = J->tracepos;
  tp->ncode = 0;
  tp->mctop = mctop;
  tp->asmk = tp->nmark ? tp->nmark - 1 : 0;  /* The last instruction's. */
}

#endif
