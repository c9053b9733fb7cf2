/*
** ljperf code description (patch 0003): tells the emitter writers
** (emitter/) what each prototype and trace is.
** - A prototype: its bytecode range [bc, bc+4*sizebc+4) named
**   NAME@CHUNK:LINE (lj_perfname.c), with lines for *return addresses*:
**   address A maps to the line of the instruction at A-4. Bytecode
**   addresses come from Lua frame records (ret = next PC) and from the PC
**   register.
** - A trace: its machine code named TRACE_N::CHUNK:LINE::OWNER (OWNER is
**   the label of the prototype the trace starts in), lines of OWNER from
**   snapshots (code of a function it inlined: the line of the call), or,
**   with trace positions (0005), the inline stack of each range of code.
** - Exit stub groups, once per address.
** What perf is not told is reported once and counted (ljp_emit_drop).
*/

#define lj_perfcode_c
#define LUA_CORE

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lj_obj.h"
#include "lj_bc.h"
#include "lj_debug.h"
#include "lj_frame.h"
#include "lj_gc.h"
#include "lj_jit.h"
#include "lj_ir.h"
#include "lj_dispatch.h"
#include "lj_target.h"
#include "lj_perfint.h"
#if LJ_HASTRACEPP
#include "lj_tracepp.h"
#endif

#if LJ_HASPERF

/* -- Describing code ------------------------------------------------------ */

/* Line table scratch space: v starts as the caller's array STACK (sz
** entries) and moves to malloc (never a Lua error) when it outgrows it.
*/
typedef struct PerfLines { LJPLine *v, *stack; size_t n, sz; } PerfLines;
#define PERF_LINES_STACK	128
#define PERF_LINES_INIT(pl, arr) \
  { (pl).v = (pl).stack = (arr); (pl).n = 0; (pl).sz = PERF_LINES_STACK; }
#define PERF_LINES_FREE(pl)	{ if ((pl).v != (pl).stack) free((pl).v); }

static LJ_AINLINE int perf_lines_add(PerfLines *pl, uint64_t addr, uint32_t line,
			  const char *file)
{
  if (pl->n && pl->v[pl->n-1].line == line && pl->v[pl->n-1].file == file)
    return 1;
  if (pl->n == pl->sz) {
    size_t sz = 2*pl->sz;
    LJPLine *v = (LJPLine *)realloc(pl->v == pl->stack ? NULL : pl->v,
				    sz*sizeof(LJPLine));
    if (!v) return 0;
    if (pl->v == pl->stack) memcpy(v, pl->v, pl->n*sizeof(LJPLine));
    pl->v = v; pl->sz = sz;
  }
  pl->v[pl->n].addr = addr;
  pl->v[pl->n].line = line;
  pl->v[pl->n].file = file;
  pl->n++;
  return 1;
}

static void perf_proto(GCproto *pt, const char *name, PerfChunk *chunk)
{
  char nbuf[PERF_NAMESZ];
  PerfBuf nb = { nbuf, 0, sizeof(nbuf) };
  LJPLine lstack[PERF_LINES_STACK];
  PerfLines pl;
  uint64_t bc = (uint64_t)(uintptr_t)proto_bc(pt);
  uint64_t size = 4*(uint64_t)pt->sizebc + 4;  /* PCs point after an ins. */
  const char *fbuf = lj_perf_chunkof(chunk, pt);
  PERF_LINES_INIT(pl, lstack);
  nbuf[0] = '\0';
  if (name && *name) lj_perf_nameput(pt, name);
  lj_perf_blabel(&nb, pt, name, fbuf);
  if (proto_lineinfo(pt)) {  /* The header's line, then each instruction's. */
    BCPos i;
    int ok = perf_lines_add(&pl, bc, (uint32_t)pt->firstline, fbuf);
    for (i = 0; ok && i < pt->sizebc; i++)
      ok = perf_lines_add(&pl, bc + 4*(uint64_t)(i+1),
			  (uint32_t)lj_perf_line(pt, i), fbuf);
    if (!ok) { pl.n = 0; ljp_emit_drop(LJP_DROP_LINES); }
  }
  ljp_emit_load(bc, size, nbuf, NULL, pl.v, pl.n);
  PERF_LINES_FREE(pl);
}

