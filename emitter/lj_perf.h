/*
** ljperf hooks called by the patched LuaJIT VM (implemented in lj_perf.c).
** Compiled inside LuaJIT's src/ directory: the build copies emitter/ there.
** Without LJ_HASPERF (LUAJIT_DISABLE_PERF) the hooks are no-ops.
*/
#ifndef LJ_PERF_H
#define LJ_PERF_H

#include "lj_obj.h"
#include "lj_jit.h"

/* What a global_State describes to perf (global_State.perfmask). */
#define LJ_PERF_MAP	1u	/* /tmp/perf-PID.map lines. */
#define LJ_PERF_JITDUMP	2u	/* jitdump records. */
#define LJ_PERF_FRAMES	4u	/* Lua frame records (lj_fprec.c). */

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
