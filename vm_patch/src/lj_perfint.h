/*
** ljperf: what the perf files share, private to them (the VM's call sites
** use lj_perf.h). Patch 0003 brings the switch and C API (lj_perf.c), names
** (lj_perfname.c), names for orphans (lj_perforphan.c), the code
** description (lj_perfcode.c) and jit.perf (lib_perf.c); later patches
** bring the remote switch (0004, lj_perfremote.[ch]), trace positions
** (0005, lj_tracepos.[ch]), allocation samples (0006, lj_perfmem.[ch]) and
** heap snapshots (0010, lj_heapsnap.[ch]).
** The 0003 files reach those only through the blocks below, each a no-op
** until its patch sets its switch in lj_arch.h: every prefix of the series
** compiles exactly its own patches' code.
*/

#ifndef _LJ_PERFINT_H
#define _LJ_PERFINT_H

#include "lj_obj.h"
#include "lj_jit.h"
#include "lj_debug.h"
#include "luajit.h"
#include "lj_perf.h"
#include "ljperf_emit.h"
#include "ljperf_set.h"

#if LJ_HASPERF

/* -- Later patches' parts ------------------------------------------------- */

#if LJ_HASPERFREMOTE	/* 0004 */
#include "lj_perfremote.h"
#define PERF_REMOTE	LUAJIT_PERF_REMOTE
#else
#define PERF_REMOTE	0u
#define lj_perfremote_init(g, refuse)	UNUSED(g)
#define lj_perfremote_close(g)		UNUSED(g)
#define lj_perfremote_status(g, mask)	0u
#endif

#if LJ_HASTRACEPOS	/* 0005 */
#include "lj_tracepos.h"
#define perf_tracepos(J)	((J)->tracepos)
#else
typedef struct TracePos TracePos;
#define perf_tracepos(J)	(UNUSED(J), (TracePos *)NULL)
#define lj_tracepos_switch(g, on)	UNUSED(g)
#endif

#if LJ_HASPERFMEM	/* 0006 */
#include "lj_perfmem.h"
#define PERF_MEM	LUAJIT_PERF_MEM
#else
#define PERF_MEM	0u
#define lj_perfmem_start(g, rate)	(UNUSED(g), UNUSED(rate), 0)
#define lj_perfmem_stop(g, closing)	UNUSED(g)
#define lj_perfmem_on(g)		(UNUSED(g), 0)
#define lj_perfmem_poll(g)		UNUSED(g)
#endif

#if LJ_HASHEAPSNAP	/* 0010 */
#include "lj_heapsnap.h"
#define PERF_HEAP	0x20u	/* in a remote request: a snapshot per state */
#else
#define PERF_HEAP	0u
#define lj_heapsnap_open(L)		UNUSED(L)
#define lj_heapsnap_remote(L, seq)	(UNUSED(L), UNUSED(seq))
#endif

/* The frames part: x86-64's records (0002, lj_fprec.c) or, from 0009 on,
** arm64's window (0008, lj_fpwin.c): start returns 0 if it failed. */
#if LJ_HASFPWIN
#include "lj_fpwin.h"
#define perf_frames_start(L)	lj_fpwin_start(L)
#define perf_frames_stop(L)	lj_fpwin_stop(L)
#define perf_frames_on(g)	((g)->fpwin_on)
#else
#define perf_frames_start(L)	lj_fprec_start(L)
#define perf_frames_stop(L)	lj_fprec_stop(L)
#define perf_frames_on(g)	((g)->fprec_on)
#endif

/* -- Parts (lj_perf.c) ---------------------------------------------------- */

#define PERF_ALL	(LUAJIT_PERF_MAP|LUAJIT_PERF_JITDUMP|LUAJIT_PERF_FRAMES)
#define PERF_EMIT	(LUAJIT_PERF_MAP|LUAJIT_PERF_JITDUMP)
/* Every part; "1" (PERF_ALL) leaves allocation samples out. */
#define PERF_PARTS	(PERF_ALL|PERF_MEM)
/* perfmask bit private to these files: describe everything at the next
** chunk load. Set when output starts on a state that has no prototypes yet
** (at lua_newstate): the standard library's Lua functions (table.remove,
** ...) are created afterwards by luaL_openlibs, which loads no chunk.
*/
#define PERF_RESCAN	0x80u

/* What a LUAJIT_PERF value or a start/stop argument may be. */
#if LJ_HASPERFMEM
#define PERF_VALUES	"1, 0 or a comma list of map,jitdump,frames,mem"
#else
#define PERF_VALUES	"1, 0 or a comma list of map,jitdump,frames"
#endif

LJ_FUNC int lj_perf_parse(const char *s, unsigned *mask, char *bad,
			  size_t badsz);
