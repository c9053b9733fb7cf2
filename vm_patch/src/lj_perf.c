/*
** ljperf switch and C API (patch 0003): switches perf support on and off
** for a global_State and answers what is on.
** Parts: map (/tmp/perf-PID.map), jitdump (jit-PID.dump), frames (Lua
** frames in the rbp chain, lj_fprec.c; on arm64, since 0009, the window
** of lj_fpwin.c) and, with 0006, mem (allocation samples, lj_perfmem.c).
** Switched by LUAJIT_PERF (unset, "" or "0": off;
** "1": map, jitdump and frames; or a comma list of the parts; nothing
** else) at lua_newstate, jit.perf.start/stop/status (lib_perf.c),
** luaJIT_perf_start/stop/status for embedders (status: the LUAJIT_PERF_*
** bits of luajit.h) and, with 0004, ljperf record -p (lj_perfremote.c).
** Everything here must leave the program running: errors are reported
** once and switch parts off.
** File-scope names carry a prefix (perf_, Perf): ljamalg.c compiles these
** files together with all of LuaJIT.
*/

#define lj_perf_c
#define LUA_CORE

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lua.h"
#include "luajit.h"

#include "lj_obj.h"
#include "lj_fprec.h"
#include "lj_perfint.h"

#if LJ_HASPERF  /* Not with -DLUAJIT_DISABLE_PERF (lj_arch.h). */

/* -- Parts ---------------------------------------------------------------- */

/* Parses "1", "0", "" or a comma list of map,jitdump,frames,mem (no empty
** words). Returns -1 and the first bad word in BAD for anything else.
*/
int lj_perf_parse(const char *s, unsigned *mask, char *bad, size_t badsz)
{
  *mask = 0;
  if (!s || !*s || !strcmp(s, "0")) return 0;
  if (!strcmp(s, "1")) { *mask = PERF_ALL; return 0; }
  for (;;) {
    size_t n = strcspn(s, ",");
    if (n == 3 && !strncmp(s, "map", 3)) *mask |= LUAJIT_PERF_MAP;
    else if (n == 7 && !strncmp(s, "jitdump", 7)) *mask |= LUAJIT_PERF_JITDUMP;
    else if (n == 6 && !strncmp(s, "frames", 6)) *mask |= LUAJIT_PERF_FRAMES;
    else if (PERF_MEM && n == 3 && !strncmp(s, "mem", 3)) *mask |= PERF_MEM;
    else {
      snprintf(bad, badsz, "%.*s", (int)(n > 40 ? 40 : n), s);
      *mask = 0;
      return -1;
    }
    if (!s[n]) return 0;
    s += n + 1;
  }
}

/* " map jitdump frames mem": the parts in MASK, for a message. */
const char *lj_perf_partnames(unsigned mask, char *buf)
{
  snprintf(buf, 32, "%s%s%s%s", (mask & LUAJIT_PERF_MAP) ? " map" : "",
	   (mask & LUAJIT_PERF_JITDUMP) ? " jitdump" : "",
	   (mask & LUAJIT_PERF_FRAMES) ? " frames" : "",
	   (mask & PERF_MEM) ? " mem" : "");
  return buf;
}

static unsigned perf_writers(unsigned mask)
{
  return ((mask & LUAJIT_PERF_MAP) ? LJP_MAP : 0) |
	 ((mask & LUAJIT_PERF_JITDUMP) ? LJP_JITDUMP : 0);
}

/* -- Switching ------------------------------------------------------------ */

/* The outputs are process-wide and stay open while the process lives:
** stopping or closing a lua_State only ends describing its code. They are
** closed (jitdump CODE_CLOSE) at exit. Never earlier: perf inject stops
** reading a dump at CODE_CLOSE, so whatever a later lua_State or a restart
** appended would be lost.
*/
static pthread_once_t perf_once = PTHREAD_ONCE_INIT;

static void perf_atexit(void)
{
  ljp_emit_close();
}

static void perf_register_atexit(void)
{
  (void)atexit(perf_atexit);
}

/* Trace inline stacks come with the jitdump unless LUAJIT_PERF_INLINE=0
** (they cost memory while a trace compiles; the traces are the same). */
static int perf_inline_wanted(void)
{
  const char *s = getenv("LUAJIT_PERF_INLINE");
  return !(s && !strcmp(s, "0"));
}

