/*
** ljperf emitter: DIR/jit-PID.dump writer (perf jitdump format, version 1).
**
** Invariants:
** - The file always holds a valid prefix: header, then whole records. Each
**   load is ONE writev(2) of [DEBUG_INFO] + CODE_LOAD (so a DEBUG_INFO is
**   never separated from its CODE_LOAD); after a failed or short write the
**   file is truncated back to the last complete record and the output is
**   disabled with one stderr line.
** - Timestamps are CLOCK_MONOTONIC (perf record -k mono), taken under the
**   lock, so they never decrease through the file; code_index increments
**   by one per CODE_LOAD.
** - DEBUG_INFO entries lie in [code_addr, code_addr+code_size), ascending,
**   plus a closing entry at code_addr+code_size (perf gives no line to the
**   range after the last entry).
** - No two CODE_LOADs of a file carry identical code bytes: a repeat gets
**   its last (up to 4) bytes XOR-salted, because several perf versions
**   derive the jitted-*.so build-id from the bytes alone and then merge
**   such DSOs, so one name and line table would win for all of them.
** - While open, the first page is mmapped PROT_READ|PROT_EXEC, MAP_PRIVATE:
**   that mmap event is how perf record/inject find the dump.
*/
#include "ljperf_emit_common.h"

#include <elf.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>

#define JIT_MAGIC	0x4A695444u	/* "JiTD" */
#define JIT_VERSION	1u
#define JIT_CODE_LOAD	0u
#define JIT_CODE_DEBUG_INFO 2u
#define JIT_CODE_CLOSE	3u
#define JIT_HEADER_SIZE	40u	/* magic..flags */
#define JIT_PREFIX_SIZE	16u	/* id, total_size, timestamp */
#define JIT_LOAD_SIZE	56u	/* prefix + pid, tid, vma, addr, size, index */
#define JIT_DEBUG_SIZE	32u	/* prefix + code_addr, nr_entry */
#define JIT_ENTRY_SIZE	16u	/* addr, lineno, discrim (+ file name) */

#if defined(__x86_64__)
#define JIT_ELF_MACH EM_X86_64
#elif defined(__aarch64__)
#define JIT_ELF_MACH EM_AARCH64
#elif defined(__i386__)
#define JIT_ELF_MACH EM_386
#else
#define JIT_ELF_MACH EM_NONE
#endif

static struct {
  LJPFile f;		/* off: end of the last complete record */
  void *marker;		/* the PROT_EXEC page perf looks for, or NULL */
  size_t marker_len;
  uint64_t index;	/* code_index of the next CODE_LOAD */
  char path[PATH_MAX];
  LJPBuf buf;		/* record scratch */
  LJPBuf pend;		/* records of a batch, not yet written */
  uint64_t *seen;	/* hash set of code-byte hashes (0 = empty slot) */
  size_t seen_mask, seen_count;
} J = { .f.fd = -1 };

static uint64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static __thread uint32_t tid_cache;
void ljp_jd_forget_tid(void) { tid_cache = 0; }
static uint32_t my_tid(void)
{
  if (!tid_cache) tid_cache = (uint32_t)syscall(SYS_gettid);
  return tid_cache;
}

