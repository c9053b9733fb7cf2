/*
** ljperf emitter: /tmp/perf-PID.map writer (called by emit.c).
**
** Map invariants:
** - one "START SIZE NAME\n" line (hex, no 0x) per new (addr, size, name),
**   written with one write(2); an identical triple is never written twice
**   to the same file (hash set M.set, kept for as long as the file is ours);
** - after a failed or short write the file is cut back to its last complete
**   line (perf would parse a partial "START SIZ" as a wrong entry);
** - the file is created by ljp_create(): no symlinks, no foreign files.
*/
#include "ljperf_emit_common.h"

#include <inttypes.h>

/* -- Map writer ------------------------------------------------------------ */

typedef struct MapEnt { uint64_t addr, size, hash; char *name; } MapEnt;

static struct {
  LJPFile f;		/* off: end of the last complete line */
  char path[64];
  LJPBuf line;		/* scratch for one line */
  LJPBuf pend;		/* lines of a batch, not yet written */
  MapEnt *set;		/* open addressing, size mask+1 (power of 2) or NULL */
  size_t mask, count;
} M = { .f.fd = -1 };

static void map_set_free(void)
{
  if (M.set)
    for (size_t i = 0; i <= M.mask; i++) free(M.set[i].name);
  free(M.set);
  M.set = NULL; M.mask = M.count = 0;
}

/* Returns the slot for (addr, size, name, h): a match or an empty slot. */
static MapEnt *map_set_find(uint64_t addr, uint64_t size, const char *name,
			    uint64_t h)
{
  for (size_t i = h & M.mask;; i = (i + 1) & M.mask) {
    MapEnt *e = &M.set[i];
    if (!e->name ||
	(e->hash == h && e->addr == addr && e->size == size && !strcmp(e->name, name)))
      return e;
  }
}

/* Keeps the load factor <= 1/2. Returns -1 on allocation failure. */
static int map_set_grow(void)
{
  if (M.set && (M.count + 1) * 2 <= M.mask + 1) return 0;
  size_t n = M.set ? (M.mask + 1) * 2 : 1024;
  MapEnt *old = M.set, *set = calloc(n, sizeof(MapEnt));
  size_t oldn = M.set ? M.mask + 1 : 0;
  if (!set) return -1;
  M.set = set; M.mask = n - 1;
  for (size_t i = 0; i < oldn; i++)
    if (old[i].name)
      *map_set_find(old[i].addr, old[i].size, old[i].name, old[i].hash) = old[i];
  free(old);
  return 0;
}

static void map_fail(const char *why, int err)
{
  char eb[128];
  if (M.f.fd >= 0) (void)ftruncate(M.f.fd, M.f.off);
  ljp_report("perf map disabled", M.path, why ? why : ljp_strerror(err, eb, sizeof(eb)));
  if (M.f.fd >= 0) close(M.f.fd);
  M.f.fd = -1;
  M.f.failed = 1;
}

int ljp_map_open(pid_t pid)
{
  const char *why = NULL;
  if (M.f.fd >= 0) return 0;
  if (ljp_file_forpid(&M.f, pid))  /* another process's state: start over */
    map_set_free();
  if (M.f.failed) return -1;
  snprintf(M.path, sizeof(M.path), "/tmp/perf-%d.map", (int)pid);
  int fresh = ljp_file_open(&M.f, M.path, O_WRONLY, 0, &why);
  if (fresh < 0) { map_fail(why, errno); return -1; }
  if (fresh) map_set_free();  /* new, empty file: nothing written yet */
  return 0;
}

int ljp_map_isopen(void) { return M.f.fd >= 0; }

void ljp_map_flush(void)
{
  if (M.f.fd >= 0 && ljp_flush(M.f.fd, &M.pend, &M.f.off) < 0) map_fail(NULL, errno);
}

void ljp_map_load(uint64_t addr, uint64_t size, const char *name, int defer)
{
  char head[40];
  int hn = snprintf(head, sizeof(head), "%" PRIx64 " %" PRIx64 " ", addr, size);
  M.line.len = 0;
  if (ljp_buf_reserve(&M.line, (size_t)hn) < 0) goto nomem;
  memcpy(M.line.p, head, (size_t)hn);
  M.line.len = (size_t)hn;
  if (ljp_buf_name(&M.line, name) < 0) goto nomem;
  const char *nm = M.line.p + hn;  /* sanitised name, NUL-terminated */
  uint64_t h = ljp_hash(ljp_hash(LJP_HASH_SEED, &addr, 8), &size, 8);
  h = ljp_hash(h, nm, strlen(nm));
  if (map_set_grow() < 0) goto nomem;
  MapEnt *e = map_set_find(addr, size, nm, h);
  if (e->name) return;  /* already in the file */
  size_t nl = strlen(nm) + 1;
  char *copy = malloc(nl);
  if (!copy) goto nomem;
  memcpy(copy, nm, nl);
  e->addr = addr; e->size = size; e->hash = h; e->name = copy;
  M.count++;
  M.line.p[M.line.len - 1] = '\n';  /* NUL -> newline: the full line */
  if (ljp_put(M.f.fd, &M.pend, &M.f.off, defer, M.line.p, M.line.len, NULL, 0) < 0)
    map_fail(NULL, errno);
  return;
nomem:
  map_fail(NULL, ENOMEM);
}

void ljp_map_close(void)
{
  if (M.f.fd >= 0) close(M.f.fd);
  M.f.fd = -1;
  ljp_buf_free(&M.line);
  ljp_buf_free(&M.pend);
  /* M.set stays: it describes the file, which a reopen appends to. */
}

void ljp_map_abandon(void)
{
  if (M.f.fd >= 0) close(M.f.fd);  /* the parent's file: no writes */
  M.f.fd = -1;
  ljp_buf_free(&M.line);
  ljp_buf_free(&M.pend);
  map_set_free();
  M.f.pid = 0; M.f.failed = 0; M.f.created = 0;
}
