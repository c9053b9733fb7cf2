/*
** Patch points in trace machine code (ljperf). Copied into LuaJIT's src/
** at build time; see lj_tracepp.c.
*/

#ifndef _LJ_TRACEPP_H
#define _LJ_TRACEPP_H

#include "lj_obj.h"
#include "lj_jit.h"

/* The record slot {next, call site} traces keep while recording: 16 bytes
** at this offset from the stack pointer a trace is entered with, the two
** words stock traces save r13 and r12 in (the second is the interpreter's
** TMP1/MULTRES, dead while a trace runs).
*/
#define TRACEPP_SLOT	8

#if LJ_HASJIT && LJ_HASFPREC

/* Links into a frame a trace made go through it while recording. */
LJ_ASMF void lj_vm_fp_link(void);
LJ_FUNC void lj_tracepp_init(global_State *g);
LJ_FUNC void lj_tracepp_add(jit_State *J, MCode *p, MSize len, uint64_t off,
			   uint64_t on);
LJ_FUNC void lj_tracepp_adddisp(jit_State *J, MCode *disp);
LJ_FUNC void lj_tracepp_save(jit_State *J, GCtrace *T);
LJ_FUNC void lj_tracepp_free(global_State *g, GCtrace *T);
LJ_FUNC void lj_tracepp_flip(jit_State *J, int on);
LJ_FUNC void lj_tracepp_follow(jit_State *J, GCtrace *T);
#define lj_tracepp_reset(J) \
  ((J)->ppn = (J)->pdn = 0, (J)->thunklo = (J)->thunkhi = NULL)
#define lj_tracepp_freestate(g, J) \
  (lj_mem_freevec((g), (J)->ppbuf, (J)->ppsz, TracePP), \
   lj_mem_freevec((g), (J)->pdbuf, (J)->pdsz, MCode *))

#else

#define lj_tracepp_init(g)		UNUSED(g)
#define lj_tracepp_reset(J)		UNUSED(J)
#define lj_tracepp_save(J, T)		UNUSED(T)
#define lj_tracepp_follow(J, T)		UNUSED(T)
#define lj_tracepp_free(g, T)		UNUSED(T)
#define lj_tracepp_flip(J, on)		UNUSED(J)
#define lj_tracepp_freestate(g, J)	UNUSED(J)

#endif

#endif