static void perf_childvisit(GCproto *child, const char *name, void *chunk)
{
  perf_proto(child, name, (PerfChunk *)chunk);
}

/* Describes the children of PT, named after what PT does with them. */
static void perf_children(GCproto *pt, PerfChunk *chunk)
{
  lj_perf_walk(pt, perf_childvisit, chunk);
}

#if LJ_HASJIT  /* -- Traces (none without the JIT) -- */

static int perf_haspc(GCproto *pt, const BCIns *pc)
{
  return pc >= proto_bc(pt) && pc < proto_bc(pt) + pt->sizebc;
}

/* The line snapshot SNAP of trace T stands for in PT, the function T starts
** in, or -1. perf shows a trace as the frame of that function (those it
** inlined are not in the chain while it runs), so its lines are that
** function's: where the snapshot's PC lies in PT, its line; in a function
** PT called (inlined, or a C function), the line of the call: the return
** PC of the innermost frame returning to PT (with LJ_FR2 a Lua frame's
** link slot holds it as a constant). None below PT's frame (a side trace
** back in its parent's function): not PT's code.
*/
static BCLine perf_snapline(GCtrace *T, SnapShot *snap, GCproto *pt)
{
  SnapEntry *map = &T->snapmap[snap->mapofs];
  const BCIns *pc = snap_pc(&map[snap->nent]);
  MSize n;
  if (perf_haspc(pt, pc)) return lj_debug_line(pt, proto_bcpos(pt, pc));
  for (n = snap->nent; LJ_FR2 && n-- > 0; )
    if ((map[n] & SNAP_FRAME) && irref_isk(snap_ref(map[n])) &&
	T->ir[snap_ref(map[n])].o == IR_KNUM) {
      uint64_t link = ir_knum(&T->ir[snap_ref(map[n])])->u64;
      const BCIns *ret = (const BCIns *)(uintptr_t)link;
      if ((link & FRAME_TYPE) == FRAME_LUA && ret > proto_bc(pt) &&
	  perf_haspc(pt, ret))
	return lj_debug_line(pt, proto_bcpos(pt, ret) - 1);  /* The CALL. */
    }
  return -1;
}

#ifdef LJ_UNWIND_JIT  /* Snapshots know their machine code offset. */
#define PERF_NSNAP(T)		((T)->nsnap)
#define PERF_SNAPOFS(snap)	((uint32_t)(snap)->mcofs * (uint32_t)sizeof(MCode))
#else  /* Older LuaJIT (e.g. Tarantool's): the start line only. */
#define PERF_NSNAP(T)		((T)->nsnap ? 1 : 0)
#define PERF_SNAPOFS(snap)	0
#endif

#define PERF_INL_NFILE	8	/* Chunk names kept on the stack per trace. */

/* A chunk name beyond the first PERF_INL_NFILE of a trace (malloc). */
typedef struct PerfFile {
  struct PerfFile *next; GCstr *cs; char s[PERF_NAMESZ];
} PerfFile;

typedef struct PerfInl {
  LJPInlNode *node; size_t nnode;	/* node, range, map: one block */
  LJPInlRange *range; size_t nrange;
  uint32_t *map;		/* Position node -> node + 1 written, or 0. */
  uint32_t traceno, root, link, linknode;	/* See LJPInline. */
  PerfFile *more;			/* Chunk names beyond files[]. */
  const PerfChunk *chunk;	/* The root function's chunk name. */
  GCstr *fcs[PERF_INL_NFILE]; size_t nfile;	/* Chunk names seen... */
  char files[PERF_INL_NFILE][PERF_NAMESZ];	/* ...and their file names */
  uint64_t stk[256];	/* The block when it fits (most traces), else malloc. */
} PerfInl;  /* Cleared up to files. */

static void perf_inl_free(PerfInl *pi)
{
  while (pi->more) {
    PerfFile *f = pi->more;
    pi->more = f->next;
    free(f);
  }
  if ((void *)pi->node != (void *)pi->stk) free(pi->node);
}

