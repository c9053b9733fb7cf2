/*
** ljperf emitter: DIR/jit-PID.dump.inline writer (called by emit.c): the Lua
** frames behind each range of a trace's machine code, for lj_merge. A side
** file, because perf inject warns once per record of a type it does not
** know (perf 6.1: "next_entry: unknown record type").
**
** Format (binary, little-endian as the x86-64 and arm64 VMs write it;
** lj_merge's ljperf/inline.py reads it; no formatting on the per-trace path):
**   "ljperf-inline 2\n"                        16 bytes, once, at the top
**   per trace, one record of
**     u64 INDEX ADDR SIZE; u32 NNODE NRANGE TRACENO ROOT LINK LINKNODE
**                                            48 bytes; INDEX: the trace's
**                                            CODE_LOAD code_index
**     NNODE x { u64 PC; u32 PARENT; u32 0 }  a frame at bytecode PC (the
**        interpreter's link convention: after the running instruction or
**        the call; instructions recorded in a row on one line share the
**        first one's node); PARENT: its caller's node (1-based), 0: the
**        trace's root frame
**     NRANGE x { u32 OFF; u32 NODE }         from ADDR+OFF (ascending) to
**        the next range or ADDR+SIZE: node NODE's frames; 0: the root
**        frame's
**   TRACENO is the trace's number, ROOT its root trace's (whose root frame
**   the nodes count from; TRACENO for a root trace); LINK the root trace it
**   jumps into at its end (0: none), with the frames of node LINKNODE (0:
**   the root frame's).
** Invariants: a trace's record is one write(2) (or one batch); after a
** failed or short write the file is cut back to its last complete trace.
*/
#include "ljperf_emit_common.h"


static struct {
  LJPFile f;		/* off: end of the last complete trace */
  char path[PATH_MAX];
  LJPBuf rec;		/* scratch for one trace */
  LJPBuf pend;		/* traces of a batch, not yet written */
} ljp_inl = { .f.fd = -1 };

static const char ljp_inl_head[] = "ljperf-inline 2\n";

/* A record's head, as in the file (no padding). */
typedef struct LJPInlHead {
  uint64_t index, addr, size;
  uint32_t nnode, nrange, traceno, root, link, linknode;
} LJPInlHead;

/* The sizes and byte order the format says: the structs are written as
** they are. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "jit-PID.dump.inline is little-endian: a big-endian target needs swaps");
typedef char ljp_inl_sizes[sizeof(LJPInlHead) == 48 && sizeof(LJPInlNode) == 16 &&
			   sizeof(LJPInlRange) == 8 ? 1 : -1];

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

void ljp_inl_trace(uint64_t index, uint64_t addr, uint64_t size,
		   const LJPInline *t, int defer)
{
  LJPBuf *b = &ljp_inl.rec;
  LJPInlHead h = { index, addr, size, (uint32_t)t->nnode, (uint32_t)t->nrange,
		   t->traceno, t->root, t->link, t->linknode };
  size_t nn = t->nnode * sizeof(LJPInlNode), nr = t->nrange * sizeof(LJPInlRange);
  b->len = 0;
  if (ljp_buf_reserve(b, sizeof(h) + nn + nr) < 0) {
    ljp_inl_fail(NULL, ENOMEM);
    return;
  }
  memcpy(b->p, &h, sizeof(h));
  memcpy(b->p + sizeof(h), t->node, nn);
  memcpy(b->p + sizeof(h) + nn, t->range, nr);
  b->len = sizeof(h) + nn + nr;
  if (ljp_put(ljp_inl.f.fd, &ljp_inl.pend, &ljp_inl.f.off, defer,
	      b->p, b->len, NULL, 0) < 0)
    ljp_inl_fail(NULL, errno);
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