static inline void put32(char *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void put64(char *p, uint64_t v) { memcpy(p, &v, 8); }

static void jd_release(void)
{
  if (J.marker) munmap(J.marker, J.marker_len);
  J.marker = NULL;
  if (J.f.fd >= 0) close(J.f.fd);
  J.f.fd = -1;
  ljp_buf_free(&J.buf);
  ljp_buf_free(&J.pend);
}

/* Disables the output: drops a partial record, prints one line. */
static void jd_fail(const char *why, int err)
{
  char eb[128];
  if (J.f.fd >= 0) (void)ftruncate(J.f.fd, J.f.off);
  ljp_report("jitdump disabled", J.path, why ? why : ljp_strerror(err, eb, sizeof(eb)));
  jd_release();
  J.f.failed = 1;
}

static void seen_free(void)
{
  free(J.seen);
  J.seen = NULL; J.seen_mask = J.seen_count = 0;
}

/* Adds H (nonzero) to the set. Returns 1 if new, 0 if present, -1 no memory. */
static int seen_add(uint64_t h)
{
  if (!J.seen || (J.seen_count + 1) * 2 > J.seen_mask + 1) {
    size_t n = J.seen ? (J.seen_mask + 1) * 2 : 1024, oldn = J.seen ? J.seen_mask + 1 : 0;
    uint64_t *set = calloc(n, sizeof(uint64_t)), *old = J.seen;
    if (!set) return -1;
    J.seen = set; J.seen_mask = n - 1;
    for (size_t i = 0; i < oldn; i++)
      if (old[i])
	for (size_t j = old[i] & J.seen_mask;; j = (j + 1) & J.seen_mask)
	  if (!set[j]) { set[j] = old[i]; break; }
    free(old);
  }
  for (size_t j = h & J.seen_mask;; j = (j + 1) & J.seen_mask) {
    if (J.seen[j] == h) return 0;
    if (!J.seen[j]) { J.seen[j] = h; J.seen_count++; return 1; }
  }
}

static uint64_t code_hash(const void *p, uint64_t n)
{
  uint64_t h = ljp_hash(ljp_hash(LJP_HASH_SEED, &n, 8), p, (size_t)n);
  return h ? h : 1;
}

/* Maps the marker page; falls back to PROT_READ on a noexec mount (perf
** then needs `record -d`), telling the user once. */
static int jd_map_marker(void)
{
  long pg = sysconf(_SC_PAGESIZE);
  J.marker_len = pg > 0 ? (size_t)pg : 4096;
  J.marker = mmap(NULL, J.marker_len, PROT_READ | PROT_EXEC, MAP_PRIVATE, J.f.fd, 0);
  if (J.marker != MAP_FAILED) return 0;
  if (errno == EPERM || errno == EACCES) {
    J.marker = mmap(NULL, J.marker_len, PROT_READ, MAP_PRIVATE, J.f.fd, 0);
    if (J.marker != MAP_FAILED) {
      ljp_report("jitdump", J.path,
		 "cannot map it executable (noexec mount?): perf record needs -d");
      return 0;
    }
  }
  J.marker = NULL;
  return -1;
}

int ljp_jd_open(pid_t pid, const char *dir)
{
  const char *why = NULL;
  if (J.f.fd >= 0) return 0;
  if (ljp_file_forpid(&J.f, pid)) {  /* another process's state: start over */
    seen_free();
    J.index = 0;
  }
  if (J.f.failed) return -1;
  if ((size_t)snprintf(J.path, sizeof(J.path), "%s/jit-%d.dump", dir, (int)pid)
      >= sizeof(J.path)) {
    jd_fail(NULL, ENAMETOOLONG);
    return -1;
  }
  int fresh = ljp_file_open(&J.f, J.path, O_RDWR, JIT_HEADER_SIZE, &why);
  if (fresh < 0) { jd_fail(why, errno); return -1; }
  if (fresh) {  /* a new file: no code in it yet */
    char h[JIT_HEADER_SIZE];
    seen_free();
    J.index = 0;
    put32(h, JIT_MAGIC);
    put32(h + 4, JIT_VERSION);
    put32(h + 8, JIT_HEADER_SIZE);
    put32(h + 12, JIT_ELF_MACH);
    put32(h + 16, 0);			/* pad1 */
    put32(h + 20, (uint32_t)pid);
    put64(h + 24, now_ns());
    put64(h + 32, 0);			/* flags */
    struct iovec iov = { h, sizeof(h) };
    if (ljp_writev_all(J.f.fd, &iov, 1) < 0) { jd_fail(NULL, errno); return -1; }
    J.f.off = JIT_HEADER_SIZE;
  }
  if (jd_map_marker() < 0) { jd_fail(NULL, errno); return -1; }
  return 0;
}

int ljp_jd_isopen(void) { return J.f.fd >= 0; }

/* Appends the DEBUG_INFO record for LINES to J.buf (nothing if no line
** falls inside the code). Returns -1 on allocation failure. */
static int put_debug_info(uint64_t ts, uint64_t addr, uint64_t size,
			  const LJPLine *lines, size_t nlines)
{
  size_t start = J.buf.len, nent = 0;
  uint64_t last = 0;
  uint32_t lastline = 0;
  const char *lastfile = NULL;
  if (!lines || !nlines || !size) return 0;
  if (ljp_buf_reserve(&J.buf, JIT_DEBUG_SIZE) < 0) return -1;
  J.buf.len += JIT_DEBUG_SIZE;
  for (size_t i = 0; i <= nlines; i++) {
    uint64_t a;
    uint32_t line;
    const char *file;
    if (i < nlines) {
      a = lines[i].addr; line = lines[i].line;
      file = lines[i].file ? lines[i].file : "??";
      /* Keep entries inside the code and in ascending order. */
      if (a < addr || a - addr >= size || (nent && a < last)) continue;
    } else {  /* the closing entry at addr+size */
      if (!nent) break;
      a = addr + size; line = lastline; file = lastfile;
    }
    size_t fl = strlen(file) + 1;
    if (ljp_buf_reserve(&J.buf, JIT_ENTRY_SIZE + fl) < 0) return -1;
    char *p = J.buf.p + J.buf.len;
    put64(p, a);
    put32(p + 8, line);
    put32(p + 12, 0);			/* discriminator */
    memcpy(p + 16, file, fl);
    J.buf.len += JIT_ENTRY_SIZE + fl;
    nent++; last = a; lastline = line; lastfile = file;
  }
  if (!nent) { J.buf.len = start; return 0; }
  char *p = J.buf.p + start;
  put32(p, JIT_CODE_DEBUG_INFO);
  put32(p + 4, (uint32_t)(J.buf.len - start));
  put64(p + 8, ts);
  put64(p + 16, addr);
  put64(p + 24, nent);
  return 0;
}

void ljp_jd_flush(void)
{
  if (J.f.fd >= 0 && ljp_flush(J.f.fd, &J.pend, &J.f.off) < 0) jd_fail(NULL, errno);
}

void ljp_jd_load(uint64_t addr, uint64_t size, const char *name,
		 const void *bytes, const LJPLine *lines, size_t nlines, int defer)
{
  uint64_t ts = now_ns();
  const void *code = bytes ? bytes : (const void *)(uintptr_t)addr;
  J.buf.len = 0;
  if (put_debug_info(ts, addr, size, lines, nlines) < 0) goto nomem;
  size_t load = J.buf.len;
  if (ljp_buf_reserve(&J.buf, JIT_LOAD_SIZE) < 0) goto nomem;
  J.buf.len += JIT_LOAD_SIZE;
  if (ljp_buf_name(&J.buf, name) < 0) goto nomem;
  uint64_t total = (J.buf.len - load) + size;
  if (total > UINT32_MAX || J.buf.len - load > UINT32_MAX) return;  /* cannot be described */
  /* Unique bytes: salt a repeat (see header comment). */
  uint64_t h = code_hash(code, size);
  int isnew = seen_add(h);
  if (isnew < 0) goto nomem;
  if (!isnew && size) {
    size_t at = J.buf.len, k = size < 4 ? (size_t)size : 4;
    if (ljp_buf_reserve(&J.buf, (size_t)size) < 0) goto nomem;
    char *c = J.buf.p + at;
    memcpy(c, code, (size_t)size);
    for (uint64_t salt = J.index + 1; isnew == 0; salt++) {
      uint64_t x = (salt * 0x9e3779b97f4a7c15ull) | 1;  /* never zero */
      for (size_t i = 0; i < k; i++) c[size - k + i] ^= (char)(x >> (8 * i));
      isnew = seen_add(code_hash(c, size));
      if (isnew < 0) goto nomem;
    }
    code = c;  /* J.buf.len stays before the copy: it is written from c */
  }
  char *p = J.buf.p + load;
  put32(p, JIT_CODE_LOAD);
  put32(p + 4, (uint32_t)total);
  put64(p + 8, ts);
  put32(p + 16, (uint32_t)J.f.pid);
  put32(p + 20, my_tid());
  put64(p + 24, addr);			/* vma */
  put64(p + 32, addr);			/* code_addr */
  put64(p + 40, size);
  put64(p + 48, J.index);
  J.index++;
  if (ljp_put(J.f.fd, &J.pend, &J.f.off, defer, J.buf.p, J.buf.len, code, (size_t)size) < 0)
    jd_fail(NULL, errno);
  return;
nomem:
  jd_fail(NULL, ENOMEM);
}

void ljp_jd_close(void)
{
  if (J.f.fd < 0) return;
  char r[JIT_PREFIX_SIZE];
  put32(r, JIT_CODE_CLOSE);
  put32(r + 4, JIT_PREFIX_SIZE);
  put64(r + 8, now_ns());
  struct iovec iov = { r, sizeof(r) };
  if (ljp_writev_all(J.f.fd, &iov, 1) < 0) { jd_fail(NULL, errno); return; }
  J.f.off += JIT_PREFIX_SIZE;
  jd_release();
  /* J.f.created/index/seen stay: a reopen by this pid appends. */
}

void ljp_jd_abandon(void)
{
  jd_release();  /* the parent's file: unmap and close, no writes */
  seen_free();
  J.f.pid = 0; J.f.failed = 0; J.f.created = 0; J.index = 0; J.f.off = 0;
}
