/*
** Lua frame records for frame-pointer unwinding (ljperf).
**
** While recording is on, every active Lua frame has a record {next, ret} in
** a per-thread area: next points at the record of the next Lua frame below,
** or at the frame record of the VM entry below it, or (first frames of a
** coroutine) at the coroutine's anchor; ret is a bytecode address in the
** frame's function (its return PC into a callee, else its first
** instruction). rbp points at the record of the running Lua frame, so the
** kernel's frame-pointer unwinder walks through all Lua frames.
**
** Invariants:
** - A frame's record sits in the area at the offset of its frame link slots
**   (base-2, base-1): frames are >= 2 slots apart, so records never overlap.
** - Areas cover the largest possible stack and never move or shrink while
**   the thread lives, so no pointer to a record ever dangles.
** - Areas are only released when their thread is freed (or at lua_close).
*/

#define lj_fprec_c
#define LUA_CORE

#include "lj_obj.h"

#if LJ_HASFPREC || LJ_HASFPWIN  /* arm64's lj_fpwin.c switches through it. */
#include "lj_fprec.h"

/* lj_dispatch_update() takes a lock flag in upstream 2.1 since 2025 and not
** in the other trees. Call it with the signature this tree declares: F is
** only ever called through its real type (the other branch is dead code).
*/
typedef void (LJ_FASTCALL *FPDispUpd1)(global_State *g);
typedef void (LJ_FASTCALL *FPDispUpd2)(global_State *g, int nolock);

void lj_fprec_update(global_State *g)
{
  void (*f)(void) = (void (*)(void))lj_dispatch_update;
  if (__builtin_types_compatible_p(__typeof__(&lj_dispatch_update), FPDispUpd2))
    ((FPDispUpd2)f)(g, 0);
  else
    ((FPDispUpd1)f)(g);
}

#endif

#if LJ_HASFPREC

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "lj_fprec.h"
#include "lj_frame.h"
#include "lj_state.h"
#include "lj_gc.h"
#include "lj_dispatch.h"
#include "lj_vm.h"
#if LJ_HASFFI
#include "lj_ctype.h"
#include "lj_ccall.h"
#endif

/* Record slots per area: more than any stack can have, incl. overflow.
** Trees before 2023 grow an overflowing stack by NEED without a cap (to
** under 2*LUAI_MAXSTACK, e.g. a vararg tail call), later ones cap it.
*/
#define FPREC_SLOTS	((size_t)2*LUAI_MAXSTACK + 4096)
#define FPREC_AREA	((FPREC_SLOTS*sizeof(TValue) + 0xffff) & ~(size_t)0xffff)
#define FPREC_CHUNK	16	/* Areas per mapping. Area 0 links the chunks. */
#define FPREC_KEEP	65536	/* Bytes of an area kept resident on release. */

#define fprec_rec(L, f)	((void **)((char *)((f)+1) + (L)->fprec_k))
#define fprec_anchor(L)	((void **)(L)->fprec_area)
/* The {caller rbp, return address} record pushed by a VM entry. */
#define fprec_cfrec(cf)	((void **)((char *)cframe_raw(cf) + CFRAME_SIZE - 16))

/* -- Areas --------------------------------------------------------------- */

static char *fprec_getarea(global_State *g)
{
  char *a = g->fprec_free;
  if (!a) {
    int i;
    char *c = (char *)mmap(NULL, FPREC_CHUNK*FPREC_AREA, PROT_READ|PROT_WRITE,
			   MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE, -1, 0);
    if (c == MAP_FAILED) return NULL;
    *(char **)c = g->fprec_chunks;
    g->fprec_chunks = c;
    for (i = FPREC_CHUNK-1; i >= 1; i--) {
      char *x = c + (size_t)i*FPREC_AREA;
      *(char **)x = g->fprec_free;
      g->fprec_free = x;
    }
    a = g->fprec_free;
  }
  g->fprec_free = *(char **)a;
  return a;
}

/* Rebias after a stack reallocation: record(base) = base + fprec_k. */
static void fprec_rebias(lua_State *L)
{
  if (L->fprec_area) {
    L->fprec_k = (intptr_t)L->fprec_area - (intptr_t)tvref(L->stack) - 16;
    if (LJ_UNLIKELY(L->stacksize > FPREC_SLOTS)) {  /* Not seen in any tree. */
      fputs("ljperf: stack larger than its frame record area, "
	    "recording stopped\n", stderr);
      lj_fprec_stop(L);
    }
  }
}

