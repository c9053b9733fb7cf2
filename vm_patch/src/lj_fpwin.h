/*
** Lua frame records in a window of the VM entry's C frame (ljperf, arm64).
** Copied into LuaJIT's src/ at build time; see lj_fpwin.c.
*/

#ifndef _LJ_FPWIN_H
#define _LJ_FPWIN_H

#include "lj_obj.h"
#include "lj_bc.h"
#include "lj_dispatch.h"

#if LJ_HASFPWIN
/* The C frame of a VM entry, from sp up (vm_arm64.dasc: must match):
**   sp+0    fixed slots (CFRAME_OFS_*), the depth (32 bits) at sp+44
**   sp+48   FPR and GPR saves (stock offsets)
**   sp+192  the window: record FPWIN_K (lowest) ... record 1 (highest)
**   sp+704  the entry record {fp, lr}: "record 0"
**   sp+720  the entry's first Lua frame base (where depth counting stops),
**           in bytes from the Lua stack's start (the stack may move)
** Record d is the d-th Lua frame of this entry, {next, PC} with next =
** record d-1, the address 16 higher: every link of the chain rises.
** Frames deeper than FPWIN_K share record FPWIN_K. fp is always computed
** from the depth, never loaded from a record, and the depth never drops
** below 0, so a wrong count gives wrong chains, never a bad fp or a
** clobbered entry record.
*/
#define FPWIN_K			32
#define FPWIN_OFS_DEPTH		44
#define FPWIN_OFS_WINDOW	192
#define FPWIN_OFS_ENTRY		704
#define FPWIN_OFS_BASE0		720
#define FPWIN_CFRAME_SIZE	736

/* Record of depth d (0: the entry record) in the C frame cf. */
#define fpwin_rec(cf, d) \
  ((void **)((char *)(cf) + FPWIN_OFS_ENTRY - 16*((d) < FPWIN_K ? (d) : FPWIN_K)))

/* Handlers with a recording variant, ->vm_fpw_NAME in vm_arm64.dasc, in the
** dispatch table while DISPMODE_FPREC is set (recording on). S: static
** (calls, tail calls, returns), H: function header. FUNCV and its hotcounting
** run IFUNCV's variant, as stock FUNCV runs IFUNCV.
*/
#define FPWINDEF(_) \
  _(CALLM, S) _(CALL, S) _(ITERC, S) _(CALLMT, S) _(CALLT, S) \
  _(RETM, S) _(RET, S) _(RET0, S) _(RET1, S) \
  _(FUNCF, H) _(IFUNCF, H) _(JFUNCF, H) _(IFUNCV, H)

#define FPWIN_DECL(name, kind)	LJ_ASMF void lj_vm_fpw_##name(void);
FPWINDEF(FPWIN_DECL)
#undef FPWIN_DECL

LJ_FUNCA void *lj_fpwin_sync(lua_State *L, TValue *base, const BCIns *pc,
			     void *cf);

/* lj_dispatch_update: the mode bit recording wants, the static handlers
** swapped when it changes (returns the mode bits to redo: all after a swap),
** the function headers; lj_dispatch_call: a header's static target.
*/
#define lj_fpwin_mode(g)	((g)->fpwin_on ? DISPMODE_FPREC : 0)
LJ_FUNC uint8_t lj_fpwin_dispatch(ASMFunction *disp, uint8_t oldmode,
				  uint8_t mode);
LJ_FUNC void lj_fpwin_heads(ASMFunction *disp, uint8_t mode,
			    ASMFunction f_funcf);
LJ_FUNC ASMFunction lj_fpwin_ins(uint8_t mode, BCOp op, ASMFunction stock);

/* Switching: LUAJIT_PERF (1, or a comma list naming frames) at the end of
** lua_newstate; luaJIT_fpwin(L, 1/0) at run time, -1 asks (lj_fpwin.c).
** With the perf hooks (LJ_HASPERF, 0009) LUAJIT_PERF has one reader,
** lj_perf_init, which starts and stops the window as the frames part, as
** jit.perf and luaJIT_perf_* do.
*/
#if LJ_HASPERF
#define lj_fpwin_init(L)	UNUSED(L)
#else
LJ_FUNC void lj_fpwin_init(lua_State *L);
#endif
LJ_FUNC int lj_fpwin_start(lua_State *L);
LJ_FUNC void lj_fpwin_stop(lua_State *L);
LUA_API int luaJIT_fpwin(lua_State *L, int on);

#else

#define lj_fpwin_mode(g)			0
#define lj_fpwin_dispatch(disp, oldmode, mode)	0
#define lj_fpwin_heads(disp, mode, f_funcf)	UNUSED(disp)
#define lj_fpwin_ins(mode, op, stock)		(stock)
#define lj_fpwin_init(L)			UNUSED(L)

#endif

#endif