#if LJ_HASTRACEPOS  /* -- Inline stacks (0005) -- */

/* The chunk name of PT, kept in PI once per chunk (NULL: no memory). A
** library function's chunk name is "builtin": not shared with its chunk's. */
static const char *perf_inl_file(PerfInl *pi, GCproto *pt)
{
  GCstr *cs = perf_isbuiltin(pt) ? NULL : proto_chunkname(pt);
  PerfBuf b = { NULL, 0, PERF_NAMESZ };
  PerfFile *f;
  size_t i;
  if (pi->chunk->cs == proto_chunkname(pt) &&
      pi->chunk->builtin == perf_isbuiltin(pt))
    return pi->chunk->s;
  for (i = pi->nfile; i-- > 0; )
    if (pi->fcs[i] == cs) return pi->files[i];
  for (f = pi->more; f; f = f->next)
    if (f->cs == cs) return f->s;
  if (pi->nfile < PERF_INL_NFILE) {
    pi->fcs[pi->nfile] = cs;
    b.p = pi->files[pi->nfile++];
  } else {
    if (!(f = (PerfFile *)malloc(sizeof(PerfFile)))) return NULL;
    f->cs = cs; f->next = pi->more; pi->more = f;
    b.p = f->s;
  }
  b.p[0] = '\0';
  lj_perf_bchunk(&b, pt);
  return b.p;
}

/* Inline stacks of trace T from its positions TP (lj_tracepos.c): ranges
** of machine code with the node of their innermost frame, the nodes they
** use (callers before callees), and each range's innermost line in PL.
** Chunk names live in FILES (one per function, freed by the caller). 0:
** none (not tracked since the trace's start, or no memory).
*/
static int perf_inline(GCtrace *T, TracePos *tp, PerfInl *pi, PerfLines *pl,
		       const char *rootfile, BCLine rootline)
{
  MCode *mc = T->mcode, *end = T->mcode + T->szmcode;
  uint32_t i, k;
  int32_t head, tail, last;
  if (!tp || !tp->valid || !tp->nnode || !tp->nmark ||  /* Not this trace's? */
      (tp->ncode && (tp->code[tp->ncode-1].mcp < mc || tp->code[0].mcp >= end)))
    return 0;
  {  /* One block: 8-byte aligned arrays first. */
    size_t nn = tp->nnode, nc = (size_t)tp->ncode + 1;
    size_t sz = nn*sizeof(LJPInlNode) + nc*sizeof(LJPInlRange) +
		nn*sizeof(uint32_t);
    char *blk = sz <= sizeof(pi->stk) ? (char *)pi->stk : (char *)malloc(sz);
    if (!blk) return 0;
    pi->node = (LJPInlNode *)blk;
    pi->range = (LJPInlRange *)(blk + nn*sizeof(LJPInlNode));
    pi->map = (uint32_t *)(pi->range + nc);
    memset(pi->map, 0, nn*sizeof(uint32_t));
  }
  /* The first instruction's node and the last's (where the trace links). */
  head = (int32_t)tp->mark[0].node;
  tail = (int32_t)tp->mark[tp->nmark-1].node;
  for (i = tp->ncode + 2; i-- > 0; ) {
    int32_t n = i < tp->ncode ? tp->code[i].node : i == tp->ncode ? head : tail;
    for (; n >= 0 && !pi->map[n]; n = (int32_t)tp->node[n].parent - 1)
      pi->map[n] = 1;  /* Used: it and its callers. */
  }
  for (k = 0; k < tp->nnode; k++)  /* In creation order: callers first. */
    if (pi->map[k]) {
      TPNode *nd = &tp->node[k];
      pi->node[pi->nnode].pc = (uint64_t)(uintptr_t)nd->pc;
      pi->node[pi->nnode].parent = nd->parent ? pi->map[nd->parent-1] : 0;
      pi->node[pi->nnode].pad = 0;
      pi->map[k] = (uint32_t)++pi->nnode;
    }
  /* The head (entry, a side trace's parent state, below the first
  ** instruction's code) and then each instruction's code; a range for
  ** each change of node. */
  last = -2;
  for (i = tp->ncode + 1; i-- > 0; ) {  /* Ascending addresses. */
    int32_t n;
    MCode *at;
    if (i < tp->ncode) {
      n = tp->code[i].node;
      at = tp->code[i].mcp;
    } else {
      if (tp->ncode && tp->code[i-1].mcp == mc) continue;  /* No head. */
      n = head;
      at = mc;
    }
    if (n == last) continue;  /* Written nodes are one per node: no change. */
    last = n;
    pi->range[pi->nrange].off = (uint32_t)(at - mc);  /* szmcode is 32 bits */
    pi->range[pi->nrange++].node = n >= 0 ? pi->map[n] : 0;
    if (n >= 0) {
      TPNode *nd = &tp->node[n];
      const char *file = perf_inl_file(pi, nd->pt);
      BCLine line = lj_debug_line(nd->pt, proto_bcpos(nd->pt, nd->pc) - 1);
      if (!file || !perf_lines_add(pl, (uint64_t)(uintptr_t)at, (uint32_t)line, file))
	return 0;
    } else if (!perf_lines_add(pl, (uint64_t)(uintptr_t)at, (uint32_t)rootline,
			       rootfile)) {
      return 0;
    }
  }
  pi->traceno = T->traceno;
  pi->root = T->root ? T->root : T->traceno;
  if (T->linktype == LJ_TRLINK_ROOT && T->link && tail >= 0) {
    pi->link = T->link;
    pi->linknode = pi->map[tail];
  }
  return 1;
}

