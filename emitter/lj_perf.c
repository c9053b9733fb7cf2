/*
** ljperf glue: switches perf support on and off and describes the VM's code
** to the emitter writers (perfmap.c, jitdump.c).
**
** What perf is told:
** - every prototype: its bytecode range [bc, bc+4*sizebc+4) named
**   NAME@CHUNK:LINE (name found from what its parent's bytecode does with
**   the closure) or CHUNK:LINE, with lines for *return addresses*: address
**   A maps to the line of the instruction at A-4. Bytecode addresses come
**   from Lua frame records (ret = next PC) and from the PC register.
** - every trace: its machine code named TRACE_N::CHUNK:LINE::OWNER (OWNER is
**   the label of the prototype the trace starts in), lines of OWNER from
**   snapshots (code of a function it inlined: the line of the call).
** Activation: LUAJIT_PERF (unset, "" or "0": off; "1": map, jitdump and
** frames; or a comma list of map,jitdump,frames,mem; nothing else; mem:
** allocation samples, lj_perfmem.c), jit.perf.start/stop/
** status, and luaJIT_perf_start/stop/status for embedders (status: the
** LUAJIT_PERF_* bits of luajit.h). Everything here must leave the program
** running: errors are reported once and switch parts off; what perf is not
** told is reported once and counted (ljp_emit_drop).
** File-scope names carry a prefix (perf_, pb_, Perf): ljamalg.c compiles
** this file together with all of LuaJIT.
*/

#define lj_perf_c
#define LUA_CORE

#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lua.h"
#include "lauxlib.h"
#include "luajit.h"

#include "lj_obj.h"
#include "lj_bc.h"
#include "lj_debug.h"
#include "lj_frame.h"
#include "lj_gc.h"
#include "lj_jit.h"
#include "lj_ir.h"
#include "lj_dispatch.h"
#include "lj_target.h"
#include "lj_fprec.h"
#include "lj_tracepos.h"
#include "lj_perf.h"
#include "ljperf_emit.h"
#include "ljperf_set.h"

#if LJ_HASPERF  /* Not with -DLUAJIT_DISABLE_PERF (lj_arch.h). */

#define PERF_ALL	(LUAJIT_PERF_MAP|LUAJIT_PERF_JITDUMP|LUAJIT_PERF_FRAMES)
#define PERF_EMIT	(LUAJIT_PERF_MAP|LUAJIT_PERF_JITDUMP)
/* Every part; "1" (PERF_ALL) leaves allocation samples out. */
#define PERF_PARTS	(PERF_ALL|LUAJIT_PERF_MEM)
/* perfmask bit private to this file: describe everything at the next chunk
** load. Set when output starts on a state that has no prototypes yet (at
** lua_newstate): the standard library's Lua functions (table.remove, ...)
** are created afterwards by luaL_openlibs, which loads no chunk.
*/
#define PERF_RESCAN	0x80u
/* global_State.perfremote: the LUAJIT_PERF_* parts the remote switch
** started, and: */
#define PERF_REMOTE_ON		0x40u	/* switched on remotely */
#define PERF_REMOTE_REFUSE	0x80u	/* LUAJIT_PERF_REMOTE=0 */
#define PERF_NAMESZ	512	/* Longest symbol name; longer ones are cut. */
#define PERF_PARTMAX	120	/* Longest chunk or function name in a label:
				** TRACE_N::CHUNK:LINE::NAME@CHUNK:LINE stays
				** below PERF_NAMESZ, so labels keep their lines.
				** Chunk names are DWARF file names in perf's
				** jitted-*.so: libdw (elfutils 0.188) loses the
				** line table when one is longer than 122 bytes
				** (extended opcode length >= 128: two-byte ULEB).
				*/

/* -- Parts ---------------------------------------------------------------- */

/* What a LUAJIT_PERF value or a start/stop argument may be. */
#define PERF_VALUES	"1, 0 or a comma list of map,jitdump,frames,mem"

