/*
** ljperf heap snapshots (patch 0010): every live GC object of a
** global_State as a node of a V8 .heapsnapshot, every reference as an edge
** named as in Lua source. Nothing runs until a snapshot is asked for.
**
** Invariants: nothing is allocated on the Lua heap while writing (the
** object index is mmap'd, names and the output buffer are malloc'd), so no
** GC step runs and the GC stays in the state it was in; called between GC
** steps only (from a C function or the C API), never inside one. Nodes are
** the synthetic roots, then the objects in address order: an object's
** node index is its rank in the object index (a bitmap of the addresses
** where objects start), its node id its address / 8 in 32 bits (LuaJIT
** never moves objects). String index I names node I (a string's contents,
** a root's name, "" for the rest); names built here (classes, functions,
** stack slots) follow, interned in a malloc'd set.
*/

#define lj_heapsnap_c
#define LUA_CORE

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lua.h"
#include "lauxlib.h"
#include "luajit.h"

#include "lj_obj.h"
#include "lj_gc.h"
#include "lj_buf.h"
#include "lj_str.h"
#include "lj_tab.h"
#include "lj_meta.h"
#include "lj_frame.h"
#include "lj_debug.h"
#include "lj_ff.h"
#include "lj_jit.h"
#include "lj_trace.h"
#include "lj_ir.h"
#if LJ_HASFFI
#include "lj_ctype.h"
#endif
#include "lj_perfint.h"
#include "lj_heapsnap.h"

#if LJ_HASHEAPSNAP

/* The string table and a string's size: LuaJIT 2.1 since 2020 (str.tab,
** chains tagged in bit 0; lj_str_size), or before (strhash; sizestring:
** tarantool/luajit, Tarantool 2.6's copy).
*/
#ifdef lj_str_size
#define hs_strsize(s)	lj_str_size((s)->len)
#define hs_strtab(g)	((g)->str.tab)
#define hs_strmask(g)	((g)->str.mask)
#else
#define hs_strsize(s)	sizestring(s)
#define hs_strtab(g)	((g)->strhash)
#define hs_strmask(g)	((g)->strmask)
#endif

/* -- Output --------------------------------------------------------------- */

#define HS_BUFSZ	65536
#define HS_STRMAX	1024	/* A string node's name keeps this many bytes. */

typedef struct HSOut {
  int fd;
  int err;		/* errno of the first failed write, 0 if none */
  size_t n;
  char buf[HS_BUFSZ];
} HSOut;

static void hs_flush(HSOut *o)
{
  size_t done = 0;
  while (done < o->n && !o->err) {
    ssize_t w = write(o->fd, o->buf + done, o->n - done);
    if (w > 0) done += (size_t)w;
    else if (w < 0 && errno == EINTR) continue;
    else o->err = w < 0 ? errno : ENOSPC;
  }
  o->n = 0;
}

static void hs_put(HSOut *o, const char *s, size_t n)
{
  while (n) {
    size_t k = HS_BUFSZ - o->n < n ? HS_BUFSZ - o->n : n;
    memcpy(o->buf + o->n, s, k);
    o->n += k; s += k; n -= k;
    if (o->n == HS_BUFSZ) hs_flush(o);
  }
}

static void hs_puts(HSOut *o, const char *s)
{
  hs_put(o, s, strlen(s));
}

static void hs_putu(HSOut *o, uint64_t v)
{
  char b[24], *p = b + sizeof(b);
  do { *--p = (char)('0' + v % 10); v /= 10; } while (v);
  hs_put(o, p, (size_t)(b + sizeof(b) - p));
}

/* Length of the valid UTF-8 sequence at S (at most N bytes), 0 if none. */
static size_t hs_utf8len(const unsigned char *s, size_t n)
{
  size_t k, i;
  uint32_t c;
  if (s[0] < 0xc2 || s[0] > 0xf4) return 0;
  k = s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : 4;
  if (k > n) return 0;
  c = s[0] & (0x7f >> k);
  for (i = 1; i < k; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    c = (c << 6) | (s[i] & 0x3f);
  }
  if ((k == 3 && (c < 0x800 || (c >= 0xd800 && c < 0xe000))) ||
      (k == 4 && (c < 0x10000 || c > 0x10ffff)))
    return 0;
  return k;
}

/* A JSON string of S: valid UTF-8 kept, any other byte as \u00XX. */
static void hs_putjs(HSOut *o, const char *s, size_t n)
{
  const unsigned char *p = (const unsigned char *)s, *e = p + n;
  hs_put(o, "\"", 1);
  while (p < e) {
    const unsigned char *q = p;
    while (q < e && *q >= 0x20 && *q < 0x80 && *q != '"' && *q != '\\') q++;
    hs_put(o, (const char *)p, (size_t)(q - p));
    if (q == e) break;
    if (*q >= 0x80) {
      size_t k = hs_utf8len(q, (size_t)(e - q));
      if (k) { hs_put(o, (const char *)q, k); p = q + k; continue; }
    }
    if (*q == '"' || *q == '\\') {
      char b[2] = { '\\', (char)*q };
      hs_put(o, b, 2);
    } else {
      char b[8];
      snprintf(b, sizeof(b), "\\u%04x", *q);
      hs_put(o, b, 6);
    }
    p = q + 1;
  }
  hs_put(o, "\"", 1);
}

/* -- State of one snapshot ------------------------------------------------ */

/* V8's node and edge types (snapshot.meta), as used here. */
enum { HN_HIDDEN = 0, HN_STRING = 2, HN_OBJECT = 3, HN_CODE = 4,
       HN_NATIVE = 8, HN_SYNTHETIC = 9 };
enum { HE_CONTEXT = 0, HE_ELEMENT = 1, HE_PROPERTY = 2, HE_INTERNAL = 3,
       HE_WEAK = 6 };

/* The synthetic nodes, before the objects: the root, the named GC roots
** and what the GC counts outside objects.
*/
#define HSROOTDEF(_) \
  _(ROOT, "") _(GCROOTS, "(GC roots)") _(RUNNING, "(running threads)") \
  _(OPENUV, "(open upvalues)") _(FINALIZE, "(awaiting finalization)") \
  _(INTERNAL, "(VM internals)") _(GG, "(global state)") \
  _(STRTAB, "(string table)") _(TMPBUF, "(temp buffer)") \
  _(JIT, "(JIT buffers)") _(CTYPES, "(FFI types)")

enum {
#define HSROOTENUM(id, name)	HS_##id,
HSROOTDEF(HSROOTENUM)
#undef HSROOTENUM
  HS_NSYN
};

static const char *const hs_rootnames[] = {
#define HSROOTNAME(id, name)	name,
HSROOTDEF(HSROOTNAME)
#undef HSROOTNAME
};

/* 64 KiB of address space in the object index (below). */
typedef struct HSRegion {
  uintptr_t base;	/* Its first address, a multiple of 2^HS_RBITS. */
  size_t rank;		/* Objects in the regions below. */
  uint64_t bits[1];	/* hs_nwords words; then a uint16_t per 4 words: the
			** objects in the words below them, in this region. */
} HSRegion;

/* A name built here: its string index is S->nnode + its order. */
typedef struct HSName { uint32_t idx, len; char s[1]; } HSName;