/* The stack of L moved by DELTA bytes from OLDST (resizestack). */
void lj_fprec_resize(lua_State *L, char *oldst, ptrdiff_t delta)
{
  global_State *g = G(L);
  if ((size_t)(mref(g->fprec_vbase, char) - oldst) <
      (size_t)L->stacksize*sizeof(TValue))
    setmref(g->fprec_vbase, mref(g->fprec_vbase, char) + delta);
  fprec_rebias(L);
}

static int fprec_attach(global_State *g, lua_State *L)
{
  if (!L->fprec_area && !(L->fprec_area = fprec_getarea(g)))
    return 0;
  fprec_rebias(L);
  return 1;
}

void lj_fprec_newthread(lua_State *L)
{
  global_State *g = G(L);
  L->fprec_area = NULL;
  if (g->fprec_on && !fprec_attach(g, L)) {
    fputs("ljperf: out of memory for Lua frame records, recording stopped\n",
	  stderr);
    lj_fprec_stop(L);
  }
}

void lj_fprec_freethread(global_State *g, lua_State *L)
{
  char *a = L->fprec_area;
  if (a) {
    if ((size_t)L->stacksize*sizeof(TValue) > FPREC_KEEP)
      madvise(a + FPREC_KEEP, FPREC_AREA - FPREC_KEEP, MADV_DONTNEED);
    *(char **)a = g->fprec_free;
    g->fprec_free = a;
    L->fprec_area = NULL;
  }
}

void lj_fprec_close(global_State *g)
{
  char *c = g->fprec_chunks;
  while (c) {
    char *next = *(char **)c;
    munmap(c, FPREC_CHUNK*FPREC_AREA);
    c = next;
  }
  g->fprec_chunks = g->fprec_free = NULL;
}

/* -- Linking ------------------------------------------------------------- */

/* Return addresses inside the interpreter: [lj_vm_asm_begin, VM end). */
#if LJ_HASFFI
#define FPREC_VMEND	((char *)(void *)lj_vm_ffi_call)  /* Last VM function. */
#else
#define FPREC_VMEND	(lj_vm_asm_begin + (1 << 20))
#endif
#define fprec_invm(ret) \
  ((char *)(ret) >= lj_vm_asm_begin && (char *)(ret) < FPREC_VMEND)

/* Walk modes of fprec_link(). */
enum { FP_WRITE, FP_STOP, FP_TOP };

/* Threads of one universe, to vouch for a lua_State read off the C stack. */
typedef struct FPThreads { lua_State **v; MSize n; } FPThreads;

static int fprec_member(FPThreads *th, void *L)
{
  MSize i;
  for (i = 0; i < th->n; i++)
    if ((void *)th->v[i] == L) return 1;
  return 0;
}

/* The stack slot holding the interpreter's rbp, saved by the code VM entry
** CF returns to: CF's own frame record if the interpreter called it
** directly (coroutine.resume), else that of the C function the interpreter
** called (which then re-entered the VM). NULL if frame pointers don't lead
** back into the VM (a caller without them, or no VM below).
*/
static void **fprec_vmslot(void *cf)
{
  void **p = fprec_cfrec(cf);
  int i;
  for (i = 0; i < 16; i++) {
    void **q;
    if (fprec_invm(p[1])) return &p[0];
    q = (void **)p[0];
    if (q <= p || (char *)q - (char *)p > (1 << 23)) return NULL;
    p = q;
  }
  return NULL;
}

static void *fprec_link(lua_State *L, TValue *stop, const BCIns *pc, int mode,
			FPThreads *th);

/* Is VMCF a C frame of LV's: its top one for a thread waiting in a resume,
** any of them for L itself (a VM entry nested in a hook or in a C function
** called from Lua)?
*/
static int fprec_owncf(lua_State *L, lua_State *Lv, void *vmcf)
{
  void *cf = cframe_raw(Lv->cframe);
  if (Lv != L) return cf == vmcf;
  for (; cf; cf = cframe_raw(cframe_prev(cf)))
    if (cf == vmcf) return 1;
  return 0;
}