/* Parses "1", "0", "" or a comma list of map,jitdump,frames,mem (no empty
** words). Returns -1 and the first bad word in BAD for anything else.
*/
static int perf_parse(const char *s, unsigned *mask, char *bad, size_t badsz)
{
  *mask = 0;
  if (!s || !*s || !strcmp(s, "0")) return 0;
  if (!strcmp(s, "1")) { *mask = PERF_ALL; return 0; }
  for (;;) {
    size_t n = strcspn(s, ",");
    if (n == 3 && !strncmp(s, "map", 3)) *mask |= LUAJIT_PERF_MAP;
    else if (n == 7 && !strncmp(s, "jitdump", 7)) *mask |= LUAJIT_PERF_JITDUMP;
    else if (n == 6 && !strncmp(s, "frames", 6)) *mask |= LUAJIT_PERF_FRAMES;
    else if (n == 3 && !strncmp(s, "mem", 3)) *mask |= LUAJIT_PERF_MEM;
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
static const char *perf_partnames(unsigned mask, char *buf)
{
  snprintf(buf, 32, "%s%s%s%s", (mask & LUAJIT_PERF_MAP) ? " map" : "",
	   (mask & LUAJIT_PERF_JITDUMP) ? " jitdump" : "",
	   (mask & LUAJIT_PERF_FRAMES) ? " frames" : "",
	   (mask & LUAJIT_PERF_MEM) ? " mem" : "");
  return buf;
}

static unsigned perf_writers(unsigned mask)
{
  return ((mask & LUAJIT_PERF_MAP) ? LJP_MAP : 0) |
	 ((mask & LUAJIT_PERF_JITDUMP) ? LJP_JITDUMP : 0);
}

/* -- Names ---------------------------------------------------------------- */

typedef struct PerfBuf { char *p; size_t n, sz; } PerfBuf;

/* Appends LEN bytes of S, already clean (made by pb_*), as much as fits. */
static void pb_rawn(PerfBuf *b, const char *s, size_t len)
{
  if (len > b->sz - 1 - b->n) len = b->sz - 1 - b->n;
  memcpy(b->p + b->n, s, len);
  b->n += len;
  b->p[b->n] = '\0';
}

static void pb_raw(PerfBuf *b, const char *s) { pb_rawn(b, s, strlen(s)); }

/* Appends LEN bytes of S (as much as fits), cleaned by ljp_name_copy. */
static void pb_put(PerfBuf *b, const char *s, size_t len)
{
  size_t n0 = b->n;
  pb_rawn(b, s, len);
  ljp_name_copy(b->p + n0, b->p + n0, b->n - n0);  /* In place. */
}

static void pb_str(PerfBuf *b, const char *s) { pb_put(b, s, strlen(s)); }

/* Appends at most PERF_PARTMAX bytes of S: a longer S is cut to its head
** (TAIL == 0) or its tail, marked by "...", never inside a UTF-8 sequence.
*/
static void pb_part(PerfBuf *b, const char *s, size_t len, int tail)
{
  if (len > PERF_PARTMAX) {
    size_t keep = PERF_PARTMAX - 3;
    if (tail) {
      s += len - keep;
      while (keep > 0 && ((unsigned char)*s & 0xc0) == 0x80) { s++; keep--; }
      pb_str(b, "...");
      pb_put(b, s, keep);
    } else {
      while (keep > 0 && ((unsigned char)s[keep] & 0xc0) == 0x80) keep--;
      pb_put(b, s, keep);
      pb_str(b, "...");
    }
  } else {
    pb_put(b, s, len);
  }
}

/* Appends V in decimal, two digits a step (every trace name has two). */
static void pb_int(PerfBuf *b, long v)
{
  static const char d2[] =
    "00010203040506070809101112131415161718192021222324"
    "25262728293031323334353637383940414243444546474849"
    "50515253545556575859606162636465666768697071727374"
    "75767778798081828384858687888990919293949596979899";
  char tmp[24], *p = tmp + sizeof(tmp);
  unsigned long u = v < 0 ? 0ul - (unsigned long)v : (unsigned long)v;
  for (; u >= 100; u /= 100) {
    const char *d = d2 + 2*(u % 100);
    *--p = d[1]; *--p = d[0];
  }
  if (u >= 10) { *--p = d2[2*u+1]; *--p = d2[2*u]; }
  else *--p = (char)('0' + u);
  if (v < 0) *--p = '-';
  pb_rawn(b, p, (size_t)(tmp + sizeof(tmp) - p));  /* Digits are clean. */
}

/* A Lua function of the standard library (lj_lib.c lib_read_lfunc): its
** chunk name is its name in the library table, its first line ~0.
*/
static int perf_isbuiltin(GCproto *pt)
{
  return pt->firstline == ~(BCLine)0;
}

/* Readable, safe chunk name: "@path" -> path, "=name" -> name, source text
** (load("...")) -> string_<hash of the text>, library functions -> builtin.
** No ':' (labels end in :LINE, trace names are split at "::").
*/
static void pb_chunk(PerfBuf *b, GCproto *pt)
{
  GCstr *cs = proto_chunkname(pt);
  const char *s = strdata(cs);
  size_t len = cs->len;
  if (perf_isbuiltin(pt)) {
    pb_str(b, "builtin");
  } else if (len > 0 && (s[0] == '@' || s[0] == '=')) {
    size_t n0 = b->n;
    s++; len--;
    if (len >= 2 && s[0] == '.' && s[1] == '/') { s += 2; len -= 2; }
    if (len >= 2 && ((s[0] == '(' && s[len-1] == ')') ||
		     (s[0] == '[' && s[len-1] == ']'))) { s++; len -= 2; }
    if (len == 0) pb_str(b, "?");
    else pb_part(b, s, len, 1);  /* A long path: its tail names the file. */
    for (; n0 < b->n; n0++)
      if (b->p[n0] == ':') b->p[n0] = '_';
  } else {
    uint32_t h = 2166136261u;  /* FNV-1a. */
    char tmp[16] = "string_";
    int i;
    while (len-- > 0) h = (h ^ (uint8_t)*s++) * 16777619u;
    for (i = 0; i < 8; i++) tmp[7 + i] = "0123456789abcdef"[(h >> (28 - 4*i)) & 15];
    pb_put(b, tmp, 15);
  }
}

/* The chunk name of the prototypes being described (pb_chunk), made once
** for all prototypes that share it: a chunk's children, a trace's owner.
** Lives on the caller's stack while the prototypes are alive.
*/
typedef struct PerfChunk {
  GCstr *cs;		/* chunk name it was made from; NULL: none yet */
  int builtin;		/* made for a library function (perf_isbuiltin) */
  char s[PERF_NAMESZ];
} PerfChunk;

static const char *perf_chunkof(PerfChunk *c, GCproto *pt)
{
  GCstr *cs = proto_chunkname(pt);
  int builtin = perf_isbuiltin(pt);
  if (c->cs != cs || c->builtin != builtin) {
    PerfBuf b = { c->s, 0, sizeof(c->s) };
    c->s[0] = '\0';
    pb_chunk(&b, pt);
    c->cs = cs; c->builtin = builtin;
  }
  return c->s;
}

static GCstr *perf_kstr(GCproto *pt, BCReg idx)
{
  return gco2str(proto_kgc(pt, ~(ptrdiff_t)idx));
}

/* Appends the name of the value in SLOT before instruction PC, following
** how it was loaded (local, global, field path, upvalue). 0 if unknown.
*/
static int pb_slot(PerfBuf *b, GCproto *pt, BCPos pc, BCReg slot, int depth)
{
  const BCIns *bc = proto_bc(pt);
  const char *name;
  const char *kind = depth > 0 ? lj_debug_slotname(pt, bc + pc, slot, &name) :
		     NULL;
  if (kind && (!strcmp(kind, "local") || !strcmp(kind, "global") ||
	       !strcmp(kind, "upvalue"))) {
    pb_str(b, name);
    return 1;
  }
  if (kind) {  /* Field or method: find the load to name its table, too. */
    BCPos p = pc;
    while (p-- > 1) {
      BCIns ins = bc[p];
      if (bcmode_a(bc_op(ins)) == BCMdst && bc_a(ins) == slot) {
	if (bc_op(ins) == BC_MOV) { slot = bc_d(ins); continue; }
	if (bc_op(ins) == BC_TGETS) {
	  size_t n0 = b->n;
	  if (pb_slot(b, pt, p, bc_b(ins), depth-1)) pb_str(b, ".");
	  else b->n = n0;
	  pb_str(b, strdata(perf_kstr(pt, bc_c(ins))));
	  return 1;
	}
	break;
      }
    }
    pb_str(b, name);
    return 1;
  }
  return 0;
}

/* Is the first parameter named self (function a:m() adds it)? */
static int perf_isself(GCproto *child)
{
  const char *name = NULL;
  const char *kind = child->numparams > 0 ?
    lj_debug_slotname(child, proto_bc(child) + 1, 0, &name) : NULL;
  return kind && !strcmp(kind, "local") && !strcmp(name, "self");
}

/* Appends the name the closure made by FNEW at PC gets: the variable,
** global or field it is stored into. 0 if anonymous.
*/
static int pb_fnewname(PerfBuf *b, GCproto *pt, BCPos pc, GCproto *child)
{
  const BCIns *bc = proto_bc(pt);
  BCReg a = bc_a(bc[pc]);
  if (pc + 1 < pt->sizebc) {
    BCIns ins = bc[pc+1];
    switch (bc_op(ins)) {
    case BC_GSET:
      if (bc_a(ins) == a) {
	pb_str(b, strdata(perf_kstr(pt, bc_d(ins))));
	return 1;
      }
      break;
    case BC_TSETS:
      if (bc_a(ins) == a) {
	size_t n0 = b->n;
	if (pb_slot(b, pt, pc + 1, bc_b(ins), 3))
	  pb_str(b, perf_isself(child) ? ":" : ".");
	else
	  b->n = n0;
	pb_str(b, strdata(perf_kstr(pt, bc_c(ins))));
	return 1;
      }
      break;
    case BC_MOV:
      if (bc_d(ins) == a) return pb_slot(b, pt, pc + 2, bc_a(ins), 1);
      break;
    case BC_USETV:
      if (bc_d(ins) == a) {
	pb_str(b, lj_debug_uvname(pt, bc_a(ins)));
	return 1;
      }
      break;
    default:
      break;
    }
  }
  /* local function f / local f = function: FNEW into a named local. */
  return pc + 1 < pt->sizebc ? pb_slot(b, pt, pc + 1, a, 1) : 0;
}

/* Label of a prototype: [NAME@]CHUNK:LINE (CHUNK: pb_chunk of PT). NAME
** may be NULL. Library functions: NAME@builtin:0, NAME their key in the
** library (remove, ...).
*/
static void pb_label(PerfBuf *b, GCproto *pt, const char *name,
		     const char *chunk)
{
  if (perf_isbuiltin(pt)) {
    GCstr *cs = proto_chunkname(pt);
    pb_part(b, strdata(cs), cs->len, 0);
    pb_str(b, "@builtin:0");
    return;
  }
  if (name && *name) { pb_part(b, name, strlen(name), 0); pb_raw(b, "@"); }
  pb_raw(b, chunk);
  pb_raw(b, ":");
  pb_int(b, (long)pt->firstline);
}

/* -- Names of described prototypes ---------------------------------------- */

/* Prototype address -> name its parent gave it, for naming traces later.
** An entry counts only while chunk, first line and size still match (the
** address may have been reused). Process-wide, for all lua_States.
*/
typedef struct PerfName {
  const void *pt, *chunk;
  BCLine firstline;
  MSize sizebc;
  char name[];
} PerfName;

static LJPSet perf_names;
static pthread_mutex_t perf_names_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t perf_names_gen;	/* Bumped by every perf_names_put. */

static int perf_names_eq(const void *p, const void *key)
{
  return ((const PerfName *)p)->pt == key;
}

static void perf_names_put(GCproto *pt, const char *name)
{
  uint64_t h = ljp_hash_ptr(pt);
  size_t len = strlen(name) + 1;
  PerfName *e = (PerfName *)malloc(sizeof(PerfName) + len);
  LJPSlot *slot;
  if (!e) goto nomem;
  e->pt = pt;
  e->chunk = gcref(pt->chunkname);
  e->firstline = pt->firstline;
  e->sizebc = pt->sizebc;
  memcpy(e->name, name, len);
  pthread_mutex_lock(&perf_names_lock);
  if (ljp_set_reserve(&perf_names) < 0) {
    pthread_mutex_unlock(&perf_names_lock);
    free(e);
    goto nomem;
  }
  slot = ljp_set_slot(&perf_names, h, perf_names_eq, pt);
  if (slot->h) { free(slot->p); slot->p = e; }  /* A new proto, same address. */
  else ljp_set_fill(&perf_names, slot, h, e);
  __atomic_add_fetch(&perf_names_gen, 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&perf_names_lock);
  return;
nomem:
  ljp_emit_drop(LJP_DROP_NAME);
}

/* Copies the name of PT into BUF (empty if unknown). */
static void perf_names_get(GCproto *pt, char *buf, size_t sz)
{
  LJPSlot *slot;
  buf[0] = '\0';
  pthread_mutex_lock(&perf_names_lock);
  slot = ljp_set_find(&perf_names, ljp_hash_ptr(pt), perf_names_eq, pt);
  if (slot) {
    PerfName *e = (PerfName *)slot->p;
    if (e->chunk == gcref(pt->chunkname) &&
	e->firstline == pt->firstline && e->sizebc == pt->sizebc)
    {
      size_t n = strlen(e->name);
      if (n >= sz) n = sz - 1;
      memcpy(buf, e->name, n);
      buf[n] = '\0';
    }
  }
  pthread_mutex_unlock(&perf_names_lock);
}

/* The label of the function a trace starts in, kept per thread for the next
** trace: a function's root and side traces tend to come in a row. Valid for
** the same prototype (as PerfName tells one) while no prototype was named
** since (perf_names_gen).
*/
typedef struct PerfLabel {
  const void *pt, *chunk;
  BCLine firstline;
  MSize sizebc;
  uint32_t gen;
  char s[PERF_NAMESZ];
} PerfLabel;

static __thread PerfLabel perf_label;

static const char *perf_tracelabel(GCproto *pt, const char *fbuf)
{
  PerfLabel *c = &perf_label;
  uint32_t gen = __atomic_load_n(&perf_names_gen, __ATOMIC_RELAXED);
  if (c->pt != pt || c->chunk != gcref(pt->chunkname) ||
      c->firstline != pt->firstline || c->sizebc != pt->sizebc ||
      c->gen != gen) {
    char pname[PERF_NAMESZ];
    PerfBuf b = { c->s, 0, sizeof(c->s) };
    c->pt = NULL;  /* Not valid while rebuilt. */
    c->s[0] = '\0';
    perf_names_get(pt, pname, sizeof(pname));
    pb_label(&b, pt, pname, fbuf);
    c->pt = pt; c->chunk = gcref(pt->chunkname);
    c->firstline = pt->firstline; c->sizebc = pt->sizebc;
    c->gen = gen;
  }
  return c->s;
}

/* -- Describing code ------------------------------------------------------ */

/* Line table scratch space: v starts as the caller's array STACK (sz
** entries) and moves to malloc (never a Lua error) when it outgrows it.
*/
typedef struct PerfLines { LJPLine *v, *stack; size_t n, sz; } PerfLines;
#define PERF_LINES_STACK	128
#define PERF_LINES_INIT(pl, arr) \
  { (pl).v = (pl).stack = (arr); (pl).n = 0; (pl).sz = PERF_LINES_STACK; }
#define PERF_LINES_FREE(pl)	{ if ((pl).v != (pl).stack) free((pl).v); }

static LJ_AINLINE int perf_lines_add(PerfLines *pl, uint64_t addr, uint32_t line,
			  const char *file)
{
  if (pl->n && pl->v[pl->n-1].line == line && pl->v[pl->n-1].file == file)
    return 1;
  if (pl->n == pl->sz) {
    size_t sz = 2*pl->sz;
    LJPLine *v = (LJPLine *)realloc(pl->v == pl->stack ? NULL : pl->v,
				    sz*sizeof(LJPLine));
    if (!v) return 0;
    if (pl->v == pl->stack) memcpy(v, pl->v, pl->n*sizeof(LJPLine));
    pl->v = v; pl->sz = sz;
  }
  pl->v[pl->n].addr = addr;
  pl->v[pl->n].line = line;
  pl->v[pl->n].file = file;
  pl->n++;
  return 1;
}

static void perf_proto(GCproto *pt, const char *name, PerfChunk *chunk)
{
  char nbuf[PERF_NAMESZ];
  PerfBuf nb = { nbuf, 0, sizeof(nbuf) };
  LJPLine lstack[PERF_LINES_STACK];
  PerfLines pl;
  uint64_t bc = (uint64_t)(uintptr_t)proto_bc(pt);
  uint64_t size = 4*(uint64_t)pt->sizebc + 4;  /* PCs point after an ins. */
  const char *fbuf = perf_chunkof(chunk, pt);
  PERF_LINES_INIT(pl, lstack);
  nbuf[0] = '\0';
  if (name && *name) perf_names_put(pt, name);
  pb_label(&nb, pt, name, fbuf);
  if (proto_lineinfo(pt)) {  /* The header's line, then each instruction's. */
    BCPos i;
    int ok = perf_lines_add(&pl, bc, (uint32_t)pt->firstline, fbuf);
    for (i = 0; ok && i < pt->sizebc; i++)
      ok = perf_lines_add(&pl, bc + 4*(uint64_t)(i+1),
			  (uint32_t)lj_tracepos_line(pt, i), fbuf);
    if (!ok) { pl.n = 0; ljp_emit_drop(LJP_DROP_LINES); }
  }
  ljp_emit_load(bc, size, nbuf, NULL, pl.v, pl.n);
  PERF_LINES_FREE(pl);
}

/* Calls VISIT(child, name, UD) for every prototype below PT, parents
** first, NAME what its parent does with the closure ("" if anonymous).
*/
typedef void (*PerfVisit)(GCproto *child, const char *name, void *ud);

static void perf_walk(GCproto *pt, PerfVisit visit, void *ud)
{
  BCPos pc;
  if (!(pt->flags & PROTO_CHILD)) return;
  for (pc = 0; pc < pt->sizebc; pc++) {
    BCIns ins = proto_bc(pt)[pc];
    if (bc_op(ins) == BC_FNEW) {
      GCproto *child = gco2pt(proto_kgc(pt, ~(ptrdiff_t)bc_d(ins)));
      char buf[PERF_NAMESZ];
      PerfBuf b = { buf, 0, sizeof(buf) };
      buf[0] = '\0';
      if (!pb_fnewname(&b, pt, pc, child)) buf[0] = '\0';
      visit(child, buf, ud);
      perf_walk(child, visit, ud);
    }
  }
}

static void perf_childvisit(GCproto *child, const char *name, void *chunk)
{
  perf_proto(child, name, (PerfChunk *)chunk);
}

/* Describes the children of PT, named after what PT does with them. */
static void perf_children(GCproto *pt, PerfChunk *chunk)
{
  perf_walk(pt, perf_childvisit, chunk);
}

#if LJ_HASJIT  /* -- Traces (none without the JIT) -- */

static int perf_haspc(GCproto *pt, const BCIns *pc)
{
  return pc >= proto_bc(pt) && pc < proto_bc(pt) + pt->sizebc;
}

/* The line snapshot SNAP of trace T stands for in PT, the function T starts
** in, or -1. perf shows a trace as the frame of that function (those it
** inlined are not in the chain while it runs), so its lines are that
** function's: where the snapshot's PC lies in PT, its line; in a function
** PT called (inlined, or a C function), the line of the call: the return
** PC of the innermost frame returning to PT (with LJ_FR2 a Lua frame's
** link slot holds it as a constant). None below PT's frame (a side trace
** back in its parent's function): not PT's code.
*/
static BCLine perf_snapline(GCtrace *T, SnapShot *snap, GCproto *pt)
{
  SnapEntry *map = &T->snapmap[snap->mapofs];
  const BCIns *pc = snap_pc(&map[snap->nent]);
  MSize n;
  if (perf_haspc(pt, pc)) return lj_debug_line(pt, proto_bcpos(pt, pc));
  for (n = snap->nent; LJ_FR2 && n-- > 0; )
    if ((map[n] & SNAP_FRAME) && irref_isk(snap_ref(map[n])) &&
	T->ir[snap_ref(map[n])].o == IR_KNUM) {
      uint64_t link = ir_knum(&T->ir[snap_ref(map[n])])->u64;
      const BCIns *ret = (const BCIns *)(uintptr_t)link;
      if ((link & FRAME_TYPE) == FRAME_LUA && ret > proto_bc(pt) &&
	  perf_haspc(pt, ret))
	return lj_debug_line(pt, proto_bcpos(pt, ret) - 1);  /* The CALL. */
    }
  return -1;
}

#ifdef LJ_UNWIND_JIT  /* Snapshots know their machine code offset. */
#define PERF_NSNAP(T)		((T)->nsnap)
#define PERF_SNAPOFS(snap)	((snap)->mcofs)
#else  /* Older LuaJIT (e.g. Tarantool's): the start line only. */
#define PERF_NSNAP(T)		((T)->nsnap ? 1 : 0)
#define PERF_SNAPOFS(snap)	0
#endif

/* Inline stacks of trace T from its positions TP (lj_tracepos.c): ranges
** of machine code with the node of their innermost frame, the nodes they
** use (callers before callees), and each range's innermost line in PL.
** Chunk names live in FILES (one per function, freed by the caller). 0:
** none (not tracked since the trace's start, or no memory).
*/
#define PERF_INL_NFILE	8	/* Chunk names kept on the stack per trace. */

/* A chunk name beyond the first PERF_INL_NFILE of a trace (malloc). */
typedef struct PerfFile {
  struct PerfFile *next; GCstr *cs; char s[PERF_NAMESZ];
} PerfFile;

typedef struct PerfInl {
  LJPInlNode *node; size_t nnode;	/* node, range, map: one block */
  LJPInlRange *range; size_t nrange;
  uint32_t *map;		/* Position node -> node + 1 written, or 0. */
  uint32_t traceno, root, link, linknode;	/* See LJPInline. */
  PerfFile *more;			/* Chunk names beyond files[]. */
  const PerfChunk *chunk;	/* The root function's chunk name. */
  GCstr *fcs[PERF_INL_NFILE]; size_t nfile;	/* Chunk names seen... */
  char files[PERF_INL_NFILE][PERF_NAMESZ];	/* ...and their file names */
  uint64_t stk[256];	/* The block when it fits (most traces), else malloc. */
} PerfInl;  /* Cleared up to files. */

static void perf_inl_free(PerfInl *pi)
{
  while (pi->more) {
    PerfFile *f = pi->more;
    pi->more = f->next;
    free(f);
  }
  if ((void *)pi->node != (void *)pi->stk) free(pi->node);
}

/* The chunk name of PT, kept in PI once per chunk (NULL: no memory). A
** library function's chunk name is "builtin": not shared with its chunk's. */
static const char *perf_inl_file(PerfInl *pi, GCproto *pt)
{
  GCstr *cs = perf_isbuiltin(pt) ? NULL : proto_chunkname(pt);
  PerfBuf b = { NULL, 0, PERF_NAMESZ };
  PerfFile *f;
  size_t i;
  if (pi->chunk->cs == proto_chunkname(pt) &&
      pi->chunk->builtin == perf_isbuiltin(pt))
    return pi->chunk->s;
  for (i = pi->nfile; i-- > 0; )
    if (pi->fcs[i] == cs) return pi->files[i];
  for (f = pi->more; f; f = f->next)
    if (f->cs == cs) return f->s;
  if (pi->nfile < PERF_INL_NFILE) {
    pi->fcs[pi->nfile] = cs;
    b.p = pi->files[pi->nfile++];
  } else {
    if (!(f = (PerfFile *)malloc(sizeof(PerfFile)))) return NULL;
    f->cs = cs; f->next = pi->more; pi->more = f;
    b.p = f->s;
  }
  b.p[0] = '\0';
  pb_chunk(&b, pt);
  return b.p;
}

static int perf_inline(GCtrace *T, TracePos *tp, PerfInl *pi, PerfLines *pl,
		       const char *rootfile, BCLine rootline)
{
  MCode *mc = T->mcode, *end = T->mcode + T->szmcode;
  uint32_t i, k;
  int32_t head, tail, last;
  if (!tp || !tp->valid || !tp->nnode || !tp->nmark ||  /* Not this trace's? */
      (tp->ncode && (tp->code[tp->ncode-1].mcp < mc || tp->code[0].mcp >= end)))
    return 0;
  {  /* One block: 8-byte aligned arrays first. */
    size_t nn = tp->nnode, nc = (size_t)tp->ncode + 1;
    size_t sz = nn*sizeof(LJPInlNode) + nc*sizeof(LJPInlRange) +
		nn*sizeof(uint32_t);
    char *blk = sz <= sizeof(pi->stk) ? (char *)pi->stk : (char *)malloc(sz);
    if (!blk) return 0;
    pi->node = (LJPInlNode *)blk;
    pi->range = (LJPInlRange *)(blk + nn*sizeof(LJPInlNode));
    pi->map = (uint32_t *)(pi->range + nc);
    memset(pi->map, 0, nn*sizeof(uint32_t));
  }
  /* The first instruction's node and the last's (where the trace links). */
  head = (int32_t)tp->mark[0].node;
  tail = (int32_t)tp->mark[tp->nmark-1].node;
  for (i = tp->ncode + 2; i-- > 0; ) {
    int32_t n = i < tp->ncode ? tp->code[i].node : i == tp->ncode ? head : tail;
    for (; n >= 0 && !pi->map[n]; n = (int32_t)tp->node[n].parent - 1)
      pi->map[n] = 1;  /* Used: it and its callers. */
  }
  for (k = 0; k < tp->nnode; k++)  /* In creation order: callers first. */
    if (pi->map[k]) {
      TPNode *nd = &tp->node[k];
      pi->node[pi->nnode].pc = (uint64_t)(uintptr_t)nd->pc;
      pi->node[pi->nnode].parent = nd->parent ? pi->map[nd->parent-1] : 0;
      pi->node[pi->nnode].pad = 0;
      pi->map[k] = (uint32_t)++pi->nnode;
    }
  /* The head (entry, a side trace's parent state, below the first
  ** instruction's code) and then each instruction's code; a range for
  ** each change of node. */
  last = -2;
  for (i = tp->ncode + 1; i-- > 0; ) {  /* Ascending addresses. */
    int32_t n;
    MCode *at;
    if (i < tp->ncode) {
      n = tp->code[i].node;
      at = tp->code[i].mcp;
    } else {
      if (tp->ncode && tp->code[i-1].mcp == mc) continue;  /* No head. */
      n = head;
      at = mc;
    }
    if (n == last) continue;  /* Written nodes are one per node: no change. */
    last = n;
    pi->range[pi->nrange].off = (uint32_t)(at - mc);  /* szmcode is 32 bits */
    pi->range[pi->nrange++].node = n >= 0 ? pi->map[n] : 0;
    if (n >= 0) {
      TPNode *nd = &tp->node[n];
      const char *file = perf_inl_file(pi, nd->pt);
      BCLine line = lj_debug_line(nd->pt, proto_bcpos(nd->pt, nd->pc) - 1);
      if (!file || !perf_lines_add(pl, (uint64_t)(uintptr_t)at, (uint32_t)line, file))
	return 0;
    } else if (!perf_lines_add(pl, (uint64_t)(uintptr_t)at, (uint32_t)rootline,
			       rootfile)) {
      return 0;
    }
  }
  pi->traceno = T->traceno;
  pi->root = T->root ? T->root : T->traceno;
  if (T->linktype == LJ_TRLINK_ROOT && T->link && tail >= 0) {
    pi->link = T->link;
    pi->linknode = pi->map[tail];
  }
  return 1;
}

static void perf_trace(GCtrace *T, TracePos *tp, PerfChunk *chunk)
{
  GCproto *pt = gco2pt(gcref(T->startpt));
  char nbuf[PERF_NAMESZ];
  PerfBuf nb = { nbuf, 0, sizeof(nbuf) };
  LJPLine lstack[PERF_LINES_STACK];
  PerfLines pl;
  PerfInl pi;
  LJPInline inl;
  int ok = 1, hasinl;
  SnapNo i;
  uint64_t mc = (uint64_t)(uintptr_t)T->mcode;
  const BCIns *startpc = mref(T->startpc, const BCIns);
  BCLine startline = lj_debug_line(pt, proto_bcpos(pt, startpc));
  const char *fbuf = perf_chunkof(chunk, pt);
  PERF_LINES_INIT(pl, lstack);
  nbuf[0] = '\0';
  memset(&pi, 0, offsetof(PerfInl, files));
  pi.chunk = chunk;  /* fbuf's */
  pb_raw(&nb, "TRACE_");
  pb_int(&nb, (long)T->traceno);
  pb_raw(&nb, "::");
  pb_raw(&nb, fbuf);
  pb_raw(&nb, ":");
  pb_int(&nb, (long)startline);
  pb_raw(&nb, "::");
  pb_raw(&nb, perf_tracelabel(pt, fbuf));
  hasinl = perf_inline(T, tp, &pi, &pl, fbuf, startline);
  if (!hasinl) {  /* Lines of the root function from snapshots. */
    pl.n = 0;
    for (i = 0; ok && i < PERF_NSNAP(T); i++) {
      SnapShot *snap = &T->snap[i];
      BCLine line = perf_snapline(T, snap, pt);
      if (line >= 0)
	ok = perf_lines_add(&pl, mc + (i ? PERF_SNAPOFS(snap) : 0),
			    (uint32_t)line, fbuf);
    }
  }
  if (!ok) { pl.n = 0; ljp_emit_drop(LJP_DROP_LINES); }
  inl.node = pi.node; inl.nnode = pi.nnode;
  inl.range = pi.range; inl.nrange = pi.nrange;
  inl.traceno = pi.traceno; inl.root = pi.root;
  inl.link = pi.link; inl.linknode = pi.linknode;
  ljp_emit_trace(mc, T->szmcode, nbuf, pl.v, pl.n, hasinl ? &inl : NULL);
  perf_inl_free(&pi);
  PERF_LINES_FREE(pl);
}

/* Exit stub groups: code asm_exitstub_gen puts at the bottom of the mcode
** area (a push per exit, one more push, a jmp rel32 to the exit handler).
** Each group is described once per address (J->perfstubs); ALL: again.
*/
static void perf_stubs(jit_State *J, int all)
{
#ifdef EXITSTUBS_PER_GROUP  /* x86/x64: pushes, a push, [mov], jmp rel32. */
#define PERF_STUBGROUP_SIZE \
  (EXITSTUB_SPACING*EXITSTUBS_PER_GROUP + 2 + (LJ_GC64 ? 0 : 8) + 5)
  int i;
  if (!all && !memcmp(J->exitstubgroup, J->perfstubs, sizeof(J->perfstubs)))
    return;  /* No new group (the usual case after a trace). */
  for (i = 0; i < LJ_MAX_EXITSTUBGR; i++) {
    MCode *p = J->exitstubgroup[i];
    if (p && (all || p != J->perfstubs[i])) {
      J->perfstubs[i] = p;
      ljp_emit_load((uint64_t)(uintptr_t)p, PERF_STUBGROUP_SIZE,
		    "lj_vm_exit_stubs", NULL, NULL, 0);
    }
  }
#else
  UNUSED(J); UNUSED(all);
#endif
}

#endif

static int perf_ptreq(const void *p, const void *key) { return p == key; }

/* Walks of g->gc.root see only live objects: between two steps of a GC
** sweep, the unswept dead ones may point at objects already freed.
*/
#define perf_live(g, o)	(!isdead((g), (o)))

/* Adds P to the pointer set PS. 0, or -1 without memory. */
static int perf_ptradd(LJPSet *ps, void *p)
{
  uint64_t h = ljp_hash_ptr(p);
  LJPSlot *slot;
  if (ljp_set_reserve(ps) < 0) return -1;
  slot = ljp_set_slot(ps, h, perf_ptreq, p);
  if (!slot->h) ljp_set_fill(ps, slot, h, p);
  return 0;
}

/* -- Names of prototypes whose parent is gone ------------------------------ */

/* A started VM names such a prototype from where the heap keeps a closure of
** it, as its parent's bytecode would have: a local function by the upvalue
** name its callers capture it under (fib), a field of a table by the
** table's upvalue or global name and the key path (M.handle, M:method,
** Class.new), a global by its key; failing those, a field of a loaded
** module by the module's name (app.handle). The lowest rank wins, then the
** smaller name. Each table is walked once per level, under the best name
** it was reached by. Runs only at a start.
*/
enum { PERF_HN_UPVAL = 0, PERF_HN_GLOBAL = 4, PERF_HN_MODULE = 8 };  /* Ranks. */
#define PERF_HN_DEPTH	2	/* Key levels below a named table. */

typedef struct PerfHeapName {
  const void *obj;	/* GCproto named, or GCtab to walk. */
  int rank;
  char name[];
} PerfHeapName;

static int perf_hneq(const void *p, const void *key)
{
  return ((const PerfHeapName *)p)->obj == key;
}

/* Offers NAME (rank RANK) for OBJ in set S: kept if better than before. */
static void perf_hnoffer(LJPSet *s, const void *obj, const char *name, int rank)
{
  uint64_t h = ljp_hash_ptr(obj);
  size_t len = strlen(name) + 1;
  LJPSlot *slot;
  PerfHeapName *e;
  if (!*name || ljp_set_reserve(s) < 0) return;
  slot = ljp_set_slot(s, h, perf_hneq, obj);
  if (slot->h) {
    PerfHeapName *o = (PerfHeapName *)slot->p;
    if (o->rank < rank || (o->rank == rank && strcmp(o->name, name) <= 0))
      return;
  }
  e = (PerfHeapName *)malloc(sizeof(PerfHeapName) + len);
  if (!e) return;
  e->obj = obj; e->rank = rank;
  memcpy(e->name, name, len);
  if (slot->h) { free(slot->p); slot->p = e; }
  else ljp_set_fill(s, slot, h, e);
}

/* Empties S and frees its entries. */
static void perf_hnfree(LJPSet *s)
{
  size_t i;
  for (i = 0; s->v && i <= s->mask; i++)
    if (s->v[i].h) free(s->v[i].p);
  ljp_set_free(s);
}

/* Offers V, known as NAME: a Lua function's prototype to PROTOS (unless
** its parent names it), a table to TABS, to walk.
*/
static void perf_hnvalue(LJPSet *protos, LJPSet *tabs, LJPSet *haveparent,
			 cTValue *v, const char *name, int rank)
{
  if (tvisfunc(v) && isluafunc(funcV(v))) {
    GCproto *pt = funcproto(funcV(v));
    if (!ljp_set_find(haveparent, ljp_hash_ptr(pt), perf_ptreq, pt))
      perf_hnoffer(protos, pt, name, rank);
  } else if (tvistab(v) && tabs) {
    perf_hnoffer(tabs, tabV(v), name, rank);
  }
}

/* Offers the string-keyed values of T, each named PREFIX.KEY (PREFIX:KEY
** for a method; KEY alone without PREFIX), one rank worse than RANK.
*/
static void perf_hnfields(LJPSet *protos, LJPSet *tabs, LJPSet *haveparent,
			  GCtab *t, const char *prefix, int rank)
{
  Node *node = noderef(t->node);
  uint32_t i;
  for (i = 0; i <= t->hmask; i++) {
    cTValue *k = &node[i].key, *v = &node[i].val;
    if (tvisstr(k) && (tvisfunc(v) || tvistab(v))) {
      char buf[PERF_NAMESZ];
      PerfBuf b = { buf, 0, sizeof(buf) };
      buf[0] = '\0';
      if (prefix) {
	int self = tvisfunc(v) && isluafunc(funcV(v)) &&
		   perf_isself(funcproto(funcV(v)));
	pb_raw(&b, prefix);
	pb_raw(&b, self ? ":" : ".");
      }
      pb_str(&b, strdata(strV(k)));
      perf_hnvalue(protos, tabs, haveparent, v, buf, rank + (prefix != NULL));
    }
  }
}

/* The string-keyed value of T named KEY (no string is made), or NULL. */
static cTValue *perf_hnfield(GCtab *t, const char *key)
{
  Node *node = noderef(t->node);
  uint32_t i;
  for (i = 0; i <= t->hmask; i++)
    if (tvisstr(&node[i].key) && !strcmp(strdata(strV(&node[i].key)), key))
      return &node[i].val;
  return NULL;
}

/* Gives every prototype without parent and without a name the best name
** the heap offers (perf_names_put, as if its parent had named it).
*/
static void perf_heapnames(global_State *g, LJPSet *haveparent)
{
  LJPSet protos = { NULL, 0, 0 }, tabs = { NULL, 0, 0 };
  GCtab *env = tabref(mainthread(g)->env);
  cTValue *loaded = tvistab(&g->registrytv) ?
		    perf_hnfield(tabV(&g->registrytv), "_LOADED") : NULL;
  GCobj *o;
  size_t i;
  int depth;
  for (o = gcref(g->gc.root); o != NULL; o = gcref(o->gch.nextgc))
    if (o->gch.gct == ~LJ_TFUNC && isluafunc(&o->fn) && perf_live(g, o)) {
      uint32_t u;
      for (u = 0; u < o->fn.l.nupvalues; u++)
	perf_hnvalue(&protos, &tabs, haveparent,
		     uvval(&gcref(o->fn.l.uvptr[u])->uv),
		     lj_debug_uvname(funcproto(&o->fn), u), PERF_HN_UPVAL);
    }
  if (env) perf_hnfields(&protos, &tabs, haveparent, env, NULL, PERF_HN_GLOBAL);
  if (loaded && tvistab(loaded)) {  /* package.loaded: modules by name. */
    GCtab *t = tabV(loaded);
    Node *node = noderef(t->node);
    for (i = 0; i <= t->hmask; i++)
      if (tvisstr(&node[i].key) && tvistab(&node[i].val))
	perf_hnoffer(&tabs, tabV(&node[i].val), strdata(strV(&node[i].key)),
		     PERF_HN_MODULE);
  }
  for (depth = 1; depth <= PERF_HN_DEPTH; depth++) {  /* One level a round. */
    LJPSet next = { NULL, 0, 0 };
    for (i = 0; tabs.v && i <= tabs.mask; i++)
      if (tabs.v[i].h) {
	PerfHeapName *e = (PerfHeapName *)tabs.v[i].p;
	perf_hnfields(&protos, depth < PERF_HN_DEPTH ? &next : NULL,
		      haveparent, (GCtab *)e->obj, e->name, e->rank);
      }
    perf_hnfree(&tabs);
    tabs = next;
  }
  perf_hnfree(&tabs);
  for (i = 0; protos.v && i <= protos.mask; i++)
    if (protos.v[i].h) {
      PerfHeapName *e = (PerfHeapName *)protos.v[i].p;
      char old[PERF_NAMESZ];
      perf_names_get((GCproto *)e->obj, old, sizeof(old));
      if (!old[0]) perf_names_put((GCproto *)e->obj, e->name);
    }
  perf_hnfree(&protos);
}

/* -- Names from the source ------------------------------------------------ */

/* A prototype whose defining chunk is gone gets the name that chunk gave it
** when it was loaded, if the chunk is a file that still holds the same
** code: the file is loaded again into a scratch lua_State (nothing of it
** runs) and its functions are named as at load time (perf_children). A
** prototype matches one of the reloaded ones by where it is (first line,
** lines) and what it is (parameters, every opcode). Only at a run-time
** start; a file that changed or went gives no name (the heap may).
*/
static __thread int perf_scratch;	/* lj_perf_init: a scratch state. */

/* An opcode as loaded: the VM rewrites some in place as it runs (hot
** loops and functions get their J or I variant, a pairs loop that is not
** over next() is despecialised).
*/
static BCOp perf_loadedop(BCOp op)
{
  switch (op) {
  case BC_JFORI: return BC_FORI;
  case BC_IFORL: case BC_JFORL: return BC_FORL;
  case BC_IITERL: case BC_JITERL: return BC_ITERL;
  case BC_ILOOP: case BC_JLOOP: return BC_LOOP;
  case BC_IFUNCF: case BC_JFUNCF: return BC_FUNCF;
  case BC_IFUNCV: case BC_JFUNCV: return BC_FUNCV;
  case BC_ITERC: return BC_ITERN;
  case BC_JMP: return BC_ISNEXT;
  default: return op;
  }
}

static int perf_sameproto(GCproto *a, GCproto *b)
{
  MSize i;
  if (a->firstline != b->firstline || a->numline != b->numline ||
      a->sizebc != b->sizebc || a->numparams != b->numparams)
    return 0;
  for (i = 0; i < a->sizebc; i++)
    if (perf_loadedop(bc_op(proto_bc(a)[i])) !=
	perf_loadedop(bc_op(proto_bc(b)[i])))
      return 0;
  return 1;
}

/* The prototypes still to name, matched against a reloaded chunk. */
typedef struct PerfOrphans { GCproto **v; size_t n; } PerfOrphans;

/* Names each orphan (cleared when named) that matches CHILD, a function of
** the reloaded chunk, by the name its parent gives it.
*/
static void perf_srcvisit(GCproto *child, const char *name, void *ud)
{
  PerfOrphans *o = (PerfOrphans *)ud;
  size_t i;
  if (!name[0]) return;
  for (i = 0; i < o->n; i++)
    if (o->v[i] && perf_sameproto(o->v[i], child)) {
      perf_names_put(o->v[i], name);
      o->v[i] = NULL;
    }
}

static void perf_srcload(const char *path, GCproto **orph, size_t n)
{
  lua_State *S;
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
    return;  /* Not a FIFO or a device: reading it could wait, or take. */
  perf_scratch = 1;
  S = luaL_newstate();
  perf_scratch = 0;
  if (!S) return;
  if (luaL_loadfile(S, path) == 0 && tvisfunc(S->top - 1) &&
      isluafunc(funcV(S->top - 1))) {
    PerfOrphans o = { orph, n };
    perf_walk(funcproto(funcV(S->top - 1)), perf_srcvisit, &o);
  }
  lua_close(S);
}

/* Names the prototypes of G without parent and without name whose chunk
** is a file (@PATH), one reload per file.
*/
static void perf_srcnames(global_State *g, LJPSet *haveparent)
{
  GCproto **v = NULL;
  size_t n = 0, cap = 0, i, j;
  GCobj *o;
  for (o = gcref(g->gc.root); o != NULL; o = gcref(o->gch.nextgc))
    if (o->gch.gct == ~LJ_TPROTO && perf_live(g, o) &&
	gco2pt(o)->firstline > 0 && strdata(proto_chunkname(gco2pt(o)))[0] == '@' &&
	!ljp_set_find(haveparent, ljp_hash_ptr(o), perf_ptreq, o)) {
      char old[PERF_NAMESZ];
      perf_names_get(gco2pt(o), old, sizeof(old));
      if (old[0]) continue;
      if (n == cap) {
	GCproto **nv = (GCproto **)realloc(v, (cap = cap ? 2*cap : 64) *
						sizeof(GCproto *));
	if (!nv) break;
	v = nv;
      }
      v[n++] = gco2pt(o);
    }
  for (i = 0; i < n; i++) {  /* Those of one chunk to the front, reloaded. */
    GCstr *chunk = proto_chunkname(v[i]);
    size_t m = 0;
    for (j = i; j < n; j++)
      if (proto_chunkname(v[j]) == chunk) {
	GCproto *t = v[i+m]; v[i+m] = v[j]; v[j] = t;
	m++;
      }
    perf_srcload(strdata(chunk) + 1, v + i, m);
    i += m - 1;
  }
  free(v);
}

/* Describes every live prototype and trace of G (start, fork) in one
** batch. Prototypes with a parent are described (and named) from it; one
** whose parent is gone (a module's main chunk runs once and is collected)
** keeps the name it got when it was first described (names table: in a
** fork child, the parent's), or else gets one from the heap
** (perf_heapnames).
*/
static size_t perf_all(global_State *g)
{
  GCobj *o;
  size_t n = 0;
  LJPSet haveparent = { NULL, 0, 0 };
  PerfChunk chunk;
  int ok = 1;
  chunk.cs = NULL; chunk.builtin = 0;
  ljp_emit_batch_begin();
  for (o = gcref(g->gc.root); ok && o != NULL; o = gcref(o->gch.nextgc))
    if (o->gch.gct == ~LJ_TPROTO && (gco2pt(o)->flags & PROTO_CHILD) &&
	perf_live(g, o)) {
      GCproto *pt = gco2pt(o);
      BCPos pc;
      for (pc = 0; ok && pc < pt->sizebc; pc++)
	if (bc_op(proto_bc(pt)[pc]) == BC_FNEW)
	  ok = perf_ptradd(&haveparent,
		 proto_kgc(pt, ~(ptrdiff_t)bc_d(proto_bc(pt)[pc]))) == 0;
    }
  if (!ok) {  /* Then every prototype is a root, described without name. */
    ljp_set_free(&haveparent);
    ljp_emit_drop(LJP_DROP_PARENT);
  } else {
    perf_srcnames(g, &haveparent);
    perf_heapnames(g, &haveparent);
  }
  for (o = gcref(g->gc.root); o != NULL; o = gcref(o->gch.nextgc))
    if (o->gch.gct == ~LJ_TPROTO && perf_live(g, o)) {
      n++;
      if (!ljp_set_find(&haveparent, ljp_hash_ptr(o), perf_ptreq, o)) {
	char name[PERF_NAMESZ];
	perf_names_get(gco2pt(o), name, sizeof(name));
	perf_proto(gco2pt(o), name, &chunk);
	perf_children(gco2pt(o), &chunk);
      }
    }
  ljp_set_free(&haveparent);
#if LJ_HASJIT
  for (o = gcref(g->gc.root); o != NULL; o = gcref(o->gch.nextgc))
    if (o->gch.gct == ~LJ_TTRACE && gco2trace(o)->mcode && perf_live(g, o))
      perf_trace(gco2trace(o), NULL, &chunk);
  perf_stubs(G2J(g), 1);
#endif
  ljp_emit_batch_end();
  return n;
}

/* Starts a batch of descriptions: handles a fork (describe everything for
** the child's new files). Returns 0 if nothing is open any more.
*/
static int perf_begin(global_State *g)
{
  int fresh = 0;
  if (!ljp_emit_begin(&fresh)) return 0;
  if (fresh) perf_all(g);
  return 1;
}

void lj_perf_chunk(lua_State *L, GCproto *pt)
{
  global_State *g = G(L);
  if (!(g->perfmask & PERF_EMIT) || !perf_begin(g)) return;
  ljp_emit_batch_begin();
  if ((g->perfmask & PERF_RESCAN)) {  /* Library functions, then PT. */
    g->perfmask &= ~PERF_RESCAN;
    perf_all(g);
  } else {
    PerfChunk chunk;
    chunk.cs = NULL; chunk.builtin = 0;
    perf_proto(pt, NULL, &chunk);
    perf_children(pt, &chunk);
  }
  ljp_emit_batch_end();  /* Written before the chunk runs. */
}

#if LJ_HASJIT
void lj_perf_trace(jit_State *J, GCtrace *T)
{
  global_State *g = J2G(J);
  PerfChunk chunk;
  if (!(g->perfmask & PERF_EMIT) || !perf_begin(g)) return;
  chunk.cs = NULL; chunk.builtin = 0;
  perf_stubs(J, 0);  /* The trace's exits may have made new groups. */
  perf_trace(T, J->tracepos, &chunk);
}
#endif

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
static unsigned perf_start(lua_State *L, unsigned mask, uint64_t memrate)
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
      if (perf_all(g) == 0) g->perfmask |= PERF_RESCAN;
    }
  }
  if ((mask & LUAJIT_PERF_FRAMES)) {
    if (lj_fprec_start(L)) g->perfmask |= LUAJIT_PERF_FRAMES;
    else failed |= LUAJIT_PERF_FRAMES;
  }
  if ((mask & LUAJIT_PERF_MEM) && !lj_perfmem_start(g, memrate))
    failed |= LUAJIT_PERF_MEM;
  return failed;
}