#if LJ_FR2 && defined(LJ_UNWIND_JIT)
#define PERF_SNAPDEPTH	64	/* Deeper snapshots: no stacks for the trace. */

/* Inline stacks of trace T from its snapshots, for a trace compiled while
** positions were not tracked (described when the jitdump started later):
** the frames of each snapshot (its PC, and the return PC in each Lua frame
** link) stand for the machine code from its offset to the next one's. A
** stitch's continuation holds the PC of the caller of the C function on
** top. 0: another frame link (a metamethod's continuation: its caller's PC
** is not in the snapshot), too deep, or no memory.
*/
static int perf_snapinline(GCtrace *T, PerfInl *pi)
{
  SnapNo i;
  size_t nmax = 0;
  uint32_t last = 0;
  uint64_t ppc[PERF_SNAPDEPTH];  /* The previous snapshot's frames... */
  uint32_t pnode[PERF_SNAPDEPTH];  /* ...and their nodes. */
  MSize pn = 0;
  for (i = 0; i < T->nsnap; i++)
    nmax += T->snap[i].nent + 1u;  /* Bounds the frames of all snapshots. */
  {
    size_t sz = nmax*sizeof(LJPInlNode) + (size_t)T->nsnap*sizeof(LJPInlRange);
    char *blk = sz <= sizeof(pi->stk) ? (char *)pi->stk : (char *)malloc(sz);
    if (!blk) return 0;
    pi->node = (LJPInlNode *)blk;
    pi->range = (LJPInlRange *)(blk + nmax*sizeof(LJPInlNode));
  }
  for (i = 0; i < T->nsnap; i++) {
    SnapShot *snap = &T->snap[i];
    SnapEntry *map = &T->snapmap[snap->mapofs];
    uint64_t pcs[PERF_SNAPDEPTH];  /* Outermost frame first. */
    MSize n, np = 0, k;
    uint32_t node = 0, off = i ? PERF_SNAPOFS(snap) : 0;
    int cont = 0;  /* 1: a stitch's PC came last, 2: and its C frame. */
    for (n = 0; n < snap->nent; n++) {
      uint64_t link;
      if (!(map[n] & (SNAP_FRAME|SNAP_CONT)) || !irref_isk(snap_ref(map[n])) ||
	  T->ir[snap_ref(map[n])].o != IR_KNUM)
	continue;  /* Not a link (a function is a KGC; slot 1's is nil). */
      link = ir_knum(&T->ir[snap_ref(map[n])])->u64;
      if ((link & FRAME_TYPEP) == FRAME_VARG) continue;  /* Same function. */
      if ((link & FRAME_TYPEP) == FRAME_CONT && cont == 1 &&
	  !(map[n] & SNAP_CONT)) {
	cont = 2;  /* The stitched C function's frame. */
	continue;
      }
      if ((link & FRAME_TYPE) != FRAME_LUA || np == PERF_SNAPDEPTH-1)
	return 0;
      pcs[np++] = link;  /* Where the frame below resumes. */
      cont = (map[n] & SNAP_CONT) ? 1 : 0;
    }
    if (cont == 1) return 0;  /* A stitch's PC without its C frame. */
    if (cont == 0)  /* Else the C function's: its caller's PC is the last. */
      pcs[np++] = (uint64_t)(uintptr_t)(snap_pc(&map[snap->nent]) + 1);
    for (k = 0; k < np; k++) {  /* Nodes: the previous path's, then new. */
      if (k < pn && ppc[k] == pcs[k] && (k == 0 || pnode[k-1] == node)) {
	node = pnode[k];
      } else {
	LJPInlNode *nd = &pi->node[pi->nnode++];
	nd->pc = pcs[k];
	nd->parent = node;
	nd->pad = 0;
	node = (uint32_t)pi->nnode;
      }
      ppc[k] = pcs[k];
      pnode[k] = node;
    }
    pn = np;
    last = node;
    if (off >= T->szmcode || (pi->nrange && off < pi->range[pi->nrange-1].off))
      continue;  /* No code of its own (the reader wants ranges inside). */
    if (pi->nrange && off == pi->range[pi->nrange-1].off)
      pi->nrange--;  /* The previous snapshot has no code: this one's. */
    if (pi->nrange && pi->range[pi->nrange-1].node == node) continue;
    pi->range[pi->nrange].off = off;
    pi->range[pi->nrange++].node = node;
  }
  if (!pi->nrange) return 0;
  pi->traceno = T->traceno;
  pi->root = T->root ? T->root : T->traceno;
  if (T->linktype == LJ_TRLINK_ROOT && T->link) {  /* The last snapshot's. */
    pi->link = T->link;
    pi->linknode = last;
  }
  return 1;
}
#else
#define perf_snapinline(T, pi)	(UNUSED(T), UNUSED(pi), 0)
#endif

