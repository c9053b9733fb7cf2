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
** - A load whose record would not fit perf's 32-bit total_size is left out
**   of the dump: ljp_jd_load returns 1 and its caller counts the drop.
*/
#include "ljperf_emit_common.h"
#include "ljperf_jitdump.h"

#include <elf.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>

/* The header's ELF machine is the target's (the only field of the format
** that names one). perf inject 6.1 does not check it: its jitted-*.so files
** get the machine perf was built for. Readers of the dump tell the code
** bytes' instruction set by it. */
#if defined(__x86_64__)
#define LJP_JD_ELF_MACH EM_X86_64
#elif defined(__aarch64__)
#define LJP_JD_ELF_MACH EM_AARCH64
#else
#error "ljperf's jitdump writer knows x86-64 and aarch64 only: add the target's EM_* here"
#endif

static struct {
  LJPFile f;		/* off: end of the last complete record */
  void *marker;		/* the PROT_EXEC page perf looks for, or NULL */
  size_t marker_len;
  uint64_t index;	/* code_index of the next CODE_LOAD */
  char path[PATH_MAX];
  LJPBuf buf;		/* record scratch */
  LJPBuf pend;		/* records of a batch, not yet written */
  LJPSet seen;		/* hashes of the code bytes in the file */
} ljp_jd = { .f.fd = -1 };

static uint64_t ljp_jd_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static __thread uint32_t ljp_jd_tidc;
void ljp_jd_forget_tid(void) { ljp_jd_tidc = 0; }
static uint32_t ljp_jd_tid(void)
{
  if (!ljp_jd_tidc) ljp_jd_tidc = (uint32_t)syscall(SYS_gettid);
  return ljp_jd_tidc;
}

static void ljp_jd_release(void)
{
  if (ljp_jd.marker) munmap(ljp_jd.marker, ljp_jd.marker_len);
  ljp_jd.marker = NULL;
  if (ljp_jd.f.fd >= 0) close(ljp_jd.f.fd);
  ljp_jd.f.fd = -1;
  ljp_buf_free(&ljp_jd.buf);
  ljp_buf_free(&ljp_jd.pend);
}

/* Disables the output: drops a partial record, prints one line. */
static void ljp_jd_fail(const char *why, int err)
{
  char eb[128];
  if (ljp_jd.f.fd >= 0) (void)ftruncate(ljp_jd.f.fd, ljp_jd.f.off);
  ljp_report("jitdump disabled", ljp_jd.path,
	     why ? why : ljp_strerror(err, eb, sizeof(eb)));
  ljp_jd_release();
  ljp_jd.f.failed = 1;
}

/* Adds the code hash H. Returns 1 if new, 0 if present, -1 no memory. */
static int ljp_jd_seen_add(uint64_t h)
{
  LJPSlot *e;
  if (ljp_set_reserve(&ljp_jd.seen) < 0) return -1;
  e = ljp_set_slot(&ljp_jd.seen, h, NULL, NULL);
  if (e->h) return 0;
  ljp_set_fill(&ljp_jd.seen, e, h, NULL);
  return 1;
}

static uint64_t ljp_jd_codehash(const void *p, uint64_t n)
{
  return ljp_hash_key(ljp_hash(ljp_hash(LJP_HASH_SEED, &n, 8), p, (size_t)n));
}

/* Maps the marker page; falls back to PROT_READ on a noexec mount (perf
** then needs `record -d`), telling the user once. */
static int ljp_jd_marker(void)
{
  long pg = sysconf(_SC_PAGESIZE);
  ljp_jd.marker_len = pg > 0 ? (size_t)pg : 4096;
  ljp_jd.marker = mmap(NULL, ljp_jd.marker_len, PROT_READ | PROT_EXEC,
		       MAP_PRIVATE, ljp_jd.f.fd, 0);
  if (ljp_jd.marker != MAP_FAILED) return 0;
  if (errno == EPERM || errno == EACCES) {
    ljp_jd.marker = mmap(NULL, ljp_jd.marker_len, PROT_READ, MAP_PRIVATE,
			 ljp_jd.f.fd, 0);
    if (ljp_jd.marker != MAP_FAILED) {
      ljp_report("jitdump", ljp_jd.path,
		 "cannot map it executable (noexec mount?): perf record needs -d");
      return 0;
    }
  }
  ljp_jd.marker = NULL;
  return -1;
}