static void perf_stop(lua_State *L, unsigned mask)
{
  global_State *g = G(L);
  if ((mask & LUAJIT_PERF_FRAMES)) lj_fprec_stop(L);
  if ((mask & LUAJIT_PERF_MEM)) lj_perfmem_stop(g, 0);
  g->perfmask &= ~mask;
  if (!(g->perfmask & PERF_EMIT)) g->perfmask &= ~PERF_RESCAN;
  if (!(g->perfmask & LUAJIT_PERF_JITDUMP)) lj_tracepos_switch(g, 0);
}

static unsigned perf_status(global_State *g)
{
  unsigned mask = g->perfmask & PERF_EMIT;
  int fresh = 0;
  unsigned open = mask ? ljp_emit_begin(&fresh) : 0;
  if (fresh) perf_all(g);
  if (!(open & LJP_MAP)) mask &= ~LUAJIT_PERF_MAP;
  if (!(open & LJP_JITDUMP)) mask &= ~LUAJIT_PERF_JITDUMP;
  if (g->fprec_on) mask |= LUAJIT_PERF_FRAMES;
  if (lj_perfmem_on(g)) mask |= LUAJIT_PERF_MEM;
  if ((g->perfremote & mask)) mask |= LUAJIT_PERF_REMOTE;
  return mask;
}