/* Fixes a saved interpreter rbp found at VM entry CF of L (recording was
** off when it was saved). Another thread's VM below (a resume): its top
** record, now; coroutine.resume returns to its caller with this rbp and
** does not relink. L's own VM below: returned, the caller links it later.
*/
static void **fprec_fixslot(lua_State *L, void *cf, FPThreads *th)
{
  void **slot = th ? fprec_vmslot(cf) : NULL;
  char *vmcf = (char *)slot + 16;  /* Interpreter's rsp = its C frame. */
  lua_State *Lv;
  if (!slot) return NULL;
  Lv = cframe_L(vmcf);
  if (!fprec_member(th, Lv) || !fprec_owncf(L, Lv, vmcf))
    return NULL;  /* Not an interpreter frame of this universe. */
  if (Lv == L) return slot;
  *slot = fprec_link(Lv, NULL, NULL, FP_TOP, NULL);
  return NULL;
}

/* REC's return address: FPC if it lies in PT's bytecode, else PT's first
** instruction (a trace exit may run an instruction copy, &T->startins).
*/
static LJ_AINLINE void fprec_setret(void **rec, GCproto *pt, const BCIns *fpc)
{
  if (!fpc || fpc <= proto_bc(pt) || fpc > proto_bc(pt) + pt->sizebc)
    fpc = proto_bc(pt) + 1;
  rec[1] = (void *)fpc;
}

/* fprec_link: REC is the record below the ones still waiting for it (PEND,
** PSLOT), and the top one if none was found yet. */
#define FPREC_LINKTO(rec) \
  { if (pend) *pend = (rec); if (pslot) *pslot = (rec); if (!top) top = (rec); }

/* Walks L's frames from the top down (mirrors err_unwind()). FP_WRITE:
** writes the records of the Lua frames above STOP (all: NULL), each linked
** to the next Lua frame below, the frame record of the VM entry below, or
** for a coroutine's first frames its anchor, and the return address of the
** first one at or below STOP when it is known; with TH (all threads, while
** starting) also fixes interpreter rbps saved in C frames in between. PC is
** the next instruction of the top frame (NULL: unknown). Returns the rbp
** for the top frame. FP_STOP: returns the first record at or below STOP,
** writing nothing. FP_TOP: returns the top record, writing nothing.
*/
static void *fprec_link(lua_State *L, TValue *stop, const BCIns *pc, int mode,
			FPThreads *th)
{
  TValue *frame = L->base - 1, *bot = tvref(L->stack) + LJ_FR2;
  void *cf = L->cframe;
  void **pend = NULL;	/* Record still waiting for its next pointer. */
  void **pslot = NULL;	/* Saved rbp waiting for the next record, too. */
  void *top = NULL;
  const BCIns *fpc = pc ? pc + 1 : NULL;  /* Return-address convention. */
  int varg = 0;		/* At the lower part of a vararg frame? */
  while (frame > bot) {
    if (cf && cframe_nres(cframe_raw(cf)) < 0 &&
	frame < restorestack(L, -cframe_nres(cframe_raw(cf)))) {
      cf = cframe_prev(cf);  /* C frame without Lua frame: not ours. */
      continue;
    }
    if (!varg && isluafunc(frame_func(frame))) {
      void **rec = fprec_rec(L, frame);
      if (mode == FP_TOP) return rec;
      if (mode == FP_STOP) {
	if (stop && frame+1 <= stop) return rec;
      } else {
	FPREC_LINKTO(rec);
	pslot = NULL;
	if (stop && frame+1 <= stop) {
	  GCproto *pt = funcproto(frame_func(frame));
	  if (fpc > proto_bc(pt) && fpc <= proto_bc(pt) + pt->sizebc)
	    rec[1] = (void *)fpc;  /* A tail call there may have replaced it. */
	  return top;
	}
	fprec_setret(rec, funcproto(frame_func(frame)), fpc);
	pend = &rec[0];
      }
    }
    varg = 0;
    fpc = NULL;
    switch (frame_typep(frame)) {
    case FRAME_LUA: case FRAME_LUAP:
      fpc = frame_pc(frame);
      frame = frame_prevl(frame);
      break;
    case FRAME_VARG:  /* Same function below, with its own frame link. */
      varg = 1;
      frame = frame_prevd(frame);
      break;
    case FRAME_CONT:
      if (frame_iscont_fficb(frame))
	goto cframe;
      fpc = frame_contpc(frame);
      frame = frame_prevd(frame);
      break;
    case FRAME_PCALL: case FRAME_PCALLH:
      frame = frame_prevd(frame);
      break;
    case FRAME_CP:
      if (!cf || cframe_canyield(cf)) {  /* Coroutine: link to the anchor. */
	void **anchor = fprec_anchor(L);
	if (mode != FP_WRITE) return anchor;
	if (cf) {
	  void **cr = fprec_cfrec(cf);
	  fprec_fixslot(L, cf, th);
	  anchor[0] = cr[0];
	  anchor[1] = cr[1];
	}
	if (pend) *pend = anchor;
	return top ? top : anchor;
      }
      /* fallthrough */
    case FRAME_C:
    cframe:
      if (!cf) return mode == FP_WRITE ? top : NULL;  /* Not running. */
      if (mode != FP_WRITE) return fprec_cfrec(cf);
      FPREC_LINKTO(fprec_cfrec(cf));
      pend = NULL;
      pslot = fprec_fixslot(L, cf, th);
      cf = cframe_prev(cf);
      frame = frame_prevd(frame);
      break;
    }
  }
  return top;
}
#undef FPREC_LINKTO

