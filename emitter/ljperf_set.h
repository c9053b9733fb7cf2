/*
** ljperf emitter: the one hash set of the emitter (perf map lines, jitdump
** code hashes, prototype names, prototypes with a parent).
**
** Open addressing, linear probing, load factor <= 1/2, never shrinks, no
** removal. A slot holds a hash (0: empty slot, so ljp_hash_key never
** returns 0) and the caller's pointer (may be NULL when the hash alone is
** the key). Entries with equal hashes are told apart by the caller's EQ.
** Not thread-safe: callers hold their own lock.
*/
#ifndef LJPERF_SET_H
#define LJPERF_SET_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A 64-bit hash (not security relevant), 8 bytes per step: code bytes of
** every load go through it. Start from LJP_HASH_SEED, chain parts, end with
** ljp_hash_key. Parts of different lengths hash differently (the length of
** a short tail is mixed in). */
#define LJP_HASH_SEED	0xcbf29ce484222325ull

static inline uint64_t ljp_hash_mix(uint64_t h, uint64_t w)
{
  h = (h ^ w) * 0x9e3779b97f4a7c15ull;
  return h ^ (h >> 29);
}

static inline uint64_t ljp_hash(uint64_t h, const void *p, size_t n)
{
  const unsigned char *s = (const unsigned char *)p;
  uint64_t w;
  for (; n >= 8; s += 8, n -= 8) {
    memcpy(&w, s, 8);
    h = ljp_hash_mix(h, w);
  }
  if (n) {
    w = (uint64_t)n << 56;
    memcpy(&w, s, n);  /* little-endian: bytes 0..n-1, byte 7 keeps n */
    h = ljp_hash_mix(h, w);
  }
  return h;
}

static inline uint64_t ljp_hash_key(uint64_t h) { return h ? h : 1; }

static inline uint64_t ljp_hash_ptr(const void *p)
{
  uintptr_t u = (uintptr_t)p;
  return ljp_hash_key(ljp_hash(LJP_HASH_SEED, &u, sizeof(u)));
}

typedef struct LJPSlot { uint64_t h; void *p; } LJPSlot;
typedef struct LJPSet { LJPSlot *v; size_t mask, n; } LJPSet;  /* {0}: empty */

/* Is the caller's entry P the one KEY names? NULL: the hash decides. */
typedef int (*LJPSetEq)(const void *p, const void *key);

/* The slot of the entry with hash H that EQ accepts for KEY, or the empty
** slot it would take (then ljp_set_fill it). S must have slots. */
static inline LJPSlot *ljp_set_slot(LJPSet *s, uint64_t h, LJPSetEq eq,
				    const void *key)
{
  for (size_t i = h & s->mask;; i = (i + 1) & s->mask) {
    LJPSlot *e = &s->v[i];
    if (!e->h || (e->h == h && (!eq || eq(e->p, key)))) return e;
  }
}

/* The entry's slot, or NULL if absent (S may be empty). */
static inline LJPSlot *ljp_set_find(LJPSet *s, uint64_t h, LJPSetEq eq,
				    const void *key)
{
  LJPSlot *e;
  if (!s->v) return NULL;
  e = ljp_set_slot(s, h, eq, key);
  return e->h ? e : NULL;
}

/* Makes room for one more entry. 0, or -1 out of memory (S unchanged). */
static inline int ljp_set_reserve(LJPSet *s)
{
  size_t n, oldn = s->v ? s->mask + 1 : 0;
  LJPSlot *old = s->v, *v;
  if (s->v && (s->n + 1) * 2 <= oldn) return 0;
  n = oldn ? oldn * 2 : 256;
  v = (LJPSlot *)calloc(n, sizeof(LJPSlot));
  if (!v) return -1;
  s->v = v; s->mask = n - 1;
  for (size_t i = 0; i < oldn; i++)
    if (old[i].h) {  /* equal hashes may be distinct entries: any empty slot */
      size_t j = old[i].h & s->mask;
      while (v[j].h) j = (j + 1) & s->mask;
      v[j] = old[i];
    }
  free(old);
  return 0;
}

/* Fills E, an empty slot ljp_set_slot returned after ljp_set_reserve. */
static inline void ljp_set_fill(LJPSet *s, LJPSlot *e, uint64_t h, void *p)
{
  e->h = h; e->p = p;
  s->n++;
}

/* Empties S (the entries' pointers are the owner's). */
static inline void ljp_set_free(LJPSet *s)
{
  free(s->v);
  s->v = NULL; s->mask = s->n = 0;
}

#endif