/* Metatable or prototype -> its class or function name. */
typedef struct HSKeyName { const void *key; const char *name; } HSKeyName;

typedef struct HSnap {
  global_State *g;
  lua_State *L;
  HSRegion **regv;	/* Object index: regions by address. */
  size_t nreg, capreg;
  HSRegion *lastreg;	/* The region found last. */
  uint8_t *low;		/* Address bits [3, shift) by rank, packed. */
  size_t lowsz;		/* Bytes mapped for LOW. */
  char *block;		/* Regions' mmap'd block; its first word: the last. */
  size_t blockn;	/* Bytes of it taken. */
  int shift;		/* A granule is 2^shift bytes. */
  int collide;		/* Two objects started in one granule. */
  size_t nobj;
  size_t nnode;		/* HS_NSYN + nobj */
  LJPSet names;		/* HSName by contents */
  HSName **namev;	/* ... in index order */
  size_t nname, capname;
  LJPSet classes;	/* metatable -> HSKeyName (name may be NULL) */
  LJPSet fnames;	/* prototype -> HSKeyName, its label */
  int counting;		/* 1: count edges, 0: write them */
  uint32_t nedge;	/* edges counted for the current node */
  uint64_t total;	/* sum of self sizes */
  uint64_t totaledges;
  int nomem;
  HSOut *out;
} HSnap;

static int hs_eqname(const void *p, const void *key)
{
  const HSName *a = (const HSName *)p, *b = (const HSName *)key;
  return a->len == b->len && !memcmp(a->s, b->s, a->len);
}

static int hs_eqkey(const void *p, const void *key)
{
  return ((const HSKeyName *)p)->key == key;
}

/* String index of the name S (N bytes), added if new. */
static uint64_t hs_intern(HSnap *s, const char *str, size_t n)
{
  uint64_t h;
  LJPSlot *slot;
  HSName *e;
  if (n > HS_STRMAX) n = HS_STRMAX;
  h = ljp_hash_key(ljp_hash(LJP_HASH_SEED, str, n));
  if (ljp_set_reserve(&s->names) < 0) goto nomem;
  if (!(e = (HSName *)malloc(sizeof(HSName) + n))) goto nomem;
  e->len = (uint32_t)n;
  memcpy(e->s, str, n);
  e->s[n] = '\0';
  slot = ljp_set_slot(&s->names, h, hs_eqname, e);
  if (slot->h) {  /* Known: E was only the key. */
    uint64_t idx = ((HSName *)slot->p)->idx;
    free(e);
    return s->nnode + idx;
  }
  if (s->nname == s->capname) {
    size_t cap = s->capname ? 2*s->capname : 256;
    HSName **v = (HSName **)realloc(s->namev, cap * sizeof(HSName *));
    if (!v) { free(e); goto nomem; }
    s->namev = v; s->capname = cap;
  }
  e->idx = (uint32_t)s->nname;
  s->namev[s->nname++] = e;
  ljp_set_fill(&s->names, slot, h, e);
  return s->nnode + e->idx;
nomem:
  s->nomem = 1;
  return 0;
}

static uint64_t hs_internz(HSnap *s, const char *str)
{
  return hs_intern(s, str, strlen(str));
}

/* -- Object index --------------------------------------------------------- */

/* Nodes are the objects in address order, and an object's node index is its
** rank among them. One bit per granule of 2^shift bytes marks a granule
** where an object starts, in regions of 64 KiB of address space made only
** where objects are, with counts of the objects before each 4 words; the
** address bits between the 8-byte alignment and the granule are kept by
** rank (LOW). A granule holds at most one object: objects take 16 bytes or
** more, and chunks of lj_alloc and glibc 32; when two start in one granule
** anyway, the index is rebuilt with half the granule. The index is mmap'd
** and unmapped at the end: the C heap stays as it was.
*/
#define HS_RBITS	16		/* A region covers 2^16 bytes. */
#define HS_SHIFTMAX	5		/* The first granule: 32 bytes. */
#define HS_BLOCKSZ	(256*1024)	/* Regions are taken from such blocks. */

#define hs_nwords(s)	((size_t)1 << (HS_RBITS - (s)->shift - 6))
#define hs_rcount(s, r)	((uint16_t *)((r)->bits + hs_nwords(s)))
#define hs_regsize(s) \
  (sizeof(HSRegion) - sizeof(uint64_t) + hs_nwords(s) * 8 + hs_nwords(s) / 2)

/* Bits set in X. */
static uint32_t hs_popcount(uint64_t x)
{
  x -= (x >> 1) & 0x5555555555555555ull;
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
  return (uint32_t)((x * 0x0101010101010101ull) >> 56);
}