static void perf_register(global_State *g);
static void perf_unregister(global_State *g);

void lj_perf_init(lua_State *L)
{
  unsigned mask;
  char bad[48];
  const char *env = getenv("LUAJIT_PERF");
  const char *remote = getenv("LUAJIT_PERF_REMOTE");
  if (perf_scratch) {  /* perf_srcload's state: nothing of perf, and its */
    G(L)->perfremote = PERF_REMOTE_REFUSE;  /* GC steps must not switch. */
    return;
  }
  if (remote && !strcmp(remote, "0"))
    G(L)->perfremote = PERF_REMOTE_REFUSE;
  else
    perf_register(G(L));
  if (perf_parse(env, &mask, bad, sizeof(bad)) < 0) {
    fprintf(stderr, "ljperf: LUAJIT_PERF: unknown part '%s' (use "
		    PERF_VALUES ")\n", bad);
    return;
  }
  if (mask && (mask = perf_start(L, mask, 0)) != 0 &&
      (mask & (LUAJIT_PERF_FRAMES|LUAJIT_PERF_MEM))) {
    char buf[32];
    fprintf(stderr, "ljperf: LUAJIT_PERF: could not start:%s\n",
	    perf_partnames(mask & (LUAJIT_PERF_FRAMES|LUAJIT_PERF_MEM), buf));
  }
}