/* Turns on the parts in MASK for L's universe (allocation samples every
** MEMRATE bytes on average, 0: LUAJIT_PERF_MEMRATE or the default).
** Returns the parts that failed to start.
*/
unsigned lj_perf_start(lua_State *L, unsigned mask, uint64_t memrate)
{
  global_State *g = G(L);
  unsigned failed = 0, emit = mask & PERF_EMIT;
  if (emit) {
    unsigned open, got, had;
    pthread_once(&perf_once, perf_register_atexit);
    open = ljp_emit_open(perf_writers(emit), NULL);
    got = ((open & LJP_MAP) ? LUAJIT_PERF_MAP : 0) |
	  ((open & LJP_JITDUMP) ? LUAJIT_PERF_JITDUMP : 0);
    had = g->perfmask & PERF_EMIT;
    failed |= emit & ~got;
    g->perfmask |= emit & got;
    if ((g->perfmask & LUAJIT_PERF_JITDUMP) && perf_inline_wanted())
      lj_tracepos_switch(g, 1);  /* Inline stacks of traces from now on. */
    if ((g->perfmask & PERF_EMIT) & ~had) {  /* New output: describe all. */
      int fresh;
      ljp_emit_begin(&fresh);
      if (lj_perf_all(g) == 0) g->perfmask |= PERF_RESCAN;
    }
  }
  if ((mask & LUAJIT_PERF_FRAMES)) {
    if (perf_frames_start(L)) g->perfmask |= LUAJIT_PERF_FRAMES;
    else failed |= LUAJIT_PERF_FRAMES;
  }
  if ((mask & PERF_MEM) && !lj_perfmem_start(g, memrate))
    failed |= PERF_MEM;
  return failed;
}

void lj_perf_stop(lua_State *L, unsigned mask)
{
  global_State *g = G(L);
  if ((mask & LUAJIT_PERF_FRAMES)) perf_frames_stop(L);
  if ((mask & PERF_MEM)) lj_perfmem_stop(g, 0);
  g->perfmask &= ~mask;
  if (!(g->perfmask & PERF_EMIT)) g->perfmask &= ~PERF_RESCAN;
  if (!(g->perfmask & LUAJIT_PERF_JITDUMP)) lj_tracepos_switch(g, 0);
}

unsigned lj_perf_status(global_State *g)
{
  unsigned mask = g->perfmask & PERF_EMIT;
  int fresh = 0;
  unsigned open = mask ? ljp_emit_begin(&fresh) : 0;
  if (fresh) lj_perf_all(g);
  if (!(open & LJP_MAP)) mask &= ~LUAJIT_PERF_MAP;
  if (!(open & LJP_JITDUMP)) mask &= ~LUAJIT_PERF_JITDUMP;
  if (perf_frames_on(g)) mask |= LUAJIT_PERF_FRAMES;
  if (lj_perfmem_on(g)) mask |= PERF_MEM;
  return mask | lj_perfremote_status(g, mask);
}

void lj_perf_init(lua_State *L)
{
  unsigned mask;
  char bad[48];
  const char *env = getenv("LUAJIT_PERF");
  int scratch = lj_perf_isscratch();
  /* lj_perf_srcnames' state: nothing of perf, and its GC steps must not
  ** switch (it refuses the remote switch). */
  lj_perfremote_init(G(L), scratch);
  if (scratch) return;
  if (lj_perf_parse(env, &mask, bad, sizeof(bad)) < 0) {
    fprintf(stderr, "ljperf: LUAJIT_PERF: unknown part '%s' (use "
		    PERF_VALUES ")\n", bad);
    return;
  }
  if (mask && (mask = lj_perf_start(L, mask, 0)) != 0 &&
      (mask & (LUAJIT_PERF_FRAMES|PERF_MEM))) {
    char buf[32];
    fprintf(stderr, "ljperf: LUAJIT_PERF: could not start:%s\n",
	    lj_perf_partnames(mask & (LUAJIT_PERF_FRAMES|PERF_MEM), buf));
  }
}

void lj_perf_close(global_State *g)
{
  lj_perfremote_close(g);
  g->perfmask = 0;
  lj_tracepos_switch(g, 0);
  lj_perfmem_stop(g, 1);  /* Before lua_close frees through g->allocf. */
}

/* -- C API ---------------------------------------------------------------- */

LUA_API int luaJIT_perf_start(lua_State *L, const char *what)
{
  unsigned mask;
  char bad[48];
  if (lj_perf_parse(what ? what : "1", &mask, bad, sizeof(bad)) < 0) return -1;
  return lj_perf_start(L, mask, 0) ? -1 : 0;
}

LUA_API int luaJIT_perf_stop(lua_State *L, const char *what)
{
  unsigned mask;
  char bad[48];
  if (lj_perf_parse(what ? what : "1", &mask, bad, sizeof(bad)) < 0) return -1;
  lj_perf_stop(L, mask);
  return 0;
}

LUA_API int luaJIT_perf_status(lua_State *L)
{
  return (int)lj_perf_status(G(L));
}

#endif
