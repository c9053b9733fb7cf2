/*
** ljperf emitter: /tmp/perf-PID.map writer (called by emit.c).
**
** Map invariants:
** - one "START SIZE NAME\n" line (hex, no 0x) per new (addr, size, name),
**   written with one write(2); an identical triple is never written twice
**   to the same file (ljp_map.set, kept for as long as the file is ours);
** - after a failed or short write the file is cut back to its last complete
**   line (perf would parse a partial "START SIZ" as a wrong entry);
** - the file is created by ljp_create(): no symlinks, no foreign files.
*/
#include "ljperf_emit_common.h"

/* -- Map writer ------------------------------------------------------------ */

/* A line of the file (the dedup set's entry), and the key to find one. */
typedef struct LJPMapLine { uint64_t addr, size; char name[]; } LJPMapLine;
typedef struct LJPMapKey { uint64_t addr, size; const char *name; } LJPMapKey;

/* The set's lines are allocated from blocks (one malloc per 64 KiB, not
** per line) and freed with the set. */
#define LJP_MAP_BLOCK	65536
typedef struct LJPMapBlock {
  struct LJPMapBlock *next;
  size_t used, size;
  char mem[];		/* 8-byte aligned: after a pointer and two sizes */
} LJPMapBlock;

static struct {
  LJPFile f;		/* off: end of the last complete line */
  char path[64];
  LJPBuf line;		/* scratch for one line */
  LJPBuf pend;		/* lines of a batch, not yet written */
  LJPSet set;		/* LJPMapLine of every line in the file */
  LJPMapBlock *blocks;	/* where the set's lines live, newest first */
} ljp_map = { .f.fd = -1 };

static LJPMapLine *ljp_map_newline(size_t n)
{
  LJPMapBlock *b = ljp_map.blocks;
  n = (n + 7) & ~(size_t)7;
  if (!b || b->size - b->used < n) {
    size_t sz = n > LJP_MAP_BLOCK ? n : LJP_MAP_BLOCK;
    if (!(b = (LJPMapBlock *)malloc(sizeof(LJPMapBlock) + sz))) return NULL;
    b->used = 0; b->size = sz;
    b->next = ljp_map.blocks;
    ljp_map.blocks = b;
  }
  b->used += n;
  return (LJPMapLine *)(b->mem + b->used - n);
}

/* Forgets every line: the file is new or not ours. */
static void ljp_map_forget(void)
{
  ljp_set_free(&ljp_map.set);
  while (ljp_map.blocks) {
    LJPMapBlock *b = ljp_map.blocks;
    ljp_map.blocks = b->next;
    free(b);
  }
}

static int ljp_map_eq(const void *p, const void *key)
{
  const LJPMapLine *l = (const LJPMapLine *)p;
  const LJPMapKey *k = (const LJPMapKey *)key;
  return l->addr == k->addr && l->size == k->size && !strcmp(l->name, k->name);
}

static void ljp_map_fail(const char *why, int err)
{
  char eb[128];
  if (ljp_map.f.fd >= 0) (void)ftruncate(ljp_map.f.fd, ljp_map.f.off);
  ljp_report("perf map disabled", ljp_map.path,
	     why ? why : ljp_strerror(err, eb, sizeof(eb)));
  if (ljp_map.f.fd >= 0) close(ljp_map.f.fd);
  ljp_map.f.fd = -1;
  ljp_map.f.failed = 1;
}

int ljp_map_open(pid_t pid)
{
  const char *why = NULL;
  if (ljp_map.f.fd >= 0) return 0;
  if (ljp_file_forpid(&ljp_map.f, pid))  /* another process's: start over */
    ljp_map_forget();
  if (ljp_map.f.failed) return -1;
  snprintf(ljp_map.path, sizeof(ljp_map.path), "/tmp/perf-%d.map", (int)pid);
  int fresh = ljp_file_open(&ljp_map.f, ljp_map.path, O_WRONLY, 0, &why);
  if (fresh < 0) { ljp_map_fail(why, errno); return -1; }
  if (fresh) ljp_map_forget();  /* new, empty file */
  return 0;
}

int ljp_map_isopen(void) { return ljp_map.f.fd >= 0; }

void ljp_map_flush(void)
{
  if (ljp_map.f.fd >= 0 && ljp_flush(ljp_map.f.fd, &ljp_map.pend, &ljp_map.f.off) < 0)
    ljp_map_fail(NULL, errno);
}

void ljp_map_load(uint64_t addr, uint64_t size, const LJPName *name, int defer)
{
  LJPBuf *b = &ljp_map.line;
  char head[40];
  size_t hn = ljp_hex(head, addr);
  head[hn++] = ' ';
  hn += ljp_hex(head + hn, size);
  head[hn++] = ' ';
  b->len = 0;
  if (ljp_buf_reserve(b, hn) < 0) goto nomem;
  memcpy(b->p, head, hn);
  b->len = hn;
  if (ljp_buf_name(b, name) < 0) goto nomem;
  LJPMapKey key = { addr, size, b->p + hn };  /* cleaned name, NUL-terminated */
  size_t nl = name->n + 1;
  uint64_t h = ljp_hash(ljp_hash(LJP_HASH_SEED, &addr, 8), &size, 8);
  h = ljp_hash_key(ljp_hash(h, key.name, nl));
  if (ljp_set_reserve(&ljp_map.set) < 0) goto nomem;
  LJPSlot *e = ljp_set_slot(&ljp_map.set, h, ljp_map_eq, &key);
  if (e->h) return;  /* already in the file */
  LJPMapLine *l = ljp_map_newline(sizeof(LJPMapLine) + nl);
  if (!l) goto nomem;
  l->addr = addr; l->size = size;
  memcpy(l->name, key.name, nl);
  ljp_set_fill(&ljp_map.set, e, h, l);
  b->p[b->len - 1] = '\n';  /* NUL -> newline: the full line */
  if (ljp_put(ljp_map.f.fd, &ljp_map.pend, &ljp_map.f.off, defer,
	      b->p, b->len, NULL, 0) < 0)
    ljp_map_fail(NULL, errno);
  return;
nomem:
  ljp_map_fail(NULL, ENOMEM);
}

void ljp_map_close(void)
{
  if (ljp_map.f.fd >= 0) close(ljp_map.f.fd);
  ljp_map.f.fd = -1;
  ljp_buf_free(&ljp_map.line);
  ljp_buf_free(&ljp_map.pend);
  /* ljp_map.set stays: it describes the file, which a reopen appends to. */
}

void ljp_map_abandon(void)
{
  if (ljp_map.f.fd >= 0) close(ljp_map.f.fd);  /* the parent's: no writes */
  ljp_map.f.fd = -1;
  ljp_buf_free(&ljp_map.line);
  ljp_buf_free(&ljp_map.pend);
  ljp_map_forget();
  ljp_map.f.pid = 0; ljp_map.f.failed = 0; ljp_map.f.created = 0;
}