void lj_perf_close(global_State *g)
{
  perf_unregister(g);
  if ((g->perfremote & PERF_REMOTE_ON))
    __atomic_sub_fetch(&lj_perf_ctl.nremote, 1, __ATOMIC_SEQ_CST);
  g->perfremote = 0;
  g->perfmask = 0;
  lj_tracepos_switch(g, 0);
  lj_perfmem_stop(g, 1);  /* Before lua_close frees through g->allocf. */
}

/* -- Remote switch (ljperf record -p) ------------------------------------- */

/* The process's control block (lj_perf.h, docs/remote.md). Initialised, so
** it sits in the .data of the file that holds the VM, where ljperf finds it
** by its magic; a fork child has its own copy.
*/
LJ_ASMF void lj_vm_perfkick(void);
#if LJ_HASJIT
LJ_ASMF void lj_vm_perfinject(void);
#endif

LJ_DATADEF volatile LJPerfCtl lj_perf_ctl __attribute__((used, aligned(64))) =
{
  LJPERF_CTL_MAGIC, LJPERF_CTL_VERSION, sizeof(LJPerfCtl), 0, 0, 0, 0, 0, 0, 0,
  0, 0, NULL, (void *)lj_vm_perfkick,
#if LJ_HASJIT
  (void *)lj_vm_perfinject,
#else
  NULL,
#endif
  offsetof(global_State, perfnext), GG_G2DISP, GG_LEN_SDISP,
#if LJ_HASJIT
  GG_G2J + offsetof(jit_State, mcarea),
  GG_G2J + offsetof(jit_State, exitstubgroup), LJ_MAX_EXITSTUBGR,
  EXITSTUB_SPACING, EXITSTUBS_PER_GROUP,
#else
  0, 0, 0, 0, 0,
#endif
  offsetof(global_State, vmstate), 0
};

