/*
** Trace positions (ljperf, patch 0005): for each machine-code range of a
** trace, the Lua frames whose bytecode produced it, innermost first; see
** lj_tracepos.c. Without LJ_HASTRACEPOS the hooks are no-ops.
*/

#ifndef _LJ_TRACEPOS_H
#define _LJ_TRACEPOS_H

#include "lj_obj.h"
#include "lj_jit.h"
#include "lj_dispatch.h"
#include "lj_debug.h"

#if LJ_HASTRACEPOS

/* A position: the bytecode PC of one frame and the position of its caller
** (index+1, 0 for the trace's root frame). PC follows the interpreter's
** convention for a frame link: the instruction after the one running
** (innermost) or after the call (callers).
*/
typedef struct TPNode {
  GCproto *pt;		/* Function of this frame. */
  const BCIns *pc;	/* Next instruction in PT. */
  uint32_t parent;	/* Caller's node + 1, 0: root frame of the trace. */
} TPNode;

/* IR instructions from REF on were emitted at NODE (until the next mark).
** Instructions before the first mark (e.g. a side trace's loads of its
** parent's values) count as the first mark's. */
typedef struct TPMark {
  IRRef ref;
  uint32_t node;
} TPMark;

/* Machine code from MCP up to the previous entry's MCP was emitted at NODE
** (the assembler emits backwards: entries have falling MCP). Neighbouring
** instructions at the same node share one entry.
*/
typedef struct TPCode {
  MCode *mcp;
  int32_t node;
} TPCode;

#define TP_MAXDEPTH	32	/* Deeper inlined frames share the 32nd's node. */

typedef struct TracePos {
  TPNode *node; uint32_t nnode, sznode;
  TPMark *mark; uint32_t nmark, szmark;
  TPCode *code; uint32_t ncode, szcode;
  MCode *mctop;		/* End of the code the entries cover. */
  int valid;		/* Tracked since the trace's first instruction. */
  uint32_t npath;	/* Nodes of the last recorded instruction, root first. */
  BCLine line;		/* Line of its innermost node (-1: none). */
  TValue *base;		/* Its L->base (NULL: none); its innermost frame's. */
  uint32_t copyk;	/* Mark of the last instruction loop unrolling copied. */
  uint32_t asmk;	/* Mark of the last instruction assembled. */
  uint32_t path[TP_MAXDEPTH];
} TracePos;

LJ_FUNC void lj_tracepos_on(jit_State *J, int on);
LJ_FUNC void lj_tracepos_setup(jit_State *J);
LJ_FUNC void lj_tracepos_ins(jit_State *J);
LJ_FUNC void lj_tracepos_copy(jit_State *J, IRRef ref);
LJ_FUNC void lj_tracepos_asmstart(jit_State *J, MCode *mctop);
LJ_FUNC int lj_tracepos_grow(void **v, uint32_t n, uint32_t *sz, size_t esz);

/* Room for one more element in array V (N used of SZ). 0: no memory. */
#define tp_room(v, n, sz) \
  ((n) < (sz) || lj_tracepos_grow((void **)&(v), (n), &(sz), sizeof(*(v))))

/* The code of instruction REF starts at MCP. Once per assembled
** instruction: inline. REFs fall from call to call, so its mark is at or
** below the last one's. */
static LJ_AINLINE void lj_tracepos_asm(jit_State *J, IRRef ref, MCode *mcp)
{
  TracePos *tp = J->tracepos;
  TPCode *c;
  uint32_t k = tp->asmk;
  int32_t node;
  if (!tp->valid || !tp->nmark) return;
  while (k > 0 && tp->mark[k].ref > ref) k--;
  tp->asmk = k;
  node = (int32_t)tp->mark[k].node;
  if (tp->ncode) {
    c = &tp->code[tp->ncode-1];
    if (c->mcp == mcp) return;  /* No code. */
    if (c->node == node) { c->mcp = mcp; return; }  /* Same frames. */
  }
  if (!tp_room(tp->code, tp->ncode, tp->szcode)) {
    tp->valid = 0;
    return;
  }
  c = &tp->code[tp->ncode++];
  c->mcp = mcp;
  c->node = node;
}

/* Tracking on (jitdump on) or off for G's traces. */
#if LJ_HASJIT
#define lj_tracepos_switch(g, on)	lj_tracepos_on(G2J(g), (on))
#else
#define lj_tracepos_switch(g, on)	UNUSED(g)
#endif

/* Hooks: one test of J->tracepos while positions are not tracked. */
#define tracepos_hook(J, call) \
  do { if (LJ_UNLIKELY((J)->tracepos != NULL)) call; } while (0)
#define lj_tracepos_hsetup(J)	tracepos_hook(J, lj_tracepos_setup(J))
#define lj_tracepos_hins(J)	tracepos_hook(J, lj_tracepos_ins(J))
#define lj_tracepos_hcopy(J, ref) tracepos_hook(J, lj_tracepos_copy(J, (ref)))
#define lj_tracepos_hasmstart(J, top) \
  tracepos_hook(J, lj_tracepos_asmstart(J, (top)))
#define lj_tracepos_hasm(J, ref, mcp) \
  tracepos_hook(J, lj_tracepos_asm(J, (ref), (mcp)))

#else

#define lj_tracepos_switch(g, on)	UNUSED(g)
#define lj_tracepos_hsetup(J)		UNUSED(J)
#define lj_tracepos_hins(J)		UNUSED(J)
#define lj_tracepos_hcopy(J, ref)	UNUSED(J)
#define lj_tracepos_hasmstart(J, top)	UNUSED(J)
#define lj_tracepos_hasm(J, ref, mcp)	UNUSED(J)

#endif

#endif