/* Called by the VM when it resumes interpreting after a trace ran. Records
** above the trace's lowest base get rewritten, and the trace's rbp may
** point into them: while that happens, perf walks from this function's
** frame straight to the first record left alone. At a Lua function's
** header, rbp is its caller's record: the header links its own (fp_link).
*/
void *lj_fprec_exit(lua_State *L, const BCIns *pc)
{
  void **fp = (void **)__builtin_frame_address(0), **top;
  TValue *stop = mref(G(L)->fprec_vbase, TValue);
  /* Saved rbp. Usually the trace's lowest base is a Lua frame's base. */
  if (stop > tvref(L->stack) + 1 + LJ_FR2 && stop <= L->base &&
      isluafunc(frame_func(stop - 1)))
    fp[0] = fprec_rec(L, stop - 1);
  else
    fp[0] = fprec_link(L, stop, NULL, FP_STOP, NULL);
  top = (void **)fprec_link(L, stop, pc, FP_WRITE, NULL);
  if (top && bc_op(*pc) >= BC_FUNCF && bc_op(*pc) < BC_FUNCC)
    return top[0];
  return top;
}

#if LJ_HASTRACEPP
/* Called by ->vm_fp_link while recording: a trace jumps to a trace that
** starts at BASE, in a frame it made above the lowest base (the frames'
** links are on the stack). Writes their records, PC the target's start,
** and returns the one at BASE.
*/
void *lj_fprec_tracelink(lua_State *L, TValue *base, const BCIns *pc)
{
  TValue *obase = L->base;
  void *top;
  L->base = base;
  top = fprec_link(L, mref(G(L)->fprec_vbase, TValue), pc, FP_WRITE, NULL);
  L->base = obase;
  return top;
}
#endif

#if LJ_FPREC_ASSERT
static void fprec_fail(const char *what)
{
  fprintf(stderr, "ljperf: assertion failed: %s\n", what);
  abort();
}

/* Assertion build: called by every record handler (fp_check, vm_x64.dasc)
** with BASE, r12, rbp and PC. r12 is the running thread's offset; rbp is a
** record of its area or its VM entry's frame record; a header never finds
** its own record linked.
*/
void lj_fprec_check(lua_State *L, TValue *base, intptr_t k, void **rbp,
		    const BCIns *pc)
{
  char *a = L->fprec_area;
  BCOp op = bc_op(pc[-1]);
  if (k != L->fprec_k)
    fprec_fail("r12 is not the running thread's record offset");
  if (!(a && (size_t)((char *)rbp - a) < FPREC_AREA) &&
      rbp != fprec_cfrec(L->cframe))
    fprec_fail("rbp is neither a record nor its VM entry's frame record");
  if (op >= BC_FUNCF && op < BC_FUNCC && (char *)rbp == (char *)base + k)
    fprec_fail("a function header finds its record linked");
}
#endif

