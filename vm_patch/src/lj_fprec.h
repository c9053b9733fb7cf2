/*
** Lua frame records for frame-pointer unwinding (ljperf).
** Copied into LuaJIT's src/ at build time; see lj_fprec.c.
*/

#ifndef _LJ_FPREC_H
#define _LJ_FPREC_H

#include "lj_obj.h"
#include "lj_bc.h"
#include "lj_dispatch.h"

/* Bytecode handlers with a variant that maintains the records. The variants
** are the ->vm_fp_NAME labels of vm_x64.dasc, emitted in this order (DynASM
** cannot make labels from this list, so build_fp_ins() names them itself and
** checks the count). S: static call/return handler. H: function header.
*/
#define FPRECDEF(_) \
  _(CALLM, S) _(CALL, S) _(CALLMT, S) _(CALLT, S) _(ITERC, S) \
  _(RETM, S) _(RET, S) _(RET0, S) _(RET1, S) \
  _(FUNCF, H) _(IFUNCF, H) _(JFUNCF, H) _(FUNCV, H) _(IFUNCV, H)

#define FPREC_ONE(name, kind)	+1
enum { FPREC_NVARIANT = 0 FPRECDEF(FPREC_ONE) };
#undef FPREC_ONE

#if LJ_HASFPREC || LJ_HASFPWIN
LJ_FUNC void lj_fprec_update(global_State *g);  /* lj_dispatch_update */
#endif

#if LJ_HASFPREC

#define FPREC_DECL(name, kind)	LJ_ASMF void lj_vm_fp_##name(void);
FPRECDEF(FPREC_DECL)
#undef FPREC_DECL

/* Where the VM's shared paths go (lj_fprec_targets): with recording on, to
** the code that points rbp at a record; off, past it. Return to a Lua
** frame (g->fprec_retz): BC_RET_Z, whose address lj_vm_fp_retaddr() gives,
** or the same code in RET's recording variant, lj_vm_fp_retz, which also
** points rbp at the record of the frame returned to. After a trace exit
** (fprec_exit): lj_vm_fp_exit; off, lj_vm_fp_exit_off (rbp back to its VM
** entry's record, for a trace that ran while recording stopped) once
** recording ever started, before that lj_vm_fp_exit_done. Likewise after a continuation (fprec_cont) and when
** resuming a coroutine (fprec_resume).
*/
LJ_ASMF void lj_vm_fp_retz(void);
LJ_ASMF void *lj_vm_fp_retaddr(void);
LJ_ASMF void lj_vm_fp_exit(void);
LJ_ASMF void lj_vm_fp_exit_off(void);
LJ_ASMF void lj_vm_fp_exit_done(void);
LJ_ASMF void lj_vm_fp_cont(void);
LJ_ASMF void lj_vm_fp_cont_done(void);
LJ_ASMF void lj_vm_fp_resume(void);
LJ_ASMF void lj_vm_fp_resumed(void);
LJ_FUNC void lj_fprec_targets(global_State *g, uint8_t mode);
#define lj_fprec_init(g)	lj_fprec_targets((g), 0)

/* Dispatch mode bits wanted by recording (lj_dispatch_update). */
#define lj_fprec_mode(g)	((g)->fprec_on ? DISPMODE_FPREC : 0)

LJ_FUNC int lj_fprec_start(lua_State *L);
LJ_FUNC void lj_fprec_stop(lua_State *L);
LJ_FUNC void lj_fprec_newthread(lua_State *L);
LJ_FUNC void lj_fprec_freethread(global_State *g, lua_State *L);
LJ_FUNC void lj_fprec_resize(lua_State *L, char *oldst, ptrdiff_t delta);
LJ_FUNC void lj_fprec_close(global_State *g);
LJ_FUNC void lj_fprec_fixrbp(lua_State *L);
LJ_FUNC void *lj_fprec_top(lua_State *L);
LJ_FUNC uint8_t lj_fprec_dispatch(ASMFunction *disp, uint8_t oldmode,
				  uint8_t mode);
LJ_FUNC void lj_fprec_heads(ASMFunction *disp, uint8_t mode,
			    ASMFunction f_funcf);
LJ_FUNC ASMFunction lj_fprec_ins(uint8_t mode, BCOp op);
LJ_FUNCA void *lj_fprec_exit(lua_State *L, const BCIns *pc);
#if LJ_HASTRACEPP
LJ_FUNCA void *lj_fprec_tracelink(lua_State *L, TValue *base,
				  const BCIns *pc);
#endif
#if LJ_FPREC_ASSERT
LJ_FUNCA void lj_fprec_check(lua_State *L, TValue *base, intptr_t k,
			     void **rbp, const BCIns *pc);
#endif

#else

#define lj_fprec_init(g)			UNUSED(g)
#define lj_fprec_mode(g)			0
#define lj_fprec_start(L)			(UNUSED(L), 0)
#define lj_fprec_stop(L)			UNUSED(L)
#define lj_fprec_newthread(L)			UNUSED(L)
#define lj_fprec_freethread(g, L)		UNUSED(L)
#define lj_fprec_resize(L, oldst, delta)	UNUSED(L)
#define lj_fprec_close(g)			UNUSED(g)
#define lj_fprec_fixrbp(L)			UNUSED(L)
#define lj_fprec_dispatch(disp, oldmode, mode)	((uint8_t)((oldmode) ^ (mode)))
#define lj_fprec_heads(disp, mode, f_funcf)	UNUSED(disp)
#define lj_fprec_ins(mode, op)			makeasmfunc(lj_bc_ofs[(op)])

#endif

#endif