LJ_FUNC const char *lj_perf_partnames(unsigned mask, char *buf);
LJ_FUNC unsigned lj_perf_start(lua_State *L, unsigned mask, uint64_t memrate);
LJ_FUNC void lj_perf_stop(lua_State *L, unsigned mask);
LJ_FUNC unsigned lj_perf_status(global_State *g);

/* -- Names (lj_perfname.c) ------------------------------------------------ */

#define PERF_NAMESZ	512	/* Longest symbol name; longer ones are cut. */
#define PERF_PARTMAX	120	/* Longest chunk or function name in a label:
				** TRACE_N::CHUNK:LINE::NAME@CHUNK:LINE stays
				** below PERF_NAMESZ, so labels keep their lines.
				** Chunk names are DWARF file names in perf's
				** jitted-*.so: libdw (elfutils 0.188) loses the
				** line table when one is longer than 122 bytes
				** (extended opcode length >= 128: two-byte ULEB).
				*/

/* A name being built: P holds N bytes and a NUL, at most SZ with it. */
typedef struct PerfBuf { char *p; size_t n, sz; } PerfBuf;

LJ_FUNC void lj_perf_braw(PerfBuf *b, const char *s);	/* S already clean */
LJ_FUNC void lj_perf_bstr(PerfBuf *b, const char *s);	/* S cleaned */
LJ_FUNC void lj_perf_bint(PerfBuf *b, long v);
LJ_FUNC void lj_perf_bchunk(PerfBuf *b, GCproto *pt);
LJ_FUNC void lj_perf_blabel(PerfBuf *b, GCproto *pt, const char *name,
			    const char *chunk);

/* A Lua function of the standard library (lj_lib.c lib_read_lfunc): its
** chunk name is its name in the library table, its first line ~0.
*/
static LJ_AINLINE int perf_isbuiltin(GCproto *pt)
{
  return pt->firstline == ~(BCLine)0;
}

LJ_FUNC int lj_perf_isself(GCproto *child);

/* The chunk name of the prototypes being described (lj_perf_bchunk), made
** once for all prototypes that share it: a chunk's children, a trace's
** owner. Lives on the caller's stack while the prototypes are alive.
*/
typedef struct PerfChunk {
  GCstr *cs;		/* chunk name it was made from; NULL: none yet */
  int builtin;		/* made for a library function (perf_isbuiltin) */
  char s[PERF_NAMESZ];
} PerfChunk;

LJ_FUNC const char *lj_perf_chunkof(PerfChunk *c, GCproto *pt);

/* Calls VISIT(child, name, UD) for every prototype below PT, parents
** first, NAME what its parent does with the closure ("" if anonymous).
*/
typedef void (*PerfVisit)(GCproto *child, const char *name, void *ud);
LJ_FUNC void lj_perf_walk(GCproto *pt, PerfVisit visit, void *ud);

/* Prototype -> the name its parent (or lj_perforphan.c) gave it. */
LJ_FUNC void lj_perf_nameput(GCproto *pt, const char *name);
LJ_FUNC void lj_perf_nameget(GCproto *pt, char *buf, size_t sz);
LJ_FUNC const char *lj_perf_tracelabel(GCproto *pt, const char *fbuf);

/* Line of instruction POS of PT, as lj_debug_line gives it; read directly
** for instructions inside PT (once per described or recorded instruction).
*/
static LJ_AINLINE BCLine lj_perf_line(GCproto *pt, BCPos pos)
{
  const void *li = proto_lineinfo(pt);
  if (li && pos - 1 < pt->sizebc - 1) {  /* 0 < pos < sizebc */
    pos--;
    return pt->firstline + (BCLine)(pt->numline < 256 ?
      ((const uint8_t *)li)[pos] : pt->numline < 65536 ?
      ((const uint16_t *)li)[pos] : ((const uint32_t *)li)[pos]);
  }
  return lj_debug_line(pt, pos);
}

/* -- Names for orphans (lj_perforphan.c) ---------------------------------- */

/* Walks of g->gc.root see only live objects: between two steps of a GC
** sweep, the unswept dead ones may point at objects already freed.
*/
#define perf_live(g, o)	(!isdead((g), (o)))

static LJ_AINLINE int perf_ptreq(const void *p, const void *key)
{
  return p == key;
}

/* Name the prototypes without parent (not in HAVEPARENT) and without name,
** from their file reloaded, then from the heap. Only at a start.
*/
LJ_FUNC void lj_perf_srcnames(global_State *g, LJPSet *haveparent);
LJ_FUNC void lj_perf_heapnames(global_State *g, LJPSet *haveparent);
LJ_FUNC int lj_perf_isscratch(void);	/* lj_perf_srcnames' own state? */

/* -- Code description (lj_perfcode.c) ------------------------------------- */

LJ_FUNC size_t lj_perf_all(global_State *g);

#endif

#endif
