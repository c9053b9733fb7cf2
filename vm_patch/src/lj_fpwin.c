/*
** Lua frame records in a window of the VM entry's C frame (ljperf, arm64).
**
** The arm64 kernel follows x29 only upwards, through 16-byte aligned
** {fp, lr} records on the machine stack, so the records of one VM entry's
** Lua frames live in that entry's own C frame (lj_fpwin.h). While recording
** is on (DISPMODE_FPREC), the handler variants of FPWINDEF keep them as the
** interpreter calls and returns (vm_arm64.dasc: fpwin_*); where frames
** change outside it (trace exits, a coroutine resumed after a yield, an
** error caught by pcall) lj_fpwin_sync rebuilds them from the Lua stack.
** While it is off the stock handlers run and fp stays at the entry record.
** Invariants: while on, after a sync the depth slot holds the number of Lua
** frames of its entry and records 1..min(depth, FPWIN_K) hold their PCs;
** fp is written only from the depth, so it is always a record of its own
** entry (window or entry record) whatever the count.
*/

#define lj_fpwin_c
#define LUA_CORE

#include "lj_obj.h"

#if LJ_HASFPWIN

#include <stdlib.h>
#include <string.h>

#include "lj_frame.h"
#include "lj_dispatch.h"
#include "lj_vm.h"
#include "lj_fprec.h"
#include "lj_fpwin.h"
#if LJ_HASFFI
#include "lj_ctype.h"
#include "lj_ccall.h"
#endif

LJ_STATIC_ASSERT(DISPMODE_FPREC == 1 << 3);  /* FPWIN_MODEBIT in the VM. */
LJ_STATIC_ASSERT(FPWIN_CFRAME_SIZE == CFRAME_SIZE);

#define fpwin_depth(cf)	(*(uint32_t *)((char *)(cf) + FPWIN_OFS_DEPTH))

/* Counts and records the Lua frames of entry cf from frame slot f down to
** the entry's first (base0); pc: f's PC, or NULL. A function header about to
** run (an exit to it) is left out: it pushes its own record. Returns the
** first frame slot below them.
*/
static TValue *fpwin_fill(lua_State *L, TValue *f, const BCIns *pc, void *cf)
{
  /* Frame slots (base-1), as lj_debug.c walks them. */
  TValue *f0 = (TValue *)((char *)tvref(L->stack) +
			  *(ptrdiff_t *)((char *)cf + FPWIN_OFS_BASE0)) - 1;
  TValue *bot = tvref(L->stack) + LJ_FR2;
  TValue *g;
  uint32_t d = 0, i;
  if (pc && bc_op(*pc) >= BC_FUNCF && bc_op(*pc) < BC_FUNCC && f > bot) {
    pc = frame_islua(f) ? frame_pc(f) : NULL;
    f = frame_prev(f);
  }
  for (g = f; g > bot && g >= f0; g = frame_prev(g))
    if (isluafunc(frame_func(g))) d++;
  fpwin_depth(cf) = d;
  /* Innermost first; i: the frame's depth (1: the entry's outermost). */
  for (i = d; i > 0; f = frame_prev(f)) {
    GCfunc *fn = frame_func(f);
    if (isluafunc(fn)) {
      if (i < FPWIN_K || i == d) {  /* Past the cap: the innermost's PC. */
	void **rec = fpwin_rec(cf, i);
	rec[0] = (void *)(rec + 2);
	rec[1] = (void *)(pc ? pc : proto_bc(funcproto(fn)) + 1);
      }
      i--;
    }
    pc = frame_islua(f) ? frame_pc(f) : NULL;
  }
  return g;
}

/* The VM's rebuild (fpwin_sync) at base; returns the record for fp. */
void *lj_fpwin_sync(lua_State *L, TValue *base, const BCIns *pc, void *cf)
{
  fpwin_fill(L, base - 1, pc, cf);
  return fpwin_rec(cf, fpwin_depth(cf));
}