/* The fixed part of a record at offset AT of ljp_jd.buf (unaligned). */
#define ljp_jd_fix(at, rec)	memcpy(ljp_jd.buf.p + (at), &(rec), sizeof(rec))

int ljp_jd_open(pid_t pid, const char *dir)
{
  const char *why = NULL;
  if (ljp_jd.f.fd >= 0) return 0;
  if (ljp_file_forpid(&ljp_jd.f, pid)) {  /* another process's: start over */
    ljp_set_free(&ljp_jd.seen);
    ljp_jd.index = 0;
  }
  if (ljp_jd.f.failed) return -1;
  if ((size_t)snprintf(ljp_jd.path, sizeof(ljp_jd.path), "%s/jit-%d.dump",
		       dir, (int)pid) >= sizeof(ljp_jd.path)) {
    ljp_jd_fail(NULL, ENAMETOOLONG);
    return -1;
  }
  int fresh = ljp_file_open(&ljp_jd.f, ljp_jd.path, O_RDWR,
			    sizeof(LJPJdHeader), &why);
  if (fresh < 0) { ljp_jd_fail(why, errno); return -1; }
  if (fresh) {  /* a new file: no code in it yet */
    LJPJdHeader h = {
      .magic = LJP_JD_MAGIC, .version = LJP_JD_VERSION,
      .total_size = sizeof(LJPJdHeader), .elf_mach = LJP_JD_ELF_MACH,
      .pid = (uint32_t)pid, .timestamp = ljp_jd_now()
    };
    struct iovec iov = { &h, sizeof(h) };
    ljp_set_free(&ljp_jd.seen);
    ljp_jd.index = 0;
    if (ljp_writev_all(ljp_jd.f.fd, &iov, 1) < 0) {
      ljp_jd_fail(NULL, errno);
      return -1;
    }
    ljp_jd.f.off = sizeof(h);
  }
  if (ljp_jd_marker() < 0) { ljp_jd_fail(NULL, errno); return -1; }
  return 0;
}

int ljp_jd_isopen(void) { return ljp_jd.f.fd >= 0; }

uint64_t ljp_jd_nextindex(void) { return ljp_jd.index; }

/* Appends the DEBUG_INFO record for LINES to ljp_jd.buf (nothing if no line
** falls inside the code). 0, 1 if it is too large for a record (nothing
** appended), -1 on allocation failure. */
static int ljp_jd_debug(uint64_t ts, uint64_t addr, uint64_t size,
			const LJPLine *lines, size_t nlines)
{
  LJPBuf *b = &ljp_jd.buf;
  size_t start = b->len, nent = 0;
  uint64_t last = 0;
  uint32_t lastline = 0;
  const char *lastfile = NULL, *lenof = NULL;
  size_t fl = 0;	/* strlen(lenof) + 1: entries share their file */
  if (!lines || !nlines || !size) return 0;
  if (ljp_buf_reserve(b, sizeof(LJPJdDebug)) < 0) return -1;
  b->len += sizeof(LJPJdDebug);
  for (size_t i = 0; i <= nlines; i++) {
    LJPJdEntry ent = { 0, 0, 0 };
    const char *file;
    if (i < nlines) {
      ent.addr = lines[i].addr; ent.lineno = (int32_t)lines[i].line;
      file = lines[i].file ? lines[i].file : "??";
      /* Keep entries inside the code and in ascending order. */
      if (ent.addr < addr || ent.addr - addr >= size || (nent && ent.addr < last))
	continue;
    } else {  /* the closing entry at addr+size */
      if (!nent) break;
      ent.addr = addr + size; ent.lineno = (int32_t)lastline; file = lastfile;
    }
    if (file != lenof) { fl = strlen(file) + 1; lenof = file; }
    if (ljp_buf_reserve(b, sizeof(ent) + fl) < 0) return -1;
    ljp_jd_fix(b->len, ent);
    memcpy(b->p + b->len + sizeof(ent), file, fl);
    b->len += sizeof(ent) + fl;
    nent++; last = ent.addr; lastline = (uint32_t)ent.lineno; lastfile = file;
  }
  if (!nent) { b->len = start; return 0; }
  if (b->len - start > UINT32_MAX) { b->len = start; return 1; }
  LJPJdDebug d = {
    { LJP_JD_CODE_DEBUG_INFO, (uint32_t)(b->len - start), ts }, addr, nent
  };
  ljp_jd_fix(start, d);
  return 0;
}

