/*
** ljperf emitter: private helpers shared by emit.c, perfmap.c and jitdump.c.
** Not part of the API (see ljperf_emit.h).
**
** Locking: one process-wide mutex (ljp_lock, in emit.c) serialises every
** API call; all ljp_map_* / ljp_jd_* / ljp_inl_* calls run with it held.
** Fork: state belongs to ljp_owner (emit.c, the pid that opened the files).
** A call from another pid first "abandons" the inherited outputs: it
** closes the fds and unmaps without writing a byte, then opens files for
** the new pid.
*/
#ifndef LJPERF_EMIT_COMMON_H
#define LJPERF_EMIT_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ljperf_emit.h"
#include "ljperf_set.h"

#define LJP_HIDDEN __attribute__((visibility("hidden")))

/* -- Diagnostics ---------------------------------------------------------- */

/* Prints "ljperf: " FMT "\n" with one write(2) to stderr. No stdio: safe
** with the lock held and never buffered. */
static inline void __attribute__((format(printf, 1, 2)))
ljp_say(const char *fmt, ...)
{
  char line[PATH_MAX + 256];
  va_list ap;
  int n = 8;
  memcpy(line, "ljperf: ", 8);
  va_start(ap, fmt);
  n += vsnprintf(line + 8, sizeof(line) - 9, fmt, ap);  /* room for '\n' */
  va_end(ap);
  if (n < 8) return;
  if ((size_t)n > sizeof(line) - 2) n = sizeof(line) - 2;  /* cut */
  line[n++] = '\n';
  ssize_t r = write(2, line, (size_t)n);
  (void)r;
}

/* "ljperf: <what>: <path>: <why>": an output's failure. */
static inline void ljp_report(const char *what, const char *path,
			      const char *why)
{
  ljp_say("%s: %s: %s", what, path, why);
}

static inline const char *ljp_strerror(int err, char *buf, size_t len)
{
  return strerror_r(err, buf, len);  /* GNU variant: returns the message */
}

/* -- Files ---------------------------------------------------------------- */

/* Creates PATH (ACC: O_WRONLY or O_RDWR; mode 0644, close-on-exec). Never follows a
** symlink and never reuses a file owned by another uid. A regular file we
** own (stale: an earlier process with the same pid) is unlinked and
** created afresh. On failure returns -1 and sets *why (static string) or,
** if *why is NULL, errno. */
static inline int ljp_create(const char *path, int acc, const char **why)
{
  *why = NULL;
  for (int attempt = 0; attempt < 2; attempt++) {
    int fd = open(path, acc | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) {
      (void)fchmod(fd, 0644);  /* ignore the umask: perf must read it */
      return fd;
    }
    if (errno != EEXIST) return -1;
    struct stat st;
    if (lstat(path, &st) < 0) continue;  /* vanished meanwhile: retry */
    if (S_ISLNK(st.st_mode)) { *why = "refusing to follow a symlink"; return -1; }
    if (!S_ISREG(st.st_mode)) { *why = "exists and is not a regular file"; return -1; }
    if (st.st_uid != geteuid()) { *why = "exists and is owned by another user"; return -1; }
    if (unlink(path) < 0) return -1;  /* ours and stale: replace it */
  }
  *why = "file keeps reappearing";
  return -1;
}

