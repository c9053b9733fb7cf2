/*
** ljperf heap snapshots (patch 0010): the heap of one global_State as a V8
** .heapsnapshot, for Chrome DevTools, memlab and ljperf heap.
*/

#ifndef _LJ_HEAPSNAP_H
#define _LJ_HEAPSNAP_H

#include "lj_obj.h"

/* Writes G(L)'s heap to PATH (through PATH.tmp, then renamed). Returns the
** number of nodes, or -1 with one line in ERR. Allocates nothing on the
** Lua heap and leaves the GC where it was.
*/
LJ_FUNC long lj_heapsnap_write(lua_State *L, const char *path, char *err,
			       size_t errsz);
/* ljperf heap -p: a remote request's snapshot (lj_perfremote.c), written
** as $LUAJIT_PERF_DIR/ljperf-heap-PID-SEQ-STATE.heapsnapshot (default
** /tmp; STATE: the global_State's address in hex). */
LJ_FUNC void lj_heapsnap_remote(lua_State *L, uint32_t seq);
/* Adds heapsnapshot to the jit.perf table on top of L's stack. */
LJ_FUNC void lj_heapsnap_open(lua_State *L);

#endif