#else  /* Without trace positions: none. */

static int perf_inline(GCtrace *T, TracePos *tp, PerfInl *pi, PerfLines *pl,
		       const char *rootfile, BCLine rootline)
{
  UNUSED(T); UNUSED(tp); UNUSED(pi); UNUSED(pl); UNUSED(rootfile);
  UNUSED(rootline);
  return 0;
}
#define perf_snapinline(T, pi)	(UNUSED(T), UNUSED(pi), 0)

#endif

/* Describes trace T: TP its positions (NULL: none), SNAPS: without them,
** inline stacks from its snapshots (the inline file is wanted). */
static void perf_trace(GCtrace *T, TracePos *tp, int snaps, PerfChunk *chunk)
{
  GCproto *pt = gco2pt(gcref(T->startpt));
  char nbuf[PERF_NAMESZ];
  PerfBuf nb = { nbuf, 0, sizeof(nbuf) };
  LJPLine lstack[PERF_LINES_STACK];
  PerfLines pl;
  PerfInl pi;
  LJPInline inl;
  int ok = 1, hasinl;
  SnapNo i;
  uint64_t mc = (uint64_t)(uintptr_t)T->mcode;
  const BCIns *startpc = mref(T->startpc, const BCIns);
  BCLine startline = lj_debug_line(pt, proto_bcpos(pt, startpc));
  const char *fbuf = lj_perf_chunkof(chunk, pt);
  PERF_LINES_INIT(pl, lstack);
  nbuf[0] = '\0';
  memset(&pi, 0, offsetof(PerfInl, files));
  pi.chunk = chunk;  /* fbuf's */
  lj_perf_braw(&nb, "TRACE_");
  lj_perf_bint(&nb, (long)T->traceno);
  lj_perf_braw(&nb, "::");
  lj_perf_braw(&nb, fbuf);
  lj_perf_braw(&nb, ":");
  lj_perf_bint(&nb, (long)startline);
  lj_perf_braw(&nb, "::");
  lj_perf_braw(&nb, lj_perf_tracelabel(pt, fbuf));
  hasinl = perf_inline(T, tp, &pi, &pl, fbuf, startline);
  if (!hasinl) {  /* Lines of the root function from snapshots. */
    pl.n = 0;
    for (i = 0; ok && i < PERF_NSNAP(T); i++) {
      SnapShot *snap = &T->snap[i];
      BCLine line = perf_snapline(T, snap, pt);
      if (line >= 0)
	ok = perf_lines_add(&pl, mc + (i ? PERF_SNAPOFS(snap) : 0),
			    (uint32_t)line, fbuf);
    }
  }
  if (!ok) { pl.n = 0; ljp_emit_drop(LJP_DROP_LINES); }
  if (!hasinl && snaps) {
    perf_inl_free(&pi);  /* What positions left, if they failed midway. */
    memset(&pi, 0, offsetof(PerfInl, files));
    hasinl = perf_snapinline(T, &pi);
  }
  inl.node = pi.node; inl.nnode = pi.nnode;
  inl.range = pi.range; inl.nrange = pi.nrange;
  inl.traceno = pi.traceno; inl.root = pi.root;
  inl.link = pi.link; inl.linknode = pi.linknode;
  ljp_emit_trace(mc, T->szmcode, nbuf, pl.v, pl.n, hasinl ? &inl : NULL);
#if LJ_HASTRACEPP  /* Its call thunks (0007): VM plumbing, like exit stubs. */
  if (T->szthunks)
    ljp_emit_load(mc + (int64_t)T->thunks, T->szthunks, "lj_vm_call_thunks",
		  NULL, NULL, 0);
#endif
  perf_inl_free(&pi);
  PERF_LINES_FREE(pl);
}