void ljp_jd_flush(void)
{
  if (ljp_jd.f.fd >= 0 && ljp_flush(ljp_jd.f.fd, &ljp_jd.pend, &ljp_jd.f.off) < 0)
    ljp_jd_fail(NULL, errno);
}

int ljp_jd_load(uint64_t addr, uint64_t size, const LJPName *name,
		const void *bytes, const LJPLine *lines, size_t nlines, int defer)
{
  LJPBuf *b = &ljp_jd.buf;
  uint64_t ts = ljp_jd_now();
  const void *code = bytes ? bytes : (const void *)(uintptr_t)addr;
  size_t nl = name->n + 1;
  int r;
  if (nl > UINT32_MAX - sizeof(LJPJdLoad) ||  /* total_size is 32 bits */
      size > UINT32_MAX - sizeof(LJPJdLoad) - nl)
    return 1;
  b->len = 0;
  if ((r = ljp_jd_debug(ts, addr, size, lines, nlines)) < 0) goto nomem;
  /* r > 0: the load goes without lines (returned: a drop). */
  size_t load = b->len;
  if (ljp_buf_reserve(b, sizeof(LJPJdLoad)) < 0) goto nomem;
  b->len += sizeof(LJPJdLoad);
  if (ljp_buf_name(b, name) < 0) goto nomem;
  /* Unique bytes: salt a repeat (see header comment). */
  uint64_t h = ljp_jd_codehash(code, size);
  int isnew = ljp_jd_seen_add(h);
  if (isnew < 0) goto nomem;
  if (!isnew && size) {
    size_t at = b->len, k = size < 4 ? (size_t)size : 4;
    if (ljp_buf_reserve(b, (size_t)size) < 0) goto nomem;
    char *c = b->p + at;
    memcpy(c, code, (size_t)size);
    for (uint64_t salt = ljp_jd.index + 1; isnew == 0; salt++) {
      uint64_t x = (salt * 0x9e3779b97f4a7c15ull) | 1;  /* never zero */
      for (size_t i = 0; i < k; i++) c[size - k + i] ^= (char)(x >> (8 * i));
      isnew = ljp_jd_seen_add(ljp_jd_codehash(c, size));
      if (isnew < 0) goto nomem;
    }
    code = c;  /* b->len stays before the copy: it is written from c */
  }
  LJPJdLoad l = {
    { LJP_JD_CODE_LOAD, (uint32_t)(b->len - load + size), ts },
    (uint32_t)ljp_jd.f.pid, ljp_jd_tid(),
    addr, addr, size, ljp_jd.index	/* vma = code_addr */
  };
  ljp_jd_fix(load, l);
  ljp_jd.index++;
  if (ljp_put(ljp_jd.f.fd, &ljp_jd.pend, &ljp_jd.f.off, defer,
	      b->p, b->len, code, (size_t)size) < 0)
    ljp_jd_fail(NULL, errno);
  return r;
nomem:
  ljp_jd_fail(NULL, ENOMEM);
  return 0;
}

void ljp_jd_close(void)
{
  if (ljp_jd.f.fd < 0) return;
  LJPJdPrefix c = { LJP_JD_CODE_CLOSE, sizeof(LJPJdPrefix), ljp_jd_now() };
  struct iovec iov = { &c, sizeof(c) };
  if (ljp_writev_all(ljp_jd.f.fd, &iov, 1) < 0) { ljp_jd_fail(NULL, errno); return; }
  ljp_jd.f.off += sizeof(c);
  ljp_jd_release();
  /* ljp_jd.f.created/index/seen stay: a reopen by this pid appends. */
}

void ljp_jd_abandon(void)
{
  ljp_jd_release();  /* the parent's file: unmap and close, no writes */
  ljp_set_free(&ljp_jd.seen);
  ljp_jd.f.pid = 0; ljp_jd.f.failed = 0; ljp_jd.f.created = 0;
  ljp_jd.index = 0; ljp_jd.f.off = 0;
}
