/*
** ljperf names for orphans (patch 0003): a prototype whose parent is gone
** (a module's main chunk runs once and is collected) has no bytecode left
** that names it. When recording starts on a running VM, such a prototype
** gets the name its chunk gave it, from the chunk's file loaded again
** (lj_perf_srcnames), or else from where the heap keeps a closure of it
** (lj_perf_heapnames). Both run only at a start and allocate nothing on
** the Lua heaps being described.
*/

#define lj_perforphan_c
#define LUA_CORE

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lua.h"
#include "lauxlib.h"

#include "lj_obj.h"
#include "lj_bc.h"
#include "lj_debug.h"
#include "lj_gc.h"
#include "lj_perfint.h"

#if LJ_HASPERF

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
		   lj_perf_isself(funcproto(funcV(v)));
	lj_perf_braw(&b, prefix);
	lj_perf_braw(&b, self ? ":" : ".");
      }
      lj_perf_bstr(&b, strdata(strV(k)));
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
void lj_perf_heapnames(global_State *g, LJPSet *haveparent)
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
      lj_perf_nameget((GCproto *)e->obj, old, sizeof(old));
      if (!old[0]) lj_perf_nameput((GCproto *)e->obj, e->name);
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
static __thread int perf_scratch;	/* Set while its state is made. */

int lj_perf_isscratch(void)
{
  return perf_scratch;
}

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
      lj_perf_nameput(o->v[i], name);
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
    lj_perf_walk(funcproto(funcV(S->top - 1)), perf_srcvisit, &o);
  }
  lua_close(S);
}

/* Names the prototypes of G without parent and without name whose chunk
** is a file (@PATH), one reload per file.
*/
void lj_perf_srcnames(global_State *g, LJPSet *haveparent)
{
  GCproto **v = NULL;
  size_t n = 0, cap = 0, i, j;
  GCobj *o;
  for (o = gcref(g->gc.root); o != NULL; o = gcref(o->gch.nextgc))
    if (o->gch.gct == ~LJ_TPROTO && perf_live(g, o) &&
	gco2pt(o)->firstline > 0 && strdata(proto_chunkname(gco2pt(o)))[0] == '@' &&
	!ljp_set_find(haveparent, ljp_hash_ptr(o), perf_ptreq, o)) {
      char old[PERF_NAMESZ];
      lj_perf_nameget(gco2pt(o), old, sizeof(old));
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

#endif