/* While switched on remotely, perfseen = seq ^ PERF_POLLALL: every poll
** takes the slow path and checks the lease.
*/
#define PERF_POLLALL	0x80000000u

static int64_t perf_now(void)
{
  struct timespec ts;
  /* COARSE: a vDSO read, no syscall; a tick (<= 4 ms) late at most. */
  if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
    return INT64_MAX;  /* No clock: the lease counts as lapsed. */
  return (int64_t)ts.tv_sec*1000000000 + ts.tv_nsec;
}

/* A remote request is live: parts wanted, for this process (a fork child
** has a copy of its parent's block: not for it), lease not lapsed.
*/
static unsigned perf_remote_want(void)
{
  unsigned want = lj_perf_ctl.want & PERF_PARTS;
  if (want && lj_perf_ctl.target == (uint32_t)getpid() &&
      perf_now() < lj_perf_ctl.deadline)
    return want;
  return 0;
}

/* Slow path of lj_perf_poll. Starts the parts a live request wants that are
** not on yet (those already on stay as they are, and stay on after), or
** stops the ones it started when the request ended or lapsed. Called at a
** safe point; never while a trace is being recorded (then: next poll).
*/
void LJ_FASTCALL lj_perf_remote(lua_State *L)
{
  global_State *g = G(L);
  uint32_t seq = lj_perf_ctl.seq;
  unsigned want;
  if ((g->perfremote & PERF_REMOTE_REFUSE)) {  /* LUAJIT_PERF_REMOTE=0 */
    g->perfseen = seq;
    return;
  }
#if LJ_HASJIT
  if (G2J(g)->state != LJ_TRACE_IDLE) return;
#endif
  __atomic_thread_fence(__ATOMIC_ACQUIRE);  /* seq before the request. */
  want = perf_remote_want();
  if (want && !(g->perfremote & PERF_REMOTE_ON)) {
    unsigned parts = want & ~perf_status(g);
    unsigned failed = parts ? perf_start(L, parts, lj_perf_ctl.mem_rate) : 0;
    g->perfremote = (uint8_t)((parts & ~failed) | PERF_REMOTE_ON);
    if ((g->perfremote & LUAJIT_PERF_FRAMES))
      lj_fprec_fixrbp(L);  /* The interpreter's rbp, saved by our caller. */
    if (failed) {
      char buf[32];
      fprintf(stderr, "ljperf: remote start: could not start:%s\n",
	      perf_partnames(failed, buf));
    }
    __atomic_add_fetch(&lj_perf_ctl.nremote, 1, __ATOMIC_SEQ_CST);
  } else if (!want && (g->perfremote & PERF_REMOTE_ON)) {
    perf_stop(L, g->perfremote & PERF_PARTS);
    g->perfremote = 0;
    __atomic_sub_fetch(&lj_perf_ctl.nremote, 1, __ATOMIC_SEQ_CST);
  }
  if ((g->perfremote & LUAJIT_PERF_MEM)) lj_perfmem_poll(g);
  lj_perf_ctl.ack = seq;
  g->perfseen = (g->perfremote & PERF_REMOTE_ON) ? seq ^ PERF_POLLALL : seq;
}

