/*
** Test helper: a minimal jitdump reader (independent of ljperf/jitdump.py,
** so the two cross-check each other) plus small file utilities.
*/
#ifndef JD_READ_H
#define JD_READ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct JDEntry { uint64_t addr; uint32_t line; const char *file; } JDEntry;

typedef struct JDRec {
  uint32_t id, size;
  uint64_t ts;
  size_t off;
  /* CODE_LOAD */
  uint32_t pid, tid;
  uint64_t addr, csize, index;
  const char *name;
  const uint8_t *code;
  /* DEBUG_INFO (entries point into the file buffer) */
  size_t nent;
  JDEntry *ent;
} JDRec;

typedef struct JD {
  uint8_t *buf;
  size_t len;
  uint32_t magic, version, hsize, mach, pid;
  uint64_t ts, flags;
  JDRec *rec;
  size_t nrec, nload, ndebug, nclose;
  int truncated;	/* trailing bytes that are not a complete record */
} JD;

/* Reads a whole file; returns NULL if it cannot be opened. */
static inline uint8_t *slurp(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  uint8_t *b = malloc(cap);
  for (size_t r; b && (r = fread(b + n, 1, cap - n, f)) > 0;) {
    n += r;
    if (n == cap) b = realloc(b, cap *= 2);
  }
  fclose(f);
  *len = n;
  return b;
}

static inline uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* Parses PATH. Returns 0, or -1 if unreadable or the header is bad. */
static inline int jd_load(JD *jd, const char *path)
{
  memset(jd, 0, sizeof(*jd));
  jd->buf = slurp(path, &jd->len);
  if (!jd->buf || jd->len < 40) return -1;
  jd->magic = rd32(jd->buf); jd->version = rd32(jd->buf + 4);
  jd->hsize = rd32(jd->buf + 8); jd->mach = rd32(jd->buf + 12);
  jd->pid = rd32(jd->buf + 20); jd->ts = rd64(jd->buf + 24); jd->flags = rd64(jd->buf + 32);
  if (jd->magic != 0x4A695444u || jd->hsize != 40) return -1;
  size_t cap = 0;
  for (size_t off = jd->hsize; off < jd->len;) {
    if (jd->len - off < 16) { jd->truncated = 1; break; }
    JDRec r;
    memset(&r, 0, sizeof(r));
    r.id = rd32(jd->buf + off); r.size = rd32(jd->buf + off + 4); r.ts = rd64(jd->buf + off + 8);
    r.off = off;
    if (r.size < 16 || off + r.size > jd->len) { jd->truncated = 1; break; }
    const uint8_t *p = jd->buf + off + 16;
    if (r.id == 0) {
      r.pid = rd32(p); r.tid = rd32(p + 4); r.addr = rd64(p + 16); r.csize = rd64(p + 24);
      r.index = rd64(p + 32); r.name = (const char *)p + 40;
      r.code = jd->buf + off + r.size - r.csize;
      jd->nload++;
    } else if (r.id == 2) {
      r.addr = rd64(p); r.nent = rd64(p + 8);
      r.ent = calloc(r.nent ? r.nent : 1, sizeof(JDEntry));
      const uint8_t *q = p + 16;
      for (size_t i = 0; i < r.nent; i++) {
	r.ent[i].addr = rd64(q); r.ent[i].line = rd32(q + 8); r.ent[i].file = (const char *)q + 16;
	q += 16 + strlen((const char *)q + 16) + 1;
      }
      jd->ndebug++;
    } else if (r.id == 3) {
      jd->nclose++;
    }
    if (jd->nrec == cap) jd->rec = realloc(jd->rec, (cap = cap ? cap * 2 : 64) * sizeof(JDRec));
    jd->rec[jd->nrec++] = r;
    off += r.size;
  }
  return 0;
}

static inline void jd_free(JD *jd)
{
  for (size_t i = 0; i < jd->nrec; i++) free(jd->rec[i].ent);
  free(jd->rec);
  free(jd->buf);
  memset(jd, 0, sizeof(*jd));
}

/* Returns the Nth CODE_LOAD record (0-based) or NULL. */
static inline const JDRec *jd_load_n(const JD *jd, size_t n)
{
  for (size_t i = 0; i < jd->nrec; i++)
    if (jd->rec[i].id == 0 && n-- == 0) return &jd->rec[i];
  return NULL;
}

/* The DEBUG_INFO just before the CODE_LOAD R, or NULL. */
static inline const JDRec *jd_debug_of(const JD *jd, const JDRec *r)
{
  size_t i = (size_t)(r - jd->rec);
  return (i > 0 && jd->rec[i - 1].id == 2 && jd->rec[i - 1].addr == r->addr) ? &jd->rec[i - 1] : NULL;
}

#endif
