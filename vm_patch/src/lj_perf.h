/*
** ljperf hooks called by the patched LuaJIT VM (patch 0003; lj_perf.c,
** lj_perfcode.c, lib_perf.c). Without LJ_HASPERF (LUAJIT_DISABLE_PERF)
** they are no-ops. A global_State's perfmask holds what it describes to
** perf: the LUAJIT_PERF_* bits of luajit.h (map, jitdump, frames and, with
** patch 0006, mem), as luaJIT_perf_status returns them. The remote switch
** (0004) is lj_perfremote.h, allocation samples (0006) lj_perfmem.h.
*/
#ifndef LJ_PERF_H
#define LJ_PERF_H

#include "lj_obj.h"
#include "lj_jit.h"

#if LJ_HASPERF
LJ_FUNC void lj_perf_init(lua_State *L);	/* End of lua_newstate. */
LJ_FUNC void lj_perf_close(global_State *g);	/* Start of lua_close. */
LJ_FUNC void lj_perf_chunk(lua_State *L, GCproto *pt);  /* Chunk loaded. */
LJ_FUNC void lj_perf_trace(jit_State *J, GCtrace *T);	 /* Trace saved. */
LJ_FUNC int luaopen_jit_perf(lua_State *L);	/* require "jit.perf" */
#else
#define lj_perf_init(L)		UNUSED(L)
#define lj_perf_close(g)	UNUSED(g)
#define lj_perf_chunk(L, pt)	UNUSED(pt)
#define lj_perf_trace(J, T)	UNUSED(T)
#endif

#endif