/* -- Switching ----------------------------------------------------------- */

#define fpwin_isthread(g, o) \
  ((o)->gch.gct == ~LJ_TTHREAD && !isdead((g), (o)))

/* Every VM entry of L: depth and records from its Lua stack. A thread that
** waits in a resume has its C frames too; a yielded one has none (its
** resume rebuilds). In a trace (a switch through the FFI) L->base is stale:
** the frames up to the trace's base (jit_base) are counted, the trace's exit
** rebuilds.
*/
static void fpwin_syncthread(lua_State *L)
{
  global_State *g = G(L);
  void *cf = cframe_raw(L->cframe);
  TValue *jb = tvref(g->jit_base);
  TValue *f = (jb && gcref(g->cur_L) == obj2gco(L) ? jb : L->base) - 1;
  for (; cf; cf = cframe_raw(cframe_prev(cf)))
    f = fpwin_fill(L, f, NULL, cf);
}

/* Return addresses inside the interpreter: [lj_vm_asm_begin, VM end). */
#if LJ_HASFFI
#define FPWIN_VMEND	((char *)(void *)lj_vm_ffi_call)  /* Last VM function. */
#else
#define FPWIN_VMEND	(lj_vm_asm_begin + (1 << 20))
#endif
#define fpwin_invm(ret) \
  ((char *)(ret) >= lj_vm_asm_begin && (char *)(ret) < FPWIN_VMEND)

/* The VM entries of all threads. */
typedef struct FPWinCFs { char **v; MSize n; } FPWinCFs;

/* From the frame record p up, the first one a C function called from the
** interpreter made (its lr in the VM): its saved fp is that interpreter's.
** If that is a window record of one of the entries, it goes back to the
** entry record. Only stack words on the way are read; a caller without
** frame pointers ends the walk (that interpreter's fp stays until its
** entry returns or a trace exits: rising chains, stale Lua frames).
*/
static void fpwin_resetslot(void **p, FPWinCFs *cfs)
{
  int i;
  MSize k;
  for (i = 0; i < 32 && !fpwin_invm(p[1]); i++) {
    void **q = (void **)p[0];
    if (q <= p || (char *)q - (char *)p > (1 << 23)) return;
    p = q;
  }
  if (i == 32) return;
  for (k = 0; k < cfs->n; k++)
    if ((size_t)((char *)p[0] - (cfs->v[k] + FPWIN_OFS_WINDOW)) <
	FPWIN_OFS_ENTRY - FPWIN_OFS_WINDOW) {
      p[0] = cfs->v[k] + FPWIN_OFS_ENTRY;
      return;
    }
}

/* Recording stopped: the interpreters below the running code must not keep
** fp at a window record (off, nothing moves it). Their saved fps are found
** from here and from each entry record up.
*/
static void fpwin_unlink(lua_State *L)
{
  global_State *g = G(L);
  FPWinCFs cfs = { NULL, 0 };
  GCobj *o;
  MSize k;
  void *cf;
  for (o = gcref(g->gc.root); o != NULL; o = gcref(o->gch.nextgc))
    if (fpwin_isthread(g, o))
      for (cf = cframe_raw(gco2th(o)->cframe); cf;
	   cf = cframe_raw(cframe_prev(cf)))
	cfs.n++;
  cfs.v = (char **)malloc((cfs.n + 1) * sizeof(char *));
  if (!cfs.v) return;
  cfs.n = 0;
  for (o = gcref(g->gc.root); o != NULL; o = gcref(o->gch.nextgc))
    if (fpwin_isthread(g, o))
      for (cf = cframe_raw(gco2th(o)->cframe); cf;
	   cf = cframe_raw(cframe_prev(cf)))
	cfs.v[cfs.n++] = (char *)cf;
  fpwin_resetslot((void **)__builtin_frame_address(0), &cfs);
  for (k = 0; k < cfs.n; k++)
    fpwin_resetslot((void **)(cfs.v[k] + FPWIN_OFS_ENTRY), &cfs);
  free(cfs.v);
}