/* The states the kick may reach (lj_perf_ctl.states): each state that
** accepts the switch, from the end of lua_newstate to the start of lua_close.
** ljperf reads the list only while every thread is stopped and LOCK is 0.
*/
static void perf_lock(void)
{
  while (__atomic_exchange_n(&lj_perf_ctl.lock, 1, __ATOMIC_ACQUIRE))
    sched_yield();
}

static void perf_unlock(void)
{
  __atomic_store_n(&lj_perf_ctl.lock, 0, __ATOMIC_RELEASE);
}

static void perf_register(global_State *g)
{
  perf_lock();
  g->perfnext = lj_perf_ctl.states;
  lj_perf_ctl.states = g;
  lj_perf_ctl.nstates++;
  perf_unlock();
}

static void perf_unregister(global_State *g)
{
  global_State *volatile *pp;
  perf_lock();
  for (pp = &lj_perf_ctl.states; *pp; pp = &(*pp)->perfnext)
    if (*pp == g) {
      *pp = g->perfnext;
      lj_perf_ctl.nstates--;
      break;
    }
  perf_unlock();
}

/* ->vm_perfkick, the instruction dispatch ljperf gave a state that reached
** no poll: the entries go back to what the dispatch mode says (the mode did
** not change, the entries did), then the state polls, with the current PC
** in its C frame for the top frame record (the previous one after: a line
** hook compares with it). The VM dispatches the instruction again.
*/
#define PERF_DISPMODE_INS	0x04	/* DISPMODE_INS, private to lj_dispatch.c */

