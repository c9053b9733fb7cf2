/*
** ljperf emitter: DIR/jit-PID.dump.inline writer (called by emit.c): the Lua
** frames behind each range of a trace's machine code, for lj_merge. A side
** file, because perf inject warns once per record of a type it does not
** know (perf 6.1: "next_entry: unknown record type").
**
** Format (text; lj_merge's ljresolve.py reads it):
**   ljperf-inline 1\n                         once, at the top
**   T INDEX ADDR SIZE NNODE NRANGE TRACENO ROOT LINK LINKNODE\n
**                                             a trace: the CODE_LOAD INDEX
**   N PC PARENT\n   (NNODE lines)             frame at bytecode PC (the
**        interpreter's link convention: after the running instruction or
**        the call); PARENT: its caller's N line (1-based), 0: the trace's
**        root frame
**   R OFF NODE\n    (NRANGE lines)            from ADDR+OFF (ascending) to the
**        next range or ADDR+SIZE: N line NODE's frames; 0: the root frame's
**   TRACENO is the trace's number, ROOT its root trace's (whose root frame
**   the nodes count from; TRACENO for a root trace); LINK the root trace it
**   jumps into at its end (0: none), with the frames of N line LINKNODE (0:
**   the root frame's).
** All numbers are lowercase hex without 0x (formatted without stdio).
** Invariants: a trace's lines are one write(2) (or one batch); after a
** failed or short write the file is cut back to its last complete trace.
*/
#include "ljperf_emit_common.h"


static struct {
  LJPFile f;		/* off: end of the last complete trace */
  char path[PATH_MAX];
  LJPBuf rec;		/* scratch for one trace */
  LJPBuf pend;		/* traces of a batch, not yet written */
} ljp_inl = { .f.fd = -1 };

static const char ljp_inl_head[] = "ljperf-inline 1\n";

static void ljp_inl_release(void)
{
  if (ljp_inl.f.fd >= 0) close(ljp_inl.f.fd);
  ljp_inl.f.fd = -1;
  ljp_buf_free(&ljp_inl.rec);
  ljp_buf_free(&ljp_inl.pend);
}

static void ljp_inl_fail(const char *why, int err)
{
  char eb[128];
  if (ljp_inl.f.fd >= 0) (void)ftruncate(ljp_inl.f.fd, ljp_inl.f.off);
  ljp_report("trace inline stacks disabled", ljp_inl.path,
	     why ? why : ljp_strerror(err, eb, sizeof(eb)));
  ljp_inl_release();
  ljp_inl.f.failed = 1;
}

int ljp_inl_open(pid_t pid, const char *dir)
{
  const char *why = NULL;
  if (ljp_inl.f.fd >= 0) return 0;
  ljp_file_forpid(&ljp_inl.f, pid);
  if (ljp_inl.f.failed) return -1;
  if ((size_t)snprintf(ljp_inl.path, sizeof(ljp_inl.path),
		       "%s/jit-%d.dump.inline", dir, (int)pid) >= sizeof(ljp_inl.path)) {
    ljp_inl_fail(NULL, ENAMETOOLONG);
    return -1;
  }
  int fresh = ljp_file_open(&ljp_inl.f, ljp_inl.path, O_WRONLY,
			    sizeof(ljp_inl_head) - 1, &why);
  if (fresh < 0) { ljp_inl_fail(why, errno); return -1; }
  if (fresh) {
    struct iovec iov = { (void *)ljp_inl_head, sizeof(ljp_inl_head) - 1 };
    if (ljp_writev_all(ljp_inl.f.fd, &iov, 1) < 0) {
      ljp_inl_fail(NULL, errno);
      return -1;
    }
    ljp_inl.f.off = sizeof(ljp_inl_head) - 1;
  }
  return 0;
}

int ljp_inl_isopen(void) { return ljp_inl.f.fd >= 0; }

/* Appends to the scratch record TAG, then each of the N numbers in hex
** after a space, then a newline. 0, or -1: no memory. */
static int ljp_inl_line(char tag, int n, const uint64_t *v)
{
  LJPBuf *b = &ljp_inl.rec;
  if (ljp_buf_reserve(b, 2 + 17 * (size_t)n) < 0) return -1;
  b->p[b->len++] = tag;
  for (int i = 0; i < n; i++) {
    b->p[b->len++] = ' ';
    b->len += ljp_hex(b->p + b->len, v[i]);
  }
  b->p[b->len++] = '\n';
  return 0;
}

void ljp_inl_trace(uint64_t index, uint64_t addr, uint64_t size,
		   const LJPInline *t, int defer)
{
  uint64_t head[9] = { index, addr, size, t->nnode, t->nrange, t->traceno,
		       t->root, t->link, t->linknode };
  ljp_inl.rec.len = 0;
  if (ljp_inl_line('T', 9, head) < 0) goto nomem;
  for (size_t i = 0; i < t->nnode; i++) {
    uint64_t v[2] = { t->node[i].pc, t->node[i].parent };
    if (ljp_inl_line('N', 2, v) < 0) goto nomem;
  }
  for (size_t i = 0; i < t->nrange; i++) {
    uint64_t v[2] = { t->range[i].off, t->range[i].node };
    if (ljp_inl_line('R', 2, v) < 0) goto nomem;
  }
  if (ljp_put(ljp_inl.f.fd, &ljp_inl.pend, &ljp_inl.f.off, defer,
	      ljp_inl.rec.p, ljp_inl.rec.len, NULL, 0) < 0)
    ljp_inl_fail(NULL, errno);
  return;
nomem:
  ljp_inl_fail(NULL, ENOMEM);
}

void ljp_inl_flush(void)
{
  if (ljp_inl.f.fd >= 0 && ljp_flush(ljp_inl.f.fd, &ljp_inl.pend, &ljp_inl.f.off) < 0)
    ljp_inl_fail(NULL, errno);
}

void ljp_inl_close(void)
{
  ljp_inl_release();  /* ljp_inl.f.created stays: a reopen by this pid appends. */
}

void ljp_inl_abandon(void)
{
  ljp_inl_release();  /* the parent's file: no writes */
  ljp_inl.f.pid = 0; ljp_inl.f.failed = 0; ljp_inl.f.created = 0;
  ljp_inl.f.off = 0;
}