static void *hs_map(size_t sz)
{
  void *p = mmap(NULL, sz, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS,
		 -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

/* SZ zeroed bytes for a region (SZ < HS_BLOCKSZ), or NULL. */
static void *hs_regalloc(HSnap *s, size_t sz)
{
  sz = (sz + 7) & ~(size_t)7;
  if (!s->block || s->blockn + sz > HS_BLOCKSZ) {
    char *b = (char *)hs_map(HS_BLOCKSZ);
    if (!b) return NULL;
    *(char **)b = s->block;
    s->block = b; s->blockn = sizeof(char *);
  }
  s->blockn += sz;
  return s->block + s->blockn - sz;
}

/* Position in the sorted region array where the region of A is or goes. */
static size_t hs_regpos(HSnap *s, uintptr_t a)
{
  size_t lo = 0, hi = s->nreg;
  a &= ~(((uintptr_t)1 << HS_RBITS) - 1);
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (s->regv[mid]->base < a) lo = mid + 1; else hi = mid;
  }
  return lo;
}

/* The region of A, or NULL. The last one found is tried first. */
static HSRegion *hs_region(HSnap *s, uintptr_t a)
{
  size_t i;
  if (s->lastreg && (a >> HS_RBITS) == (s->lastreg->base >> HS_RBITS))
    return s->lastreg;
  i = hs_regpos(s, a);
  if (i < s->nreg && (s->regv[i]->base >> HS_RBITS) == (a >> HS_RBITS))
    return (s->lastreg = s->regv[i]);
  return NULL;
}

/* The region of A, made if new; NULL when out of memory. */
static HSRegion *hs_regionnew(HSnap *s, uintptr_t a)
{
  HSRegion *r = hs_region(s, a);
  size_t i;
  if (r) return r;
  if (s->nreg == s->capreg) {
    size_t cap = s->capreg ? 2*s->capreg : 64;
    HSRegion **v = (HSRegion **)realloc(s->regv, cap * sizeof(HSRegion *));
    if (!v) return NULL;
    s->regv = v; s->capreg = cap;
  }
  if (!(r = (HSRegion *)hs_regalloc(s, hs_regsize(s)))) return NULL;
  r->base = a & ~(((uintptr_t)1 << HS_RBITS) - 1);
  i = hs_regpos(s, a);
  memmove(s->regv + i + 1, s->regv + i, (s->nreg - i) * sizeof(HSRegion *));
  s->regv[i] = r;
  s->nreg++;
  return (s->lastreg = r);
}

/* Marks O's granule. A granule marked twice is a collision (or, with
** 8-byte granules, an object listed twice: counted once).
*/
static void hs_mark(HSnap *s, GCobj *o)
{
  uintptr_t a = (uintptr_t)o;
  HSRegion *r = hs_regionnew(s, a);
  size_t g;
  uint64_t m;
  if (!r) { s->nomem = 1; return; }
  (void)check_exp((a & 7) == 0, 0);  /* Objects are 8-byte aligned. */
  g = (a - r->base) >> s->shift;
  m = (uint64_t)1 << (g & 63);
  if (r->bits[g >> 6] & m) { s->collide |= s->shift > 3; return; }
  r->bits[g >> 6] |= m;
  s->nobj++;
}

/* Address bits [3, shift) of A: what LOW keeps. */
#define hs_lowof(s, a)	(((a) >> 3) & ((1u << ((s)->shift - 3)) - 1))

/* LOW's bits of the object of rank I. */
static uintptr_t hs_low(HSnap *s, size_t i)
{
  size_t lb = (size_t)s->shift - 3, p = i * lb;
  return lb ? (uintptr_t)(s->low[p >> 3] >> (p & 7)) & ((1u << lb) - 1) : 0;
}

/* Rank of the object starting in A's granule, or -1 if none does. */
static ptrdiff_t hs_grank(HSnap *s, uintptr_t a)
{
  HSRegion *r = hs_region(s, a);
  size_t g, w, i;
  uint64_t m;
  if (!r) return -1;
  g = (a - r->base) >> s->shift;
  w = g >> 6;
  m = (uint64_t)1 << (g & 63);
  if (!(r->bits[w] & m)) return -1;
  i = r->rank + hs_rcount(s, r)[w >> 2] + hs_popcount(r->bits[w] & (m - 1));
  while (w & 3) i += hs_popcount(r->bits[--w]);
  return (ptrdiff_t)i;
}

/* Rank of the object at A, or -1 if no object starts at A. */
static ptrdiff_t hs_rank(HSnap *s, uintptr_t a)
{
  ptrdiff_t i = (a & 7) ? -1 : hs_grank(s, a);
  return i >= 0 && hs_low(s, (size_t)i) == hs_lowof(s, a) ? i : -1;
}

static void hs_marklow(HSnap *s, GCobj *o)
{
  uintptr_t a = (uintptr_t)o;
  size_t p = (size_t)hs_grank(s, a) * (size_t)(s->shift - 3);
  s->low[p >> 3] |= (uint8_t)(hs_lowof(s, a) << (p & 7));
}

/* Every live object: the GC's list (userdata after the main thread), the
** string table, open upvalues, objects awaiting finalization, and the
** empty string (part of global_State).
*/
static void hs_walk(HSnap *s, void (*visit)(HSnap *s, GCobj *o))
{
  global_State *g = s->g;
  GCobj *o;
  GCupval *uv;
  MSize i;
  for (o = gcref(g->gc.root); o; o = gcnext(o))
    if (!isdead(g, o)) visit(s, o);
  for (i = 0; i <= hs_strmask(g); i++)
    for (o = (GCobj *)(gcrefu(hs_strtab(g)[i]) & ~(uintptr_t)1); o;
	 o = gcnext(o))
      if (!isdead(g, o)) visit(s, o);
  visit(s, obj2gco(&g->strempty));
  for (uv = uvnext(&g->uvhead); uv != &g->uvhead; uv = uvnext(uv))
    visit(s, obj2gco(uv));
  if ((o = gcref(g->gc.mmudata)) != NULL) {
    GCobj *u = o;
    do { u = gcnext(u); visit(s, u); } while (u != o);
  }
}

static void hs_freeindex(HSnap *s)
{
  while (s->block) {
    char *b = s->block;
    s->block = *(char **)b;
    munmap(b, HS_BLOCKSZ);
  }
  if (s->low) munmap(s->low, s->lowsz);
  free(s->regv);
  s->regv = NULL; s->low = NULL; s->lastreg = NULL;
  s->nreg = s->capreg = s->nobj = 0;
}

/* Builds the index: granules of 32 bytes, or smaller after a collision. */
static void hs_collect(HSnap *s)
{
  size_t i, j, n = 0;
  for (s->shift = HS_SHIFTMAX; ; s->shift--) {
    s->collide = 0;
    hs_walk(s, hs_mark);
    if (s->nomem || !s->collide) break;
    hs_freeindex(s);
  }
  for (i = 0; i < s->nreg && !s->nomem; i++) {  /* Counts. */
    HSRegion *r = s->regv[i];
    uint16_t *cnt = hs_rcount(s, r);
    uint32_t k = 0;
    r->rank = n;
    for (j = 0; j < hs_nwords(s); j++) {
      if (!(j & 3)) cnt[j >> 2] = (uint16_t)k;
      k += hs_popcount(r->bits[j]);
    }
    n += k;
  }
  (void)check_exp(s->nomem || n == s->nobj, 0);  /* Each mark counted. */
  if (s->shift > 3 && !s->nomem) {
    s->lowsz = (s->nobj * (size_t)(s->shift - 3) + 7) / 8;
    if (!(s->low = (uint8_t *)hs_map(s->lowsz))) s->nomem = 1;
    else hs_walk(s, hs_marklow);
  }
  s->nnode = HS_NSYN + s->nobj;
}

/* Node index of O, or -1 if it is not a live object. */
static ptrdiff_t hs_index(HSnap *s, const void *o)
{
  ptrdiff_t i = hs_rank(s, (uintptr_t)o);
  return i < 0 ? -1 : (ptrdiff_t)HS_NSYN + i;
}

/* Objects in address order: IT from hs_iterinit, O from hs_next. */
typedef struct HSIter {
  size_t reg, w;	/* Region and word of the next object. */
  uint64_t bits;	/* That word's objects not returned yet. */
  size_t i;		/* Rank of the object returned last. */
} HSIter;

static void hs_iterinit(HSnap *s, HSIter *it)
{
  it->reg = it->w = 0;
  it->bits = s->nreg ? s->regv[0]->bits[0] : 0;
  it->i = ~(size_t)0;
}

/* The next object, or NULL after the last. */
static GCobj *hs_next(HSnap *s, HSIter *it)
{
  HSRegion *r;
  size_t g;
  while (!it->bits) {
    if (++it->w == hs_nwords(s)) { it->w = 0; it->reg++; }
    if (it->reg >= s->nreg) return NULL;
    it->bits = s->regv[it->reg]->bits[it->w];
  }
  r = s->regv[it->reg];
  g = (it->w << 6) + (size_t)__builtin_ctzll(it->bits);
  it->bits &= it->bits - 1;
  it->i++;
  return (GCobj *)(r->base + (g << s->shift) + (hs_low(s, it->i) << 3));
}

/* Bytes the GC counts for O (as its free function gives them back). */
static uint64_t hs_selfsize(HSnap *s, GCobj *o)
{
  switch (o->gch.gct) {
  case ~LJ_TSTR:
    return o == obj2gco(&s->g->strempty) ? 0 : hs_strsize(&o->str);
  case ~LJ_TUPVAL: return sizeof(GCupval);
  case ~LJ_TTHREAD: {
    lua_State *th = gco2th(o);
    uint64_t n = (uint64_t)th->stacksize * sizeof(TValue);
    return th == mainthread(s->g) ? n : n + sizeof(lua_State);
  }
  case ~LJ_TPROTO: return gco2pt(o)->sizept;
  case ~LJ_TFUNC:
    return isluafunc(&o->fn) ? sizeLfunc((MSize)o->fn.l.nupvalues) :
			       sizeCfunc((MSize)o->fn.c.nupvalues);
  case ~LJ_TTAB: {
    GCtab *t = gco2tab(o);
    uint64_t n = t->colo ? sizetabcolo((uint32_t)t->colo & 0x7f) :
			   sizeof(GCtab);
    if (t->asize > 0 && t->colo <= 0) n += (uint64_t)t->asize * sizeof(TValue);
    if (t->hmask > 0) n += (uint64_t)(t->hmask + 1) * sizeof(Node);
    return n;
  }
  case ~LJ_TUDATA: return sizeudata(gco2ud(o));
#if LJ_HASFFI
  case ~LJ_TCDATA: {
    GCcdata *cd = gco2cd(o);
    CType *ct;
    if (cdataisv(cd)) return sizecdatav(cd);
    ct = ctype_raw(ctype_ctsG(s->g), cd->ctypeid);
    return sizeof(GCcdata) + (ctype_hassize(ct->info) ? ct->size : CTSIZE_PTR);
  }
#endif
#if LJ_HASJIT
  case ~LJ_TTRACE: {
    GCtrace *T = (GCtrace *)o;
    return ((sizeof(GCtrace)+7)&~7) + (T->nins-T->nk)*sizeof(IRIns) +
	   T->nsnap*sizeof(SnapShot) + T->nsnapmap*sizeof(SnapEntry);
  }
#endif
  default: return 0;
  }
}

/* Bytes the GC counts outside objects, by synthetic node. */
static uint64_t hs_internalsize(HSnap *s, int id)
{
  global_State *g = s->g;
  switch (id) {
  case HS_GG: return sizeof(GG_State);
  case HS_STRTAB: return (uint64_t)(hs_strmask(g) + 1) * sizeof(GCRef);
  case HS_TMPBUF: return sbufsz(&g->tmpbuf);
#if LJ_HASJIT
  case HS_JIT: {
    jit_State *J = G2J(g);
    return (uint64_t)J->sizesnapmap * sizeof(SnapEntry) +
	   (uint64_t)J->sizesnap * sizeof(SnapShot) +
	   (uint64_t)(J->irtoplim - J->irbotlim) * sizeof(IRIns) +
	   (uint64_t)J->sizetrace * sizeof(GCRef);
  }
#endif
#if LJ_HASFFI
  case HS_CTYPES: {
    CTState *cts = ctype_ctsG(g);
    return cts ? sizeof(CTState) + (uint64_t)cts->sizetab * sizeof(CType) +
		 (uint64_t)cts->cb.sizeid * sizeof(CTypeID1) : 0;
  }
#endif
  default: return 0;
  }
}

/* -- Names ---------------------------------------------------------------- */

/* T's string key NAME (N bytes), or NULL. Reads T's hash part only. */
static cTValue *hs_getfield(GCtab *t, const char *name, MSize n)
{
  Node *node = noderef(t->node);
  MSize i;
  for (i = 0; i <= t->hmask; i++)
    if (tvisstr(&node[i].key) && !tvisnil(&node[i].val) &&
	strV(&node[i].key)->len == n && !memcmp(strVdata(&node[i].key), name, n))
      return &node[i].val;
  return NULL;
}

static HSKeyName *hs_keyname(LJPSet *set, const void *key)
{
  LJPSlot *slot = ljp_set_find(set, ljp_hash_ptr(key), hs_eqkey, key);
  return slot ? (HSKeyName *)slot->p : NULL;
}

static HSKeyName *hs_keyput(HSnap *s, LJPSet *set, const void *key)
{
  LJPSlot *slot;
  HSKeyName *e;
  uint64_t h = ljp_hash_ptr(key);
  if (ljp_set_reserve(set) < 0) { s->nomem = 1; return NULL; }
  slot = ljp_set_slot(set, h, hs_eqkey, key);
  if (slot->h) return (HSKeyName *)slot->p;
  if (!(e = (HSKeyName *)malloc(sizeof(HSKeyName)))) { s->nomem = 1; return NULL; }
  e->key = key; e->name = NULL;
  ljp_set_fill(set, slot, h, e);
  return e;
}

static char *hs_strdup2(const char *a, const char *dot, const char *b)
{
  size_t na = strlen(a), nd = strlen(dot), nb = strlen(b);
  char *p = (char *)malloc(na + nd + nb + 1);
  if (p) {
    memcpy(p, a, na); memcpy(p + na, dot, nd); memcpy(p + na + nd, b, nb);
    p[na + nd + nb] = '\0';
  }
  return p;
}

/* Names the unnamed metatables among T's fields: KEY, or PREFIX.KEY. */
static void hs_classfields(HSnap *s, GCtab *t, const char *prefix)
{
  Node *node = noderef(t->node);
  MSize i;
  for (i = 0; i <= t->hmask; i++)
    if (tvisstr(&node[i].key) && tvistab(&node[i].val)) {
      HSKeyName *e = hs_keyname(&s->classes, tabV(&node[i].val));
      if (e && !e->name)
	e->name = prefix ? hs_strdup2(prefix, ".", strVdata(&node[i].key)) :
			   hs_strdup2("", "", strVdata(&node[i].key));
    }
}

/* Class names of metatables: their __name, else the global or the module
** field (or the module) that holds them.
*/
static void hs_classes(HSnap *s)
{
  global_State *g = s->g;
  HSIter it;
  GCobj *o;
  GCtab *env = tabref(mainthread(g)->env);
  cTValue *loaded = NULL;
  hs_iterinit(s, &it);
  while ((o = hs_next(s, &it)) != NULL) {
    GCtab *mt = o->gch.gct == ~LJ_TTAB ? tabref(o->tab.metatable) :
		o->gch.gct == ~LJ_TUDATA ? tabref(o->ud.metatable) : NULL;
    if (mt && !hs_keyname(&s->classes, mt)) {
      HSKeyName *e = hs_keyput(s, &s->classes, mt);
      cTValue *nm = hs_getfield(mt, "__name", 6);
      if (e && nm && tvisstr(nm)) e->name = hs_strdup2("", "", strVdata(nm));
    }
  }
  if (env) hs_classfields(s, env, NULL);
  if (tvistab(&g->registrytv))
    loaded = hs_getfield(tabV(&g->registrytv), "_LOADED", 7);
  if (loaded && tvistab(loaded)) {
    GCtab *t = tabV(loaded);
    Node *node = noderef(t->node);
    MSize j;
    for (j = 0; j <= t->hmask; j++)
      if (tvisstr(&node[j].key) && tvistab(&node[j].val)) {
	HSKeyName *e = hs_keyname(&s->classes, tabV(&node[j].val));
	if (e && !e->name) e->name = hs_strdup2("", "", strVdata(&node[j].key));
	hs_classfields(s, tabV(&node[j].val), strVdata(&node[j].key));
      }
  }
}

static void hs_fnamevisit(GCproto *child, const char *name, void *ud)
{
  HSnap *s = (HSnap *)ud;
  if (*name && !hs_keyname(&s->fnames, child)) {
    HSKeyName *e = hs_keyput(s, &s->fnames, child);
    if (e) e->name = hs_strdup2("", "", name);
  }
}

/* Names of prototypes from what their parents do with them. */
static void hs_fnames(HSnap *s)
{
  HSIter it;
  GCobj *o;
  hs_iterinit(s, &it);
  while ((o = hs_next(s, &it)) != NULL)
    if (o->gch.gct == ~LJ_TPROTO) lj_perf_walk(gco2pt(o), hs_fnamevisit, s);
}

/* NAME@CHUNK:LINE (perf's label) of PT into BUF. */
static const char *hs_label(HSnap *s, GCproto *pt, char *buf, size_t sz)
{
  HSKeyName *e = hs_keyname(&s->fnames, pt);
  char name[PERF_NAMESZ];
  PerfChunk chunk;
  PerfBuf b = { buf, 0, sz };
  if (e && e->name) snprintf(name, sizeof(name), "%s", e->name);
  else lj_perf_nameget(pt, name, sizeof(name));
  chunk.cs = NULL;
  buf[0] = '\0';
  lj_perf_blabel(&b, pt, name, lj_perf_chunkof(&chunk, pt));
  return buf;
}

static const char *const hs_ffnames[] = {
  "", "",
#define FFDEF(name)	#name,
#include "lj_ffdef.h"
#undef FFDEF
};

/* A function's name: its label, its builtin's name, or (C). */
static const char *hs_funcname(HSnap *s, GCfunc *fn, char *buf, size_t sz)
{
  if (isluafunc(fn)) return hs_label(s, funcproto(fn), buf, sz);
  if (fn->c.ffid > FF_C &&
      fn->c.ffid < sizeof(hs_ffnames)/sizeof(hs_ffnames[0])) {
    char *u;
    snprintf(buf, sz, "%s", hs_ffnames[fn->c.ffid]);
    if ((u = strchr(buf, '_')) != NULL) *u = '.';  /* string_rep: string.rep */
    return buf;
  }
  return "(C)";
}

/* A table's weak mode: LJ_GC_WEAKKEY, LJ_GC_WEAKVAL, both or 0. */
static int hs_weak(HSnap *s, GCtab *t)
{
  GCtab *mt = tabref(t->metatable);
  cTValue *mode = mt ? hs_getfield(mt, "__mode", 6) : NULL;
  int weak = 0;
  UNUSED(s);
  if (mode && tvisstr(mode)) {
    const char *m = strVdata(mode);
    if (strchr(m, 'k')) weak |= LJ_GC_WEAKKEY;
    if (strchr(m, 'v')) weak |= LJ_GC_WEAKVAL;
  }
  return weak;
}

/* String index of O's node name. */
static uint64_t hs_nodename(HSnap *s, GCobj *o, size_t idx)
{
  char buf[PERF_NAMESZ + 32];
  switch (o->gch.gct) {
  case ~LJ_TSTR: return idx;
  case ~LJ_TTAB: case ~LJ_TUDATA: {
    GCtab *mt = o->gch.gct == ~LJ_TTAB ? tabref(o->tab.metatable) :
					  tabref(o->ud.metatable);
    HSKeyName *e = mt ? hs_keyname(&s->classes, mt) : NULL;
    const char *cls = e && e->name ? e->name :
		      o->gch.gct == ~LJ_TUDATA ? "userdata" : "table";
    if (o->gch.gct == ~LJ_TTAB) {
      int weak = hs_weak(s, &o->tab);
      if (weak) {
	snprintf(buf, sizeof(buf), "%s (weak %s)", cls,
		 weak == LJ_GC_WEAKKEY ? "keys" :
		 weak == LJ_GC_WEAKVAL ? "values" : "keys and values");
	return hs_internz(s, buf);
      }
    }
    return hs_internz(s, cls);
  }
  case ~LJ_TFUNC: {  /* "function " marks functions among tables' classes. */
    char lbuf[PERF_NAMESZ];
    snprintf(buf, sizeof(buf), "function %s",
	     hs_funcname(s, &o->fn, lbuf, sizeof(lbuf)));
    return hs_internz(s, buf);
  }
  case ~LJ_TPROTO:
    snprintf(buf, sizeof(buf), "(prototype) ");
    hs_label(s, gco2pt(o), buf + 12, sizeof(buf) - 12);
    return hs_internz(s, buf);
  case ~LJ_TUPVAL: return hs_internz(s, "upvalue");
  case ~LJ_TTHREAD:
    return hs_internz(s, gco2th(o) == mainthread(s->g) ? "main thread" :
							   "coroutine");
#if LJ_HASFFI
  case ~LJ_TCDATA: {  /* T, or T * and T & by T's name (tuple &). */
    CTState *cts = ctype_ctsG(s->g);
    CType *ct = ctype_raw(cts, o->cd.ctypeid);
    const char *ptr = "";
    GCstr *nm;
    if (ctype_isptr(ct->info)) {
      ptr = (ct->info & CTF_REF) ? " &" : " *";
      ct = ctype_rawchild(cts, ct);
    }
    nm = gcref(ct->name) ? strref(ct->name) : NULL;
    if (!nm) return hs_internz(s, "cdata");
    snprintf(buf, sizeof(buf), "cdata<%s%s>", strdata(nm), ptr);
    return hs_internz(s, buf);
  }
#endif
  case ~LJ_TTRACE: return hs_internz(s, "trace");
  default: return hs_internz(s, "object");
  }
}

static int hs_nodetype(GCobj *o)
{
  switch (o->gch.gct) {
  case ~LJ_TSTR: return HN_STRING;
  case ~LJ_TPROTO: case ~LJ_TTRACE: return HN_CODE;
  case ~LJ_TUPVAL: return HN_HIDDEN;
  case ~LJ_TUDATA: case ~LJ_TCDATA: return HN_NATIVE;
  default: return HN_OBJECT;
  }
}

/* -- Edges ---------------------------------------------------------------- */

static void hs_sep(HSnap *s)
{
  if (s->totaledges++) hs_put(s->out, ",", 1);
}

static void hs_ewrite(HSnap *s, int type, uint64_t name, ptrdiff_t to)
{
  hs_sep(s);
  hs_putu(s->out, (uint64_t)type);
  hs_put(s->out, ",", 1);
  hs_putu(s->out, name);
  hs_put(s->out, ",", 1);
  hs_putu(s->out, (uint64_t)to * 7);
  hs_put(s->out, "\n", 1);
}

/* An edge to O named by the C string NAME (interned when written). */
static void hs_ename(HSnap *s, int type, const char *name, const void *o)
{
  ptrdiff_t to = hs_index(s, o);
  if (to < 0) return;
  if (s->counting) { s->nedge++; return; }
  hs_ewrite(s, type, hs_internz(s, name), to);
}

/* An element edge: name is an index. */
static void hs_eelem(HSnap *s, uint64_t i, const void *o)
{
  ptrdiff_t to = hs_index(s, o);
  if (to < 0) return;
  if (s->counting) { s->nedge++; return; }
  hs_ewrite(s, HE_ELEMENT, i, to);
}

/* An edge named by a Lua string (its node's string index). */
static void hs_estr(HSnap *s, int type, GCstr *key, const void *o)
{
  ptrdiff_t to = hs_index(s, o), k;
  if (to < 0) return;
  if (s->counting) { s->nedge++; return; }
  k = hs_index(s, key);
  hs_ewrite(s, type, k >= 0 ? (uint64_t)k : hs_internz(s, "?"), to);
}

static void hs_etv(HSnap *s, int type, const char *name, cTValue *tv)
{
  if (tvisgcv(tv)) hs_ename(s, type, name, gcV(tv));
}

/* Key K of a table, as the edge to its value V names it. */
static void hs_field(HSnap *s, int weakv, cTValue *k, cTValue *v)
{
  char buf[64];
  if (!tvisgcv(v)) return;
  if (tvisstr(v)) weakv = 0;  /* A weak table keeps strings (gc_mayclear). */
  if (tvisstr(k)) {
    hs_estr(s, weakv ? HE_WEAK : HE_PROPERTY, strV(k), gcV(v));
    return;
  }
  if (tvisnumber(k)) {
    lua_Number n = numberVnum(k);
    if (!weakv && n >= 0 && n <= 4294967295.0 && n == (lua_Number)(uint32_t)n) {
      hs_eelem(s, (uint64_t)n, gcV(v));
      return;
    }
    if (!s->counting) snprintf(buf, sizeof(buf), "[%.14g]", (double)n);
  } else if (!s->counting) {
    snprintf(buf, sizeof(buf), tvisbool(k) ? (tvistrue(k) ? "[true]" : "[false]") :
	     "[value of a %s key]", lj_obj_itypename[itypemap(k)]);
  }
  hs_ename(s, weakv ? HE_WEAK : HE_INTERNAL, s->counting ? "" : buf, gcV(v));
}

static void hs_tabedges(HSnap *s, GCtab *t)
{
  int weak = hs_weak(s, t);
  GCtab *mt = tabref(t->metatable);
  MSize i;
  if (mt) hs_ename(s, HE_INTERNAL, "[metatable]", mt);
  for (i = 0; i < t->asize; i++) {
    cTValue *v = arrayslot(t, i);
    TValue k;
    setintV(&k, (int32_t)i);
    if (tvisgcv(v)) {
      if (weak & LJ_GC_WEAKVAL) hs_field(s, 1, &k, v);
      else hs_eelem(s, i, gcV(v));
    }
  }
  if (t->hmask > 0) {
    Node *node = noderef(t->node);
    for (i = 0; i <= t->hmask; i++) {
      Node *n = &node[i];
      if (tvisnil(&n->val)) continue;
      hs_field(s, weak & LJ_GC_WEAKVAL, &n->key, &n->val);
      if (tvisgcv(&n->key))  /* Strings are never weak: kept as keys too. */
	hs_etv(s, (weak & LJ_GC_WEAKKEY) && !tvisstr(&n->key) ? HE_WEAK :
		  HE_INTERNAL, "[key]", &n->key);
    }
  }
}

static void hs_funcedges(HSnap *s, GCfunc *fn)
{
  MSize i;
  hs_ename(s, HE_INTERNAL, "[env]", tabref(fn->c.env));
  if (isluafunc(fn)) {
    GCproto *pt = funcproto(fn);
    hs_ename(s, HE_INTERNAL, "[prototype]", pt);
    for (i = 0; i < fn->l.nupvalues; i++)
      hs_ename(s, HE_CONTEXT, lj_debug_uvname(pt, i),
	       gcref(fn->l.uvptr[i]));
  } else {
    for (i = 0; i < fn->c.nupvalues; i++)
      if (tvisgcv(&fn->c.upvalue[i])) {
	char buf[32];
	snprintf(buf, sizeof(buf), "[upvalue %u]", (unsigned)i + 1);
	hs_ename(s, HE_CONTEXT, buf, gcV(&fn->c.upvalue[i]));
      }
  }
}

static void hs_protoedges(HSnap *s, GCproto *pt)
{
  ptrdiff_t i;
  hs_ename(s, HE_INTERNAL, "[chunkname]", proto_chunkname(pt));
  for (i = -(ptrdiff_t)pt->sizekgc; i < 0; i++) {
    GCobj *k = proto_kgc(pt, i);
    hs_ename(s, HE_INTERNAL, k->gch.gct == ~LJ_TPROTO ? "[function]" :
	     "[constant]", k);
  }
#if LJ_HASJIT
  if (pt->trace) hs_ename(s, HE_INTERNAL, "[trace]",
			  traceref(G2J(s->g), pt->trace));
#endif
}

#if LJ_HASJIT
static void hs_traceedges(HSnap *s, GCtrace *T)
{
  jit_State *J = G2J(s->g);
  IRRef ref;
  if (T->traceno == 0) return;
  for (ref = T->nk; ref < REF_TRUE; ref++) {
    IRIns *ir = &T->ir[ref];
    if (ir->o == IR_KGC) hs_ename(s, HE_INTERNAL, "[constant]", ir_kgc(ir));
    if (irt_is64(ir->t) && ir->o != IR_KNULL) ref++;
  }
  if (T->link) hs_ename(s, HE_INTERNAL, "[link]", traceref(J, T->link));
  if (T->nextroot) hs_ename(s, HE_INTERNAL, "[next root]",
			    traceref(J, T->nextroot));
  if (T->nextside) hs_ename(s, HE_INTERNAL, "[next side]",
			    traceref(J, T->nextside));
  hs_ename(s, HE_INTERNAL, "[prototype]", gcref(T->startpt));
}
#endif

/* Slots [LO, HI) of a frame of FN; NEXT the frame above it (NULL: top). */
static void hs_frameslots(HSnap *s, GCfunc *fn, cTValue *next, cTValue *lo,
			  cTValue *hi)
{
  char buf[2*PERF_NAMESZ], lbuf[PERF_NAMESZ];
  const char *fname = s->counting ? "" : hs_funcname(s, fn, lbuf, sizeof(lbuf));
  const BCIns *ip = NULL;
  cTValue *o;
  if (isluafunc(fn) && next && frame_islua(next)) {
    GCproto *pt = funcproto(fn);
    BCPos pos = proto_bcpos(pt, frame_pc(next)) - 1;
    if (pos < pt->sizebc) ip = proto_bc(pt) + pos;
  }
  for (o = lo; o < hi; o++) {
    const char *name = NULL;
    if (!tvisgcv(o)) continue;
    if (!s->counting) {
      const char *kind = ip ? lj_debug_slotname(funcproto(fn), ip,
					       (BCReg)(o - lo), &name) : NULL;
      if (!kind || strcmp(kind, "local")) name = NULL;
      if (name)
	snprintf(buf, sizeof(buf), "local %s in %s", name, fname);
      else
	snprintf(buf, sizeof(buf), "[slot %u] in %s", (unsigned)(o - lo), fname);
    }
    hs_ename(s, name ? HE_CONTEXT : HE_INTERNAL, s->counting ? "" : buf, gcV(o));
  }
}

/* A thread's stack by frame: each frame's function and slots, named by
** function and local where the debug info knows them.
*/
static void hs_threadedges(HSnap *s, lua_State *th)
{
  cTValue *bot = tvref(th->stack) + LJ_FR2, *frame, *next = NULL;
  cTValue *hi = th->top;
  hs_ename(s, HE_INTERNAL, "[env]", tabref(th->env));
  for (frame = th->base - 1; frame > bot; ) {
    GCobj *fo = frame_gc(frame);
    cTValue *lo = frame + 1;
    if (next && frame_isvarg(next)) {  /* The varargs below NEXT's copy. */
      cTValue *o;
      for (o = lo; o < hi; o++) hs_etv(s, HE_INTERNAL, "[vararg]", o);
    } else if (fo != obj2gco(th) && fo->gch.gct == ~LJ_TFUNC) {
      char buf[PERF_NAMESZ + 16], lbuf[PERF_NAMESZ];
      if (!s->counting)
	snprintf(buf, sizeof(buf), "[frame] %s",
		 hs_funcname(s, &fo->fn, lbuf, sizeof(lbuf)));
      hs_ename(s, HE_INTERNAL, s->counting ? "" : buf, fo);
      hs_frameslots(s, &fo->fn, next, lo, hi);
    }
    hi = frame - LJ_FR2;
    next = frame;
    frame = frame_prev(frame);
  }
  for (frame = tvref(th->stack) + 1 + LJ_FR2; frame < hi; frame++)
    hs_etv(s, HE_INTERNAL, "[stack]", frame);
}

/* Every edge of O (the sink counts or writes them). */
static void hs_edges(HSnap *s, GCobj *o)
{
  switch (o->gch.gct) {
  case ~LJ_TTAB: hs_tabedges(s, gco2tab(o)); break;
  case ~LJ_TFUNC: hs_funcedges(s, gco2func(o)); break;
  case ~LJ_TPROTO: hs_protoedges(s, gco2pt(o)); break;
  case ~LJ_TUPVAL: hs_etv(s, HE_INTERNAL, "value", uvval(gco2uv(o))); break;
  case ~LJ_TTHREAD: hs_threadedges(s, gco2th(o)); break;
  case ~LJ_TUDATA:
    if (tabref(o->ud.metatable))
      hs_ename(s, HE_INTERNAL, "[metatable]", tabref(o->ud.metatable));
    hs_ename(s, HE_INTERNAL, "[env]", tabref(o->ud.env));
    break;
#if LJ_HASJIT
  case ~LJ_TTRACE: hs_traceedges(s, (GCtrace *)o); break;
#endif
  default: break;
  }
}

static const char *hs_gcrootname(int i, char *buf, size_t sz)
{
  if (i < GCROOT_BASEMT) return "[metamethod name]";
  if (i < GCROOT_IO_INPUT) {
    snprintf(buf, sz, "[metatable of %s]",
	     lj_obj_itypename[i - GCROOT_BASEMT]);
    return buf;
  }
  return i == GCROOT_IO_INPUT ? "[io input]" : "[io output]";
}

/* Edges of synthetic node ID to the objects it stands for. */
static void hs_rootedges(HSnap *s, int id)
{
  global_State *g = s->g;
  int i;
  switch (id) {
  case HS_ROOT:
    if (s->counting) { s->nedge += 5; break; }
    for (i = HS_GCROOTS; i <= HS_INTERNAL; i++)
      hs_ewrite(s, HE_ELEMENT, (uint64_t)i, i);
    break;
  case HS_GCROOTS: {
    HSIter it;
    GCobj *o;
    hs_ename(s, HE_PROPERTY, "main thread", mainthread(g));
    hs_etv(s, HE_PROPERTY, "registry", &g->registrytv);
    hs_ename(s, HE_PROPERTY, "globals", tabref(mainthread(g)->env));
    for (i = 0; i < GCROOT_MAX; i++)
      if (gcref(g->gcroot[i])) {
	char buf[64];
	hs_ename(s, HE_INTERNAL, hs_gcrootname(i, buf, sizeof(buf)),
		 gcref(g->gcroot[i]));
      }
    hs_iterinit(s, &it);  /* Never swept: reserved words, C type names... */
    while ((o = hs_next(s, &it)) != NULL)
      if (o->gch.gct == ~LJ_TSTR && (o->gch.marked & LJ_GC_FIXED))
	hs_ename(s, HE_INTERNAL, "[fixed string]", o);
    break;
  }
  case HS_RUNNING: {
    HSIter it;
    GCobj *o;
    hs_ename(s, HE_PROPERTY, "current", s->L);
    hs_iterinit(s, &it);
    while ((o = hs_next(s, &it)) != NULL) {
      if (o->gch.gct == ~LJ_TTHREAD && &o->th != s->L &&
	  &o->th != mainthread(g) && cframe_raw(o->th.cframe))
	hs_ename(s, HE_PROPERTY, "resumed another", o);
    }
    break;
  }
  case HS_OPENUV: {
    GCupval *uv;
    for (uv = uvnext(&g->uvhead); uv != &g->uvhead; uv = uvnext(uv))
      hs_ename(s, HE_WEAK, "open upvalue", uv);
    break;
  }
  case HS_FINALIZE: {
    GCobj *o = gcref(g->gc.mmudata);
    if (o) {
      GCobj *u = o;
      do { u = gcnext(u); hs_ename(s, HE_PROPERTY, "[__gc pending]", u); }
      while (u != o);
    }
    break;
  }
  case HS_INTERNAL:
    if (s->counting) { s->nedge += HS_NSYN - HS_GG; break; }
    for (i = HS_GG; i < HS_NSYN; i++)
      hs_ewrite(s, HE_INTERNAL, (uint64_t)i, i);
    break;
  default: break;
  }
}

/* -- Writing -------------------------------------------------------------- */

static const char hs_meta[] =
  "{\"snapshot\":{\"meta\":{"
  "\"node_fields\":[\"type\",\"name\",\"id\",\"self_size\",\"edge_count\","
  "\"trace_node_id\",\"detachedness\"],"
  "\"node_types\":[[\"hidden\",\"array\",\"string\",\"object\",\"code\","
  "\"closure\",\"regexp\",\"number\",\"native\",\"synthetic\","
  "\"concatenated string\",\"sliced string\",\"symbol\",\"bigint\","
  "\"object shape\"],\"string\",\"number\",\"number\",\"number\",\"number\","
  "\"number\"],"
  "\"edge_fields\":[\"type\",\"name_or_index\",\"to_node\"],"
  "\"edge_types\":[[\"context\",\"element\",\"property\",\"internal\","
  "\"hidden\",\"shortcut\",\"weak\"],\"string_or_number\",\"node\"],"
  "\"trace_function_info_fields\":[\"function_id\",\"name\",\"script_name\","
  "\"script_id\",\"line\",\"column\"],"
  "\"trace_node_fields\":[\"id\",\"function_info_index\",\"count\",\"size\","
  "\"children\"],"
  "\"sample_fields\":[\"timestamp_us\",\"last_assigned_id\"],"
  "\"location_fields\":[\"object_index\",\"script_id\",\"line\",\"column\"]},";

static void hs_node(HSnap *s, size_t i, int type, uint64_t name, uint64_t id,
		    uint64_t size, uint32_t nedge)
{
  HSOut *o = s->out;
  if (i) hs_put(o, ",", 1);
  hs_putu(o, (uint64_t)type); hs_put(o, ",", 1);
  hs_putu(o, name); hs_put(o, ",", 1);
  hs_putu(o, id); hs_put(o, ",", 1);
  hs_putu(o, size); hs_put(o, ",", 1);
  hs_putu(o, nedge); hs_put(o, ",0,0\n", 5);
  s->total += size;
}

/* An object's node id: its address / 8, in 32 bits (DevTools and memlab
** keep ids as such). Unique within a heap under 32 GiB of address space;
** the roots' small odd ids are below any object's.
*/
static uint64_t hs_id(GCobj *o)
{
  return (uint32_t)((uintptr_t)o >> 3);
}

static uint32_t hs_count(HSnap *s, GCobj *o, int root)
{
  s->counting = 1;
  s->nedge = 0;
  if (o) hs_edges(s, o); else hs_rootedges(s, root);
  s->counting = 0;
  return s->nedge;
}

static void hs_writeall(HSnap *s)
{
  HSOut *o = s->out;
  HSIter it;
  GCobj *ob;
  size_t i;
  uint64_t nedges = 0;
  int r;
  /* Edge counts first: the header carries the totals. */
  for (r = 0; r < HS_NSYN; r++) nedges += hs_count(s, NULL, r);
  hs_iterinit(s, &it);
  while ((ob = hs_next(s, &it)) != NULL) nedges += hs_count(s, ob, 0);
  hs_puts(o, hs_meta);
  hs_puts(o, "\"node_count\":"); hs_putu(o, s->nnode);
  hs_puts(o, ",\"edge_count\":"); hs_putu(o, nedges);
  hs_puts(o, ",\"trace_function_count\":0},\n\"nodes\":[");
  for (r = 0; r < HS_NSYN; r++)
    hs_node(s, (size_t)r, r >= HS_GG ? HN_NATIVE : HN_SYNTHETIC, (uint64_t)r,
	    (uint64_t)(2*r + 1), hs_internalsize(s, r), hs_count(s, NULL, r));
  hs_iterinit(s, &it);
  while (!s->nomem && (ob = hs_next(s, &it)) != NULL)
    hs_node(s, HS_NSYN + it.i, hs_nodetype(ob),
	    hs_nodename(s, ob, HS_NSYN + it.i), hs_id(ob), hs_selfsize(s, ob),
	    hs_count(s, ob, 0));
  hs_puts(o, "],\n\"edges\":[");
  for (r = 0; r < HS_NSYN; r++) hs_rootedges(s, r);
  hs_iterinit(s, &it);
  while (!s->nomem && (ob = hs_next(s, &it)) != NULL) hs_edges(s, ob);
  hs_puts(o, "],\n\"trace_function_infos\":[],\"trace_tree\":[],"
	  "\"samples\":[],\"locations\":[],\n\"strings\":[");
  for (r = 0; r < HS_NSYN; r++) {
    hs_putjs(o, hs_rootnames[r], strlen(hs_rootnames[r]));
    hs_put(o, ",\n", 2);
  }
  hs_iterinit(s, &it);
  while ((ob = hs_next(s, &it)) != NULL) {
    if (ob->gch.gct == ~LJ_TSTR)
      hs_putjs(o, strdata(&ob->str),
	       ob->str.len > HS_STRMAX ? HS_STRMAX : ob->str.len);
    else
      hs_put(o, "\"\"", 2);
    hs_put(o, ",\n", 2);
  }
  for (i = 0; i < s->nname; i++) {
    hs_putjs(o, s->namev[i]->s, s->namev[i]->len);
    hs_put(o, ",\n", 2);
  }
  hs_puts(o, "\"\"]}\n");
  hs_flush(o);
}

static void hs_freeset(LJPSet *set)
{
  size_t i;
  for (i = 0; set->v && i <= set->mask; i++)
    if (set->v[i].h) {
      HSKeyName *e = (HSKeyName *)set->v[i].p;
      free((void *)e->name);
      free(e);
    }
  free(set->v);
}

static void hs_free(HSnap *s)
{
  size_t i;
  for (i = 0; i < s->nname; i++) free(s->namev[i]);
  free(s->namev);
  free(s->names.v);
  hs_freeset(&s->classes);
  hs_freeset(&s->fnames);
  hs_freeindex(s);
}

long lj_heapsnap_write(lua_State *L, const char *path, char *err, size_t errsz)
{
  HSnap s;
  HSOut *out;
  char tmp[4096];
  long n = -1;
  uint8_t gcstate = G(L)->gc.state;
  if (!path || !*path || strlen(path) + 5 > sizeof(tmp)) {
    snprintf(err, errsz, "heapsnapshot: bad path");
    return -1;
  }
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  if (!(out = (HSOut *)malloc(sizeof(HSOut)))) {
    snprintf(err, errsz, "heapsnapshot: out of memory");
    return -1;
  }
  out->n = 0; out->err = 0;
  out->fd = open(tmp, O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0644);
  if (out->fd < 0) {
    snprintf(err, errsz, "heapsnapshot: %s: %s", tmp, strerror(errno));
    free(out);
    return -1;
  }
  memset(&s, 0, sizeof(s));
  s.g = G(L); s.L = L; s.out = out;
  hs_collect(&s);
  if (!s.nomem) hs_classes(&s);
  if (!s.nomem) hs_fnames(&s);
  if (!s.nomem) hs_writeall(&s);
  /* check_exp: every tree has it (lj_assertL came in 2020). */
  (void)check_exp(G(L)->gc.state == gcstate, 0);  /* GC state kept. */
  UNUSED(gcstate);
  if (close(out->fd) != 0 && !out->err) out->err = errno;
  if (s.nomem)
    snprintf(err, errsz, "heapsnapshot: %s: out of memory", path);
  else if (out->err)
    snprintf(err, errsz, "heapsnapshot: %s: %s", tmp, strerror(out->err));
  else if (rename(tmp, path) != 0)
    snprintf(err, errsz, "heapsnapshot: %s: %s", path, strerror(errno));
  else
    n = (long)s.nnode;
  if (n < 0) unlink(tmp);
  hs_free(&s);
  free(out);
  return n;
}

void lj_heapsnap_remote(lua_State *L, uint32_t seq)
{
  char path[4096], err[256];
  const char *dir = getenv("LUAJIT_PERF_DIR");
  if (!dir || !*dir) dir = "/tmp";
  snprintf(path, sizeof(path), "%s/ljperf-heap-%d-%u-%lx.heapsnapshot", dir,
	   (int)getpid(), (unsigned)seq, (unsigned long)(uintptr_t)G(L));
  if (lj_heapsnap_write(L, path, err, sizeof(err)) < 0)
    fprintf(stderr, "ljperf: remote %s\n", err);
}

/* jit.perf.heapsnapshot(path): the number of nodes, or nil and a message. */
static int hs_lsnapshot(lua_State *L)
{
  char err[256];
  const char *path = luaL_checkstring(L, 1);
  long n = lj_heapsnap_write(L, path, err, sizeof(err));
  if (n < 0) {
    lua_pushnil(L);
    lua_pushstring(L, err);
    return 2;
  }
  lua_pushnumber(L, (lua_Number)n);
  return 1;
}

void lj_heapsnap_open(lua_State *L)
{
  lua_pushcfunction(L, hs_lsnapshot);
  lua_setfield(L, -2, "heapsnapshot");
}

LUA_API int luaJIT_perf_heapsnapshot(lua_State *L, const char *path)
{
  char err[256];
  if (lj_heapsnap_write(L, path, err, sizeof(err)) >= 0) return 0;
  fprintf(stderr, "luajit: %s\n", err);
  return -1;
}

#endif