void LJ_FASTCALL lj_perf_kick(lua_State *L, const BCIns *pc)
{
  global_State *g = G(L);
  void *cf = cframe_raw(L->cframe);
  const BCIns *oldpc = cframe_pc(cf);
  g->dispatchmode ^= PERF_DISPMODE_INS;
  lj_fprec_update(g);
  setcframe_pc(cf, pc);
  lj_perf_poll(L);
  setcframe_pc(cf, oldpc);
}

#if LJ_HASJIT
/* The kick's way into a thread that runs trace code of G: ljperf, with the
** thread stopped between two instructions of a trace, made it call
** lj_vm_perfinject, which saves every register the trace may use, calls
** this with *RBP the trace's rbp, and resumes the trace with what *RBP is
** then. Polls as a GC step of the trace would (lj_gc_step_jit), nothing
** more; the trace's own rbp becomes L's top frame record if that switched
** recording on. Nothing here allocates GC objects. At a trace's entry, or
** while a trace is recorded, there is nothing to do: the poll comes later.
*/
__attribute__((used, noinline))
void lj_perf_inject(global_State *g, void **rbp)
{
  lua_State *L = gco2th(gcref(g->cur_L));
  TValue *base = L->base, *top = L->top;
  int on = g->fprec_on;
  if (g->vmstate < 0 || G2J(g)->state != LJ_TRACE_IDLE || !tvref(g->jit_base))
    return;
  L->base = tvref(g->jit_base);
  L->top = curr_topL(L);
  lj_perf_poll(L);
  if (!on && g->fprec_on) {
    void *rec = lj_fprec_top(L);
    if (rec) *rbp = rec;
  }
  L->base = base;
  L->top = top;
}

/* Entered with [rsp] = where the trace was, [rsp+8] = its global_State,
** the trace's rsp 144 bytes above (the red zone skipped). Returns there
** with every register as it was but rbp.
*/
__asm__(
  ".text\n"
  ".p2align 4\n"
  ".globl lj_vm_perfinject\n"
  ".hidden lj_vm_perfinject\n"
  ".type lj_vm_perfinject, @function\n"
  "lj_vm_perfinject:\n"
  "  pushfq\n"
  "  push %rax\n push %rcx\n push %rdx\n push %rsi\n push %rdi\n"
  "  push %r8\n push %r9\n push %r10\n push %r11\n"
  "  push %rbp\n"
  "  mov %rsp, %rbp\n"
  "  and $-16, %rsp\n"
  "  sub $256, %rsp\n"
  "  movdqu %xmm0, 0(%rsp)\n movdqu %xmm1, 16(%rsp)\n"
  "  movdqu %xmm2, 32(%rsp)\n movdqu %xmm3, 48(%rsp)\n"
  "  movdqu %xmm4, 64(%rsp)\n movdqu %xmm5, 80(%rsp)\n"
  "  movdqu %xmm6, 96(%rsp)\n movdqu %xmm7, 112(%rsp)\n"
  "  movdqu %xmm8, 128(%rsp)\n movdqu %xmm9, 144(%rsp)\n"
  "  movdqu %xmm10, 160(%rsp)\n movdqu %xmm11, 176(%rsp)\n"
  "  movdqu %xmm12, 192(%rsp)\n movdqu %xmm13, 208(%rsp)\n"
  "  movdqu %xmm14, 224(%rsp)\n movdqu %xmm15, 240(%rsp)\n"
  "  mov 96(%rbp), %rdi\n"	/* g (above 10 saved words and the rip) */
  "  mov %rbp, %rsi\n"		/* The saved rbp. */
  "  call lj_perf_inject\n"
  "  movdqu 0(%rsp), %xmm0\n movdqu 16(%rsp), %xmm1\n"
  "  movdqu 32(%rsp), %xmm2\n movdqu 48(%rsp), %xmm3\n"
  "  movdqu 64(%rsp), %xmm4\n movdqu 80(%rsp), %xmm5\n"
  "  movdqu 96(%rsp), %xmm6\n movdqu 112(%rsp), %xmm7\n"
  "  movdqu 128(%rsp), %xmm8\n movdqu 144(%rsp), %xmm9\n"
  "  movdqu 160(%rsp), %xmm10\n movdqu 176(%rsp), %xmm11\n"
  "  movdqu 192(%rsp), %xmm12\n movdqu 208(%rsp), %xmm13\n"
  "  movdqu 224(%rsp), %xmm14\n movdqu 240(%rsp), %xmm15\n"
  "  mov %rbp, %rsp\n"
  "  pop %rbp\n"
  "  pop %r11\n pop %r10\n pop %r9\n pop %r8\n"
  "  pop %rdi\n pop %rsi\n pop %rdx\n pop %rcx\n pop %rax\n"
  "  popfq\n"
  "  ret $136\n"
  ".size lj_vm_perfinject, .-lj_vm_perfinject\n"
);
#endif

#else

/* Without LJ_HASPERF no control block is there: nothing kicks the VM. */
void LJ_FASTCALL lj_perf_kick(lua_State *L, const BCIns *pc)
{
  UNUSED(L); UNUSED(pc);
}

#endif

#if LJ_HASPERF

/* -- C API ---------------------------------------------------------------- */

LUA_API int luaJIT_perf_start(lua_State *L, const char *what)
{
  unsigned mask;
  char bad[48];
  if (perf_parse(what ? what : "1", &mask, bad, sizeof(bad)) < 0) return -1;
  return perf_start(L, mask, 0) ? -1 : 0;
}

LUA_API int luaJIT_perf_stop(lua_State *L, const char *what)
{
  unsigned mask;
  char bad[48];
  if (perf_parse(what ? what : "1", &mask, bad, sizeof(bad)) < 0) return -1;
  perf_stop(L, mask);
  return 0;
}

LUA_API int luaJIT_perf_status(lua_State *L)
{
  return (int)perf_status(G(L));
}

/* -- Lua API: require "jit.perf" ------------------------------------------ */

static unsigned perf_argparts(lua_State *L)
{
  unsigned mask;
  char bad[48];
  const char *what = luaL_optstring(L, 1, "1");
  if (perf_parse(what, &mask, bad, sizeof(bad)) < 0)
    luaL_error(L, "unknown part '%s' (use " PERF_VALUES ")", bad);
  return mask;
}

static int perf_lstart(lua_State *L)
{
  unsigned failed = perf_start(L, perf_argparts(L), 0);
  if (failed) {
    char buf[32];
    lua_pushnil(L);
    lua_pushfstring(L, "could not start:%s", perf_partnames(failed, buf));
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int perf_lstop(lua_State *L)
{
  perf_stop(L, perf_argparts(L));
  lua_pushboolean(L, 1);
  return 1;
}

static int perf_lstatus(lua_State *L)
{
  unsigned mask = perf_status(G(L));
  lua_createtable(L, 0, 5);
  lua_pushboolean(L, (mask & LUAJIT_PERF_MAP) != 0);
  lua_setfield(L, -2, "map");
  lua_pushboolean(L, (mask & LUAJIT_PERF_JITDUMP) != 0);
  lua_setfield(L, -2, "jitdump");
  lua_pushboolean(L, (mask & LUAJIT_PERF_FRAMES) != 0);
  lua_setfield(L, -2, "frames");
  lua_pushboolean(L, (mask & LUAJIT_PERF_MEM) != 0);
  lua_setfield(L, -2, "mem");
  lua_pushboolean(L, (mask & LUAJIT_PERF_REMOTE) != 0);
  lua_setfield(L, -2, "remote");
  return 1;
}

int luaopen_jit_perf(lua_State *L)
{
  static const luaL_Reg funcs[] = {
    { "start", perf_lstart }, { "stop", perf_lstop },
    { "status", perf_lstatus }, { NULL, NULL }
  };
  lua_createtable(L, 0, 3);
  luaL_register(L, NULL, funcs);
  return 1;
}

#endif