/* Turns recording on: every entry's window rebuilt, then the handlers
** swapped. The interpreters' fp may still be their entry record: the next
** header or return computes it, and a call stores its PC only in a window.
*/
int lj_fpwin_start(lua_State *L)
{
  global_State *g = G(L);
  GCobj *o;
  if (g->fpwin_on) return 1;
  for (o = gcref(g->gc.root); o != NULL; o = gcref(o->gch.nextgc))
    if (fpwin_isthread(g, o))
      fpwin_syncthread(gco2th(o));
  g->fpwin_on = 1;
  lj_fprec_update(g);
  return 1;
}

void lj_fpwin_stop(lua_State *L)
{
  global_State *g = G(L);
  if (g->fpwin_on) {
    g->fpwin_on = 0;
    lj_fprec_update(g);
    fpwin_unlink(L);
  }
}

#if !LJ_HASPERF
/* LUAJIT_PERF as x86-64's 0003 reads it, frames only, while the perf
** hooks are not built on arm64 (before 0009): "1", or a comma list with
** "frames".
*/
void lj_fpwin_init(lua_State *L)
{
  const char *s = getenv("LUAJIT_PERF");
  if (s && (!strcmp(s, "1") || strstr(s, "frames")))
    lj_fpwin_start(L);
}
#endif

/* on: 1 starts, 0 stops, -1 only asks; returns 1 if recording is on. Call
** it where the VM may switch: from a C function Lua called, or from C
** outside the VM.
*/
LUA_API int luaJIT_fpwin(lua_State *L, int on)
{
  if (on > 0) lj_fpwin_start(L);
  else if (on == 0) lj_fpwin_stop(L);
  return G(L)->fpwin_on;
}

/* -- Dispatch ------------------------------------------------------------ */

ASMFunction lj_fpwin_ins(uint8_t mode, BCOp op, ASMFunction stock)
{
  if ((mode & DISPMODE_FPREC)) {
    switch (op) {
#define FPWIN_CASE(name, kind)	case BC_##name: return lj_vm_fpw_##name;
    FPWINDEF(FPWIN_CASE)
#undef FPWIN_CASE
    case BC_FUNCV: return lj_vm_fpw_IFUNCV;
    default: break;
    }
  }
  return stock;
}

uint8_t lj_fpwin_dispatch(ASMFunction *disp, uint8_t oldmode, uint8_t mode)
{
  if (!((oldmode ^ mode) & DISPMODE_FPREC)) return 0;
#define FPWIN_STATIC_S(name) \
  disp[GG_LEN_DDISP+BC_##name] = \
    lj_fpwin_ins(mode, BC_##name, makeasmfunc(lj_bc_ofs[BC_##name]));
#define FPWIN_STATIC_H(name)
#define FPWIN_STATIC(name, kind)	FPWIN_STATIC_##kind(name)
  FPWINDEF(FPWIN_STATIC)
#undef FPWIN_STATIC
#undef FPWIN_STATIC_S
#undef FPWIN_STATIC_H
  return 0xff;
}

/* f_funcf: the FUNCF handler lj_dispatch_update chose (hotcounting or not).
** Call hooks on: the hook's return (lj_dispatch_call) picks the variant.
*/
void lj_fpwin_heads(ASMFunction *disp, uint8_t mode, ASMFunction f_funcf)
{
  int op;
  for (op = BC_FUNCF; op <= BC_IFUNCV; op++)  /* Lua function headers. */
    disp[op] = lj_fpwin_ins(mode, (BCOp)op, disp[op]);
  if (f_funcf != makeasmfunc(lj_bc_ofs[BC_FUNCF]))  /* Not hotcounting. */
    disp[BC_FUNCF] = lj_fpwin_ins(mode, BC_IFUNCF, disp[BC_FUNCF]);
}

#endif