/* Exit stub groups: code asm_exitstub_gen puts at the bottom of the mcode
** area (a push per exit, one more push, a jmp rel32 to the exit handler).
** Each group is described once per address (J->perfstubs); ALL: again.
*/
static void perf_stubs(jit_State *J, int all)
{
#ifdef EXITSTUBS_PER_GROUP  /* x86/x64: pushes, a push, [mov], jmp rel32. */
#define PERF_STUBGROUP_SIZE \
  (EXITSTUB_SPACING*EXITSTUBS_PER_GROUP + 2 + (LJ_GC64 ? 0 : 8) + 5)
  int i;
  if (!all && !memcmp(J->exitstubgroup, J->perfstubs, sizeof(J->perfstubs)))
    return;  /* No new group (the usual case after a trace). */
  for (i = 0; i < LJ_MAX_EXITSTUBGR; i++) {
    MCode *p = J->exitstubgroup[i];
    if (p && (all || p != J->perfstubs[i])) {
      J->perfstubs[i] = p;
      ljp_emit_load((uint64_t)(uintptr_t)p, PERF_STUBGROUP_SIZE,
		    "lj_vm_exit_stubs", NULL, NULL, 0);
    }
  }
#else
  UNUSED(J); UNUSED(all);
#endif
}

#endif

/* Adds P to the pointer set PS. 0, or -1 without memory. */
static int perf_ptradd(LJPSet *ps, void *p)
{
  uint64_t h = ljp_hash_ptr(p);
  LJPSlot *slot;
  if (ljp_set_reserve(ps) < 0) return -1;
  slot = ljp_set_slot(ps, h, perf_ptreq, p);
  if (!slot->h) ljp_set_fill(ps, slot, h, p);
  return 0;
}

