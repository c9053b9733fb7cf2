/*
** Trace positions (ljperf).
**
** While the jitdump is written, a trace's machine code is mapped to the Lua
** frames that produced it, so a sample in a trace names the functions the
** trace inlined. Three tables, rebuilt for each trace and read by the
** emitter when the trace is saved (lj_perf_trace):
** - nodes: (function, PC, caller) of each recorded instruction and of the
**   inlined frames around it, up to the trace's root frame;
** - marks: IR instructions are emitted in order, so "from REF on: NODE"
**   gives the node of every instruction. The recorder marks each bytecode;
**   loop unrolling marks each copy with its original's node;
** - code: the assembler emits each instruction's code below the previous
**   one's, so its MCP after each instruction bounds that instruction's code.
** Only observed, never steering: the IR and machine code are the same with
** tracking on or off. Off (J->tracepos NULL), each hook is one test.
*/

#define lj_tracepos_c
#define LUA_CORE

#include "lj_obj.h"

#if LJ_HASPERF

#include "lj_frame.h"
#include "lj_jit.h"
#include "lj_tracepos.h"

/* Grows *V (N used of *SZ elements of ESZ bytes) for one more. 0: no memory
** (positions of this trace are dropped, the trace itself is unaffected). */
static int tp_grow(void **v, uint32_t n, uint32_t *sz, size_t esz)
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
  tp->valid = 1;
}

/* Instructions from REF on were emitted at NODE. Marks stay sorted by REF:
** after the loop optimisation rolls IR back, later marks are dropped. */
static void tp_mark(TracePos *tp, IRRef ref, uint32_t node)
{
  TPMark *m;
  while (tp->nmark && tp->mark[tp->nmark-1].ref > ref) tp->nmark--;
  if (tp->nmark) {
    m = &tp->mark[tp->nmark-1];
    if (m->node == node) return;
    if (m->ref == ref) { m->node = node; return; }
  }
  if (!tp_grow((void **)&tp->mark, tp->nmark, &tp->szmark, sizeof(TPMark))) {
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

/* Before recording an instruction: its node, sharing the callers' nodes
** with the previous instruction where they are the same frames. */
void lj_tracepos_ins(jit_State *J)
{
  TracePos *tp = J->tracepos;
  GCproto *pts[TP_MAXDEPTH];
  const BCIns *pcs[TP_MAXDEPTH];
  uint32_t n, k, j;
  if (!tp->valid || (n = tp_frames(J, pts, pcs)) == 0) return;
  for (k = 0; k < n && k < tp->npath; k++) {  /* Root first. */
    TPNode *nd = &tp->node[tp->path[k]];
    if (nd->pt != pts[n-1-k] || nd->pc != pcs[n-1-k]) break;
  }
  if (k == n && n == tp->npath) return;  /* Same position. */
  for (j = k; j < n; j++) {
    TPNode *nd;
    if (!tp_grow((void **)&tp->node, tp->nnode, &tp->sznode, sizeof(TPNode))) {
      tp->valid = 0;
      return;
    }
    nd = &tp->node[tp->nnode];
    nd->pt = pts[n-1-j];
    nd->pc = pcs[n-1-j];
    nd->parent = j ? tp->path[j-1] + 1 : 0;
    tp->path[j] = tp->nnode++;
  }
  tp->npath = n;
  tp_mark(tp, J->cur.nins, tp->path[n-1]);
}

/* Node of IR instruction REF (instructions before the first mark, e.g. a
** side trace's loads of its parent's values: the first mark's), or -1. */
int32_t lj_tracepos_node(TracePos *tp, IRRef ref)
{
  uint32_t lo = 0, hi = tp->nmark;
  if (!tp->nmark) return -1;
  while (hi - lo > 1) {  /* Last mark with mark.ref <= REF. */
    uint32_t mid = (lo + hi) / 2;
    if (tp->mark[mid].ref <= ref) lo = mid; else hi = mid;
  }
  return (int32_t)tp->mark[lo].node;
}

/* Loop unrolling copies instruction REF of the loop body next. */
void lj_tracepos_copy(jit_State *J, IRRef ref)
{
  TracePos *tp = J->tracepos;
  int32_t node;
  if (tp->valid && (node = lj_tracepos_node(tp, ref)) >= 0)
    tp_mark(tp, J->cur.nins, (uint32_t)node);
}

/* Each (re)start of the assembly: code entries from MCTOP down. */
void lj_tracepos_asmstart(jit_State *J, MCode *mctop)
{
  TracePos *tp = J->tracepos;
  tp->ncode = 0;
  tp->mctop = mctop;
}

/* The code of instruction REF starts at MCP. */
void lj_tracepos_asm(jit_State *J, IRRef ref, MCode *mcp)
{
  TracePos *tp = J->tracepos;
  TPCode *c;
  if (!tp->valid) return;
  if (tp->ncode && tp->code[tp->ncode-1].mcp == mcp) return;  /* No code. */
  if (!tp_grow((void **)&tp->code, tp->ncode, &tp->szcode, sizeof(TPCode))) {
    tp->valid = 0;
    return;
  }
  c = &tp->code[tp->ncode++];
  c->mcp = mcp;
  c->ref = ref;
}

#endif
