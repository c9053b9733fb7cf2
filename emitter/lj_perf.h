/*
** ljperf hooks called by the patched LuaJIT VM (implemented in lj_perf.c).
** Compiled inside LuaJIT's src/ directory: the build copies emitter/ there.
** Without LJ_HASPERF (LUAJIT_DISABLE_PERF) the hooks are no-ops.
*/
#ifndef LJ_PERF_H
#define LJ_PERF_H

#include "lj_obj.h"
#include "lj_jit.h"
#include "luajit.h"

/* What a global_State describes to perf (global_State.perfmask): the
** LUAJIT_PERF_* bits of luajit.h (map, jitdump, frames), as
** luaJIT_perf_status returns them.
*/

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