/* The slot holding the rbp of L's running interpreter, saved by the C
** function it called (lj_gc_step from a handler, or a C function): found by
** following frame pointers from here to just below L's C frame; only stack
** words in between are read. NULL if not there: called from a trace or its
** exit, the GC or the compiler, or a caller without frame pointers.
*/
static void **fprec_topslot(lua_State *L)
{
  void **p = (void **)__builtin_frame_address(0), **slot;
  int32_t st = G(L)->vmstate;
  /* In a handler or a C function (tarantool/luajit splits these states
  ** further), not in a trace (st >= 0), its exit, the GC or the compiler. */
  if (st >= 0 || st == ~LJ_VMST_GC || st == ~LJ_VMST_EXIT ||
      st == ~LJ_VMST_RECORD || st == ~LJ_VMST_OPT || st == ~LJ_VMST_ASM ||
      !L->cframe || gcref(G(L)->cur_L) != obj2gco(L))
    return NULL;
  slot = (void **)((char *)cframe_raw(L->cframe) - 16);  /* {rbp, ret} */
  while (p < slot) {
    void **q = (void **)p[0];
    if (q <= p || q > slot) return NULL;
    p = q;
  }
  return p == slot && fprec_invm(slot[1]) ? slot : NULL;
}

/* Recording was switched on in a C function the interpreter of L called:
** its saved rbp still points at the VM entry record. Fixed to L's top
** record, so samples taken before the next frame change walk all frames.
** Not found: left alone (a trace exit relinks).
*/
void lj_fprec_fixrbp(lua_State *L)
{
  void **slot = G(L)->fprec_on ? fprec_topslot(L) : NULL;
  if (slot) {
    void *top = fprec_link(L, NULL, NULL, FP_TOP, NULL);
    if (top) *slot = top;
  }
}

/* L's top frame record, or NULL (recording off, or no record). */
void *lj_fprec_top(lua_State *L)
{
  return G(L)->fprec_on ? fprec_link(L, NULL, NULL, FP_TOP, NULL) : NULL;
}

/* Is P inside one of G's record areas? */
static int fprec_inareas(global_State *g, void *p)
{
  char *c;
  for (c = g->fprec_chunks; c; c = *(char **)c)
    if ((size_t)((char *)p - c) < FPREC_CHUNK*FPREC_AREA) return 1;
  return 0;
}

/* Recording stopped: the interpreters running now (L's, and those below
** each VM entry of every thread) must not keep an rbp into the records,
** since with recording off only trace exits reset rbp. Each saved rbp that
** points into an area goes back to its interpreter's VM entry record.
** Slots not found (no frame pointers on the way) stay until that VM entry
** returns; stacks sampled meanwhile show stale Lua frames, nothing worse
** (areas stay mapped while their thread lives).
*/
static void fprec_unlink(lua_State *L)
{
  global_State *g = G(L);
  void **slot = fprec_topslot(L);
  GCobj *o;
  if (slot && fprec_inareas(g, *slot))
    *slot = fprec_cfrec(L->cframe);
  for (o = gcref(g->gc.root); o != NULL; o = gcref(o->gch.nextgc))
    if (o->gch.gct == ~LJ_TTHREAD && !isdead(g, o)) {
      void *cf;
      for (cf = gco2th(o)->cframe; cf; cf = cframe_prev(cframe_raw(cf))) {
	slot = fprec_vmslot(cf);
	if (slot && fprec_inareas(g, *slot))
	  *slot = fprec_cfrec((char *)slot + 16);  /* Its rsp: its C frame. */
	if (cframe_canyield(cf)) break;  /* A coroutine's first VM entry. */
      }
    }
}

/* -- Dispatch ------------------------------------------------------------ */

/* The targets of the VM's shared paths for MODE (lj_fprec.h). */
void lj_fprec_targets(global_State *g, uint8_t mode)
{
  int on = (mode & DISPMODE_FPREC) != 0;
  g->fprec_retz = on ? (void *)lj_vm_fp_retz : lj_vm_fp_retaddr();
#if LJ_HASJIT
  g->fprec_exit = on ? (void *)lj_vm_fp_exit : g->fprec_chunks ?
		  (void *)lj_vm_fp_exit_off : (void *)lj_vm_fp_exit_done;
#endif
  g->fprec_cont = on ? (void *)lj_vm_fp_cont : (void *)lj_vm_fp_cont_done;
  g->fprec_resume = on ? (void *)lj_vm_fp_resume : (void *)lj_vm_fp_resumed;
}

