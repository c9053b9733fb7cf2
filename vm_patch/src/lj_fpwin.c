/*
** Lua frame records in a window of the VM entry's C frame (ljperf, arm64).
**
** The arm64 kernel follows x29 only upwards, through 16-byte aligned
** {fp, lr} records on the machine stack, so the records of one VM entry's
** Lua frames live in that entry's own C frame (lj_fpwin.h). The
** interpreter keeps them as it calls and returns (vm_arm64.dasc: fpwin_*);
** where frames change outside it (trace exits, a coroutine resumed after a
** yield, an error caught by pcall) lj_fpwin_sync rebuilds them from the Lua
** stack. Invariant: after it, the depth slot holds the number of Lua frames
** of this entry, and records 1..min(depth, FPWIN_K) hold their PCs.
*/

#define lj_fpwin_c
#define LUA_CORE

#include "lj_obj.h"

#if LJ_HASFPWIN

#include "lj_frame.h"
#include "lj_fpwin.h"

/* Counts and records the Lua frames from base down to the entry's first
** (the window's base0); pc: the innermost frame's PC, or NULL. Returns the
** record x29 points at: the innermost recorded frame's, or the entry's.
*/
void *lj_fpwin_sync(lua_State *L, TValue *base, const BCIns *pc, void *cf)
{
  /* Frame slots (base-1), as lj_debug.c walks them. base0 is kept
  ** relative to the stack, which may have moved since the entry.
  */
  TValue *f0 = (TValue *)((char *)tvref(L->stack) +
			  *(ptrdiff_t *)((char *)cf + FPWIN_OFS_BASE0)) - 1;
  TValue *bot = tvref(L->stack) + LJ_FR2;
  TValue *f;
  uint32_t d = 0, i;
  for (f = base - 1; f > bot && f >= f0; f = frame_prev(f))
    if (isluafunc(frame_func(f))) d++;
  *(uint32_t *)((char *)cf + FPWIN_OFS_DEPTH) = d;
  /* Innermost first; i: the frame's depth (1: the entry's outermost). */
  for (f = base - 1, i = d; i > 0; f = frame_prev(f)) {
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
  return fpwin_rec(cf, d);
}

#endif