/* Describes every live prototype and trace of G (start, fork) in one
** batch. Prototypes with a parent are described (and named) from it; one
** whose parent is gone (a module's main chunk runs once and is collected)
** keeps the name it got when it was first described (names table: in a
** fork child, the parent's), or else gets one from the heap
** (lj_perf_heapnames).
*/
size_t lj_perf_all(global_State *g)
{
  GCobj *o;
  size_t n = 0;
  LJPSet haveparent = { NULL, 0, 0 };
  PerfChunk chunk;
  int ok = 1;
  chunk.cs = NULL; chunk.builtin = 0;
  ljp_emit_batch_begin();
  for (o = gcref(g->gc.root); ok && o != NULL; o = gcref(o->gch.nextgc))
    if (o->gch.gct == ~LJ_TPROTO && (gco2pt(o)->flags & PROTO_CHILD) &&
	perf_live(g, o)) {
      GCproto *pt = gco2pt(o);
      BCPos pc;
      for (pc = 0; ok && pc < pt->sizebc; pc++)
	if (bc_op(proto_bc(pt)[pc]) == BC_FNEW)
	  ok = perf_ptradd(&haveparent,
		 proto_kgc(pt, ~(ptrdiff_t)bc_d(proto_bc(pt)[pc]))) == 0;
    }
  if (!ok) {  /* Then every prototype is a root, described without name. */
    ljp_set_free(&haveparent);
    ljp_emit_drop(LJP_DROP_PARENT);
  } else {
    lj_perf_srcnames(g, &haveparent);
    lj_perf_heapnames(g, &haveparent);
  }
  for (o = gcref(g->gc.root); o != NULL; o = gcref(o->gch.nextgc))
    if (o->gch.gct == ~LJ_TPROTO && perf_live(g, o)) {
      n++;
      if (!ljp_set_find(&haveparent, ljp_hash_ptr(o), perf_ptreq, o)) {
	char name[PERF_NAMESZ];
	lj_perf_nameget(gco2pt(o), name, sizeof(name));
	perf_proto(gco2pt(o), name, &chunk);
	perf_children(gco2pt(o), &chunk);
      }
    }
  ljp_set_free(&haveparent);
#if LJ_HASJIT
#if LJ_HASTRACEPP  /* Traces are described with their patch points off. */
  if ((g->dispatchmode & DISPMODE_FPREC)) lj_tracepp_flip(G2J(g), 0);
#endif
  {  /* The traces in J->trace: a flushed one (jit.flush, a full mcode
     ** area) may stay in the heap, its machine code freed. */
    jit_State *J = G2J(g);
    TraceNo i;
    for (i = 1; i < (TraceNo)J->sizetrace; i++) {
      GCtrace *T = traceref(J, i);
      if (T && T->mcode) perf_trace(T, NULL, perf_tracepos(J) != NULL, &chunk);
    }
  }
  perf_stubs(G2J(g), 1);
#if LJ_HASTRACEPP
  if ((g->dispatchmode & DISPMODE_FPREC)) lj_tracepp_flip(G2J(g), 1);
#endif
#endif
  ljp_emit_batch_end();
  return n;
}

/* Starts a batch of descriptions: handles a fork (describe everything for
** the child's new files). Returns 0 if nothing is open any more.
*/
static int perf_begin(global_State *g)
{
  int fresh = 0;
  if (!ljp_emit_begin(&fresh)) return 0;
  if (fresh) lj_perf_all(g);
  return 1;
}

void lj_perf_chunk(lua_State *L, GCproto *pt)
{
  global_State *g = G(L);
  if (!(g->perfmask & PERF_EMIT) || !perf_begin(g)) return;
  ljp_emit_batch_begin();
  if ((g->perfmask & PERF_RESCAN)) {  /* Library functions, then PT. */
    g->perfmask &= ~PERF_RESCAN;
    lj_perf_all(g);
  } else {
    PerfChunk chunk;
    chunk.cs = NULL; chunk.builtin = 0;
    perf_proto(pt, NULL, &chunk);
    perf_children(pt, &chunk);
  }
  ljp_emit_batch_end();  /* Written before the chunk runs. */
}

#if LJ_HASJIT
void lj_perf_trace(jit_State *J, GCtrace *T)
{
  global_State *g = J2G(J);
  PerfChunk chunk;
  if (!(g->perfmask & PERF_EMIT) || !perf_begin(g)) return;
  chunk.cs = NULL; chunk.builtin = 0;
  perf_stubs(J, 0);  /* The trace's exits may have made new groups. */
  perf_trace(T, perf_tracepos(J), perf_tracepos(J) != NULL, &chunk);
}
#endif


#endif