/* Reopens PATH (ACC as above) for appending if it is still the very file (DEV, INO) this
** process created; otherwise returns -1 (caller then creates afresh). */
static inline int ljp_reopen(const char *path, int acc, dev_t dev, ino_t ino)
{
  int fd = open(path, acc | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0) return -1;
  if (fstat(fd, &st) < 0 || st.st_dev != dev || st.st_ino != ino ||
      !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
      lseek(fd, 0, SEEK_END) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* An output file of this process: created once per pid, and while it is
** still the very file this pid created, reopened to append. */
typedef struct LJPFile {
  int fd;		/* -1: not open */
  pid_t pid;		/* process the state below belongs to */
  int failed;		/* disabled after an error: never reopened for pid */
  int created;		/* this pid created the file (dev, ino): reopen appends */
  dev_t dev;
  ino_t ino;
  off_t off;		/* end of the last complete record */
} LJPFile;

/* Adopts F for PID; returns 1 when F's state belonged to another process
** (or none) and was started over. */
static inline int ljp_file_forpid(LJPFile *f, pid_t pid)
{
  if (f->pid == pid) return 0;
  f->pid = pid; f->failed = 0; f->created = 0;
  return 1;
}

/* Opens F at PATH: reopens the file this pid created if it still holds at
** least MINSIZE bytes (returns 0), else creates it (returns 1). -1 on
** failure, with *why or errno as ljp_create. */
static inline int ljp_file_open(LJPFile *f, const char *path, int acc,
				off_t minsize, const char **why)
{
  struct stat st;
  *why = NULL;
  if (f->created) {
    f->fd = ljp_reopen(path, acc, f->dev, f->ino);
    if (f->fd >= 0) {
      f->off = lseek(f->fd, 0, SEEK_END);
      if (f->off >= minsize) return 0;
      close(f->fd);
      f->fd = -1;
    }
  }
  f->off = 0;
  f->fd = ljp_create(path, acc, why);
  if (f->fd < 0) return -1;
  if (fstat(f->fd, &st) < 0) return -1;
  f->created = 1; f->dev = st.st_dev; f->ino = st.st_ino;
  return 1;
}

/* Writes IOV completely. Normally one writev(2); a short write (signal,
** disk nearly full) is continued so the real errno surfaces. Returns 0, or
** -1 with errno set. IOV is consumed. */
static inline int ljp_writev_all(int fd, struct iovec *iov, int n)
{
  while (n > 0) {
    ssize_t w = writev(fd, iov, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (w == 0) { errno = EIO; return -1; }
    while (n > 0 && (size_t)w >= iov->iov_len) { w -= iov->iov_len; iov++; n--; }
    if (n > 0) { iov->iov_base = (char *)iov->iov_base + w; iov->iov_len -= w; }
  }
  return 0;
}

/* -- Growable byte buffer (allocation failure is reported, never fatal) --- */

typedef struct LJPBuf { char *p; size_t len, cap; } LJPBuf;

static inline int ljp_buf_reserve(LJPBuf *b, size_t extra)
{
  if (b->len + extra <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra) {
    if (cap > SIZE_MAX / 2) return -1;
    cap *= 2;
  }
  char *p = realloc(b->p, cap);
  if (!p) return -1;
  b->p = p; b->cap = cap;
  return 0;
}

static inline void ljp_buf_free(LJPBuf *b)
{
  free(b->p);
  b->p = NULL; b->len = b->cap = 0;
}

/* -- Output: whole records, now or at the end of a batch ----------------- */

#define LJP_PEND_MAX	262144	/* a batch flushes once this much is pending */

/* Writes PEND (records held back by a batch) to FD; *OFF, the end of the
** last complete record in the file, advances. 0, or -1 with errno set. */
static inline int ljp_flush(int fd, LJPBuf *pend, off_t *off)
{
  struct iovec iov = { pend->p, pend->len };
  size_t n = pend->len;
  if (!n) return 0;
  pend->len = 0;
  if (ljp_writev_all(fd, &iov, 1) < 0) return -1;
  *off += (off_t)n;
  return 0;
}

/* Puts one record, A then B (either may be empty): written now with one
** writev(2), or with DEFER appended to PEND (flushed past LJP_PEND_MAX).
** 0, or -1 with errno set. */
static inline int ljp_put(int fd, LJPBuf *pend, off_t *off, int defer,
			  const void *a, size_t an, const void *b, size_t bn)
{
  if (defer) {
    if (ljp_buf_reserve(pend, an + bn) < 0) { errno = ENOMEM; return -1; }
    memcpy(pend->p + pend->len, a, an);
    if (bn) memcpy(pend->p + pend->len + an, b, bn);
    pend->len += an + bn;
    return pend->len >= LJP_PEND_MAX ? ljp_flush(fd, pend, off) : 0;
  } else {
    struct iovec iov[2] = { { (void *)a, an }, { (void *)b, bn } };
    if (ljp_writev_all(fd, iov, bn ? 2 : 1) < 0) return -1;
    *off += (off_t)(an + bn);
    return 0;
  }
}

/* -- Numbers (no stdio on the per-load path) ----------------------------- */

/* Writes V in lowercase hex, no 0x, to DST (room for 16). Returns its length. */
static inline size_t ljp_hex(char *dst, uint64_t v)
{
  size_t n = (size_t)(67 - __builtin_clzll(v | 1)) >> 2;  /* Digits. */
  char *p = dst + n;
  do { *--p = "0123456789abcdef"[v & 15]; v >>= 4; } while (p > dst);
  return n;
}

/* -- Names ---------------------------------------------------------------- */

/* A load's name as emit.c hands it to the writers: S (N bytes, then a
** NUL; never empty), already cleaned by ljp_name_copy when CLEAN. */
typedef struct LJPName { const char *s; size_t n; int clean; } LJPName;

/* Appends NAME, cleaned, and a NUL to B. */
static inline int ljp_buf_name(LJPBuf *b, const LJPName *name)
{
  size_t n = name->n;
  if (ljp_buf_reserve(b, n + 1) < 0) return -1;
  if (name->clean) memcpy(b->p + b->len, name->s, n);
  else ljp_name_copy(b->p + b->len, name->s, n);
  b->len += n;
  b->p[b->len++] = '\0';
  return 0;
}

/* -- Writers (called with ljp_lock held, pid already checked) ------------- */

/* perfmap.c. open: 0 ok / -1 failed (message printed, output disabled
** for this pid). abandon: close without writing (inherited after fork). */
LJP_HIDDEN int ljp_map_open(pid_t pid);
LJP_HIDDEN int ljp_map_isopen(void);
LJP_HIDDEN void ljp_map_load(uint64_t addr, uint64_t size, const LJPName *name, int defer);
LJP_HIDDEN void ljp_map_flush(void);
LJP_HIDDEN void ljp_map_close(void);
LJP_HIDDEN void ljp_map_abandon(void);

/* jitdump.c, same conventions. DIR is already resolved (never NULL).
** load: 1 if the load, or its lines, did not fit a record (a
** LJP_DROP_TOOBIG for the caller to count), else 0. */
LJP_HIDDEN int ljp_jd_open(pid_t pid, const char *dir);
LJP_HIDDEN int ljp_jd_isopen(void);
LJP_HIDDEN int ljp_jd_load(uint64_t addr, uint64_t size, const LJPName *name,
			   const void *bytes, const LJPLine *lines, size_t nlines, int defer);
LJP_HIDDEN void ljp_jd_flush(void);
LJP_HIDDEN void ljp_jd_forget_tid(void);
LJP_HIDDEN void ljp_jd_close(void);
LJP_HIDDEN void ljp_jd_abandon(void);
LJP_HIDDEN uint64_t ljp_jd_nextindex(void);	/* code_index of the next load */

/* inline.c, same conventions (opened and closed with the jitdump). */
LJP_HIDDEN int ljp_inl_open(pid_t pid, const char *dir);
LJP_HIDDEN int ljp_inl_isopen(void);
LJP_HIDDEN void ljp_inl_trace(uint64_t index, uint64_t addr, uint64_t size,
			      const LJPInline *t, int defer);
LJP_HIDDEN void ljp_inl_flush(void);
LJP_HIDDEN void ljp_inl_close(void);
LJP_HIDDEN void ljp_inl_abandon(void);

#endif
