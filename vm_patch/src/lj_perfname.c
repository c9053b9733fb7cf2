/*
** ljperf names (patch 0003): a prototype is NAME@CHUNK:LINE, NAME found
** from what its parent's bytecode does with the closure (the variable,
** global, field or upvalue FNEW's result goes to), CHUNK a readable and
** safe form of its chunk name (no ':': labels end in :LINE, trace names
** are split at "::"), LINE where it is defined. Names given are kept per
** prototype address, process-wide, to label the traces that start in it
** later. Names are cut to PERF_PARTMAX per part, never inside a UTF-8
** sequence, and cleaned by ljp_name_copy.
*/

#define lj_perfname_c
#define LUA_CORE

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lj_obj.h"
#include "lj_bc.h"
#include "lj_debug.h"
#include "lj_perfint.h"

#if LJ_HASPERF

/* -- Labels --------------------------------------------------------------- */

/* Appends LEN bytes of S, already clean (made by pb_*), as much as fits. */
static void pb_rawn(PerfBuf *b, const char *s, size_t len)
{
  if (len > b->sz - 1 - b->n) len = b->sz - 1 - b->n;
  memcpy(b->p + b->n, s, len);
  b->n += len;
  b->p[b->n] = '\0';
}

void lj_perf_braw(PerfBuf *b, const char *s) { pb_rawn(b, s, strlen(s)); }

/* Appends LEN bytes of S (as much as fits), cleaned by ljp_name_copy. */
static void pb_put(PerfBuf *b, const char *s, size_t len)
{
  size_t n0 = b->n;
  pb_rawn(b, s, len);
  ljp_name_copy(b->p + n0, b->p + n0, b->n - n0);  /* In place. */
}

void lj_perf_bstr(PerfBuf *b, const char *s) { pb_put(b, s, strlen(s)); }

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
      lj_perf_bstr(b, "...");
      pb_put(b, s, keep);
    } else {
      while (keep > 0 && ((unsigned char)s[keep] & 0xc0) == 0x80) keep--;
      pb_put(b, s, keep);
      lj_perf_bstr(b, "...");
    }
  } else {
    pb_put(b, s, len);
  }
}

/* Appends V in decimal, two digits a step (every trace name has two). */
void lj_perf_bint(PerfBuf *b, long v)
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

/* Readable, safe chunk name: "@path" -> path, "=name" -> name, source text
** (load("...")) -> string_<hash of the text>, library functions -> builtin.
** No ':' (labels end in :LINE, trace names are split at "::").
*/
void lj_perf_bchunk(PerfBuf *b, GCproto *pt)
{
  GCstr *cs = proto_chunkname(pt);
  const char *s = strdata(cs);
  size_t len = cs->len;
  if (perf_isbuiltin(pt)) {
    lj_perf_bstr(b, "builtin");
  } else if (len > 0 && (s[0] == '@' || s[0] == '=')) {
    size_t n0 = b->n;
    s++; len--;
    if (len >= 2 && s[0] == '.' && s[1] == '/') { s += 2; len -= 2; }
    if (len >= 2 && ((s[0] == '(' && s[len-1] == ')') ||
		     (s[0] == '[' && s[len-1] == ']'))) { s++; len -= 2; }
    if (len == 0) lj_perf_bstr(b, "?");
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

/* PT's chunk name, made once while C has it (lj_perfint.h). */
const char *lj_perf_chunkof(PerfChunk *c, GCproto *pt)
{
  GCstr *cs = proto_chunkname(pt);
  int builtin = perf_isbuiltin(pt);
  if (c->cs != cs || c->builtin != builtin) {
    PerfBuf b = { c->s, 0, sizeof(c->s) };
    c->s[0] = '\0';
    lj_perf_bchunk(&b, pt);
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
    lj_perf_bstr(b, name);
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
	  if (pb_slot(b, pt, p, bc_b(ins), depth-1)) lj_perf_bstr(b, ".");
	  else b->n = n0;
	  lj_perf_bstr(b, strdata(perf_kstr(pt, bc_c(ins))));
	  return 1;
	}
	break;
      }
    }
    lj_perf_bstr(b, name);
    return 1;
  }
  return 0;
}

/* Is the first parameter named self (function a:m() adds it)? */
int lj_perf_isself(GCproto *child)
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
	lj_perf_bstr(b, strdata(perf_kstr(pt, bc_d(ins))));
	return 1;
      }
      break;
    case BC_TSETS:
      if (bc_a(ins) == a) {
	size_t n0 = b->n;
	if (pb_slot(b, pt, pc + 1, bc_b(ins), 3))
	  lj_perf_bstr(b, lj_perf_isself(child) ? ":" : ".");
	else
	  b->n = n0;
	lj_perf_bstr(b, strdata(perf_kstr(pt, bc_c(ins))));
	return 1;
      }
      break;
    case BC_MOV:
      if (bc_d(ins) == a) return pb_slot(b, pt, pc + 2, bc_a(ins), 1);
      break;
    case BC_USETV:
      if (bc_d(ins) == a) {
	lj_perf_bstr(b, lj_debug_uvname(pt, bc_a(ins)));
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
void lj_perf_blabel(PerfBuf *b, GCproto *pt, const char *name,
		     const char *chunk)
{
  if (perf_isbuiltin(pt)) {
    GCstr *cs = proto_chunkname(pt);
    pb_part(b, strdata(cs), cs->len, 0);
    lj_perf_bstr(b, "@builtin:0");
    return;
  }
  if (name && *name) {
    pb_part(b, name, strlen(name), 0);
    lj_perf_braw(b, "@");
  }
  lj_perf_braw(b, chunk);
  lj_perf_braw(b, ":");
  lj_perf_bint(b, (long)pt->firstline);
}

/* Every prototype below PT with the name its parent gives it. */
void lj_perf_walk(GCproto *pt, PerfVisit visit, void *ud)
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
      lj_perf_walk(child, visit, ud);
    }
  }
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

void lj_perf_nameput(GCproto *pt, const char *name)
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
void lj_perf_nameget(GCproto *pt, char *buf, size_t sz)
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

const char *lj_perf_tracelabel(GCproto *pt, const char *fbuf)
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
    lj_perf_nameget(pt, pname, sizeof(pname));
    lj_perf_blabel(&b, pt, pname, fbuf);
    c->pt = pt; c->chunk = gcref(pt->chunkname);
    c->firstline = pt->firstline; c->sizebc = pt->sizebc;
    c->gen = gen;
  }
  return c->s;
}

#endif