/* The handler for OP: its recording variant while DISPMODE_FPREC is set. */
ASMFunction lj_fprec_ins(uint8_t mode, BCOp op)
{
  if ((mode & DISPMODE_FPREC)) {
    switch (op) {
#define FPREC_CASE(name, kind)	case BC_##name: return lj_vm_fp_##name;
    FPRECDEF(FPREC_CASE)
#undef FPREC_CASE
    default: break;
    }
  }
  return makeasmfunc(lj_bc_ofs[op]);
}

/* Called by lj_dispatch_update when the mode changes. Swaps the static
** call/return handlers and the return-to-Lua target when DISPMODE_FPREC
** changed; returns the mode bits whose dispatch entries must be redone (all
** after a swap).
*/
uint8_t lj_fprec_dispatch(ASMFunction *disp, uint8_t oldmode, uint8_t mode)
{
  if (((oldmode ^ mode) & DISPMODE_FPREC)) {
    global_State *g = (global_State *)((char *)disp + GG_DISP2G);
    lj_fprec_targets(g, mode);
#define FPREC_STATIC_S(name) \
    disp[GG_LEN_DDISP+BC_##name] = lj_fprec_ins(mode, BC_##name);
#define FPREC_STATIC_H(name)
#define FPREC_STATIC(name, kind)	FPREC_STATIC_##kind(name)
    FPRECDEF(FPREC_STATIC)
#undef FPREC_STATIC
#undef FPREC_STATIC_S
#undef FPREC_STATIC_H
    return 0xff;
  }
  return (uint8_t)(oldmode ^ mode);
}

/* Function headers that link records, unless call hooks are on. F_FUNCF is
** the FUNCF handler lj_dispatch_update chose (hotcounting or not).
*/
void lj_fprec_heads(ASMFunction *disp, uint8_t mode, ASMFunction f_funcf)
{
  if ((mode & DISPMODE_FPREC)) {
    disp[BC_FUNCF] = f_funcf == makeasmfunc(lj_bc_ofs[BC_FUNCF]) ?
		     lj_vm_fp_FUNCF : lj_vm_fp_IFUNCF;
    disp[BC_IFUNCF] = lj_vm_fp_IFUNCF;
    disp[BC_JFUNCF] = lj_vm_fp_JFUNCF;
    disp[BC_FUNCV] = lj_vm_fp_IFUNCV;
    disp[BC_IFUNCV] = lj_vm_fp_IFUNCV;
  }
}

/* -- Switching ----------------------------------------------------------- */

/* Turns recording on: gives every thread an area, links the records of all
** active frames (fixing interpreter rbps saved in C frames while recording
** was off), then switches the dispatch table. Returns 0 on failure.
*/
int lj_fprec_start(lua_State *L)
{
  global_State *g = G(L);
  FPThreads th = { NULL, 0 };
  GCobj *o;
  if (g->fprec_on) return 1;
  for (o = gcref(g->gc.root); o != NULL; o = gcref(o->gch.nextgc))
    if (o->gch.gct == ~LJ_TTHREAD && !isdead(g, o)) {  /* Dead: never runs. */
      if (!fprec_attach(g, gco2th(o))) return 0;
      th.n++;
    }
  th.v = (lua_State **)malloc(th.n * sizeof(lua_State *));
  th.n = 0;
  for (o = gcref(g->gc.root); th.v && o != NULL; o = gcref(o->gch.nextgc))
    if (o->gch.gct == ~LJ_TTHREAD && !isdead(g, o))
      th.v[th.n++] = gco2th(o);
  for (o = gcref(g->gc.root); o != NULL; o = gcref(o->gch.nextgc))
    if (o->gch.gct == ~LJ_TTHREAD && !isdead(g, o))
      fprec_link(gco2th(o), NULL, NULL, FP_WRITE, th.v ? &th : NULL);
  free(th.v);
  /* Traces track their lowest base only while recording. Started by the
  ** GC step of a running trace or in lj_trace_exit: every frame up to L's
  ** base has a record now, those a trace makes above it get theirs at its
  ** exit. */
  setmref(g->fprec_vbase, L->base);
  g->fprec_on = 1;
  lj_fprec_update(g);
  return 1;
}

void lj_fprec_stop(lua_State *L)
{
  global_State *g = G(L);
  if (g->fprec_on) {
    g->fprec_on = 0;
    lj_fprec_update(g);
    fprec_unlink(L);
  }
}

#endif
