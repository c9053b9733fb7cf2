/*
** ljperf emitter: tells perf about code the VM creates.
**
** Two outputs, both process-wide:
**   LJP_MAP      /tmp/perf-PID.map   one "START SIZE NAME" line per code range
**   LJP_JITDUMP  DIR/jit-PID.dump    jitdump (CODE_LOAD + DEBUG_INFO records),
**                                    input of `perf inject --jit`
**
** Invariants the writers guarantee:
** - Never abort or block the host program: an I/O error (ENOSPC, EROFS,
**   EACCES, ...) closes the failing output, prints one line on stderr and
**   leaves the program running. Later calls are no-ops for that output.
** - Records are written whole: one write(2) per record, or per batch (see
**   ljp_emit_batch_begin), so a crash leaves a valid file up to the last
**   record or batch written.
** - Thread-safe: several lua_States in several threads may call in.
** - fork: the first call in a child closes the inherited outputs without
**   writing to them and opens new files for the child's pid.
** - The map never repeats an identical (addr, size, name) line.
*/
#ifndef LJPERF_EMIT_H
#define LJPERF_EMIT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define LJP_MAP		1u
#define LJP_JITDUMP	2u

/* One DEBUG_INFO entry: code at addresses >= addr (up to the next entry)
** comes from line LINE of FILE. */
typedef struct LJPLine {
  uint64_t addr;
  uint32_t line;
  const char *file;
} LJPLine;

/* Opens the outputs in MASK. DIR is the jitdump directory (NULL or "" means
** $LUAJIT_PERF_DIR, else /tmp). Returns the mask of outputs now open.
** Calling it again with outputs already open adds the missing ones. */
unsigned ljp_emit_open(unsigned mask, const char *dir);

/* Returns the mask of open outputs. If the process forked since the
** outputs were opened, reopens them for the new pid first and sets
** *fresh to 1 (the caller should then describe all live code again). */
unsigned ljp_emit_begin(int *fresh);

/* Describes code [addr, addr+size) named NAME (cleaned by ljp_name_copy).
** BYTES are the bytes stored in the jitdump (NULL: copy from addr).
** LINES (sorted by addr, may be NULL) become a DEBUG_INFO record written
** before the CODE_LOAD; the writer appends the closing entry at addr+size. */
void ljp_emit_load(uint64_t addr, uint64_t size, const char *name,
		   const void *bytes, const LJPLine *lines, size_t nlines);

/* The Lua frames behind a trace's machine code (jit-PID.dump.inline, see
** inline.c): NODE[i] is a frame at bytecode PC (the interpreter's link
** convention) whose caller is NODE[PARENT-1] (PARENT 0: the trace's root
** frame); RANGE[i] covers from the load's addr+OFF to the next range's
** start (the last: to the end) with the frames of NODE[NODE-1] (0: the
** root frame only). Ranges ascend by OFF. The root frame is that of the
** trace's root trace (ROOT; a root trace: itself, TRACENO). A trace that
** ends by jumping into another root trace (LINK, else 0) does so with the
** frames of LINKNODE there: the frames below that trace's root frame.
** Both are written to the file as they are: PAD must be 0. */
typedef struct LJPInlNode { uint64_t pc; uint32_t parent, pad; } LJPInlNode;
typedef struct LJPInlRange { uint32_t off, node; } LJPInlRange;
typedef struct LJPInline {
  const LJPInlNode *node; size_t nnode;
  const LJPInlRange *range; size_t nrange;
  uint32_t traceno, root, link, linknode;
} LJPInline;

/* ljp_emit_load of a trace, plus its inline stacks INL (NULL: none) when
** the jitdump is open and takes the load. */
void ljp_emit_trace(uint64_t addr, uint64_t size, const char *name,
		    const LJPLine *lines, size_t nlines, const LJPInline *inl);

/* Batches (nest; process-wide, so records of all threads keep their time
** order): from the first begin to the last end, records are collected and
** written with one write(2) per output at the end, or whenever 256 KiB are
** pending. Between them the calling thread must not block. */
void ljp_emit_batch_begin(void);
void ljp_emit_batch_end(void);

/* Flushes and closes all outputs (a jitdump CODE_CLOSE record is written)
** and prints the count of each kind of drop since the outputs were opened. */
void ljp_emit_close(void);

/* What perf may not be told. Each kind is reported on stderr when it first
** happens and counted: ljp_emit_close prints the counts. */
#define LJP_DROPDEF(_) \
  _(TOOBIG, "jitdump: a code load too large for one record (4 GiB) was left out") \
  _(LINES, "out of memory: the line table of a code load was left out") \
  _(NAME, "out of memory: a function name was not kept for naming traces") \
  _(PARENT, "out of memory: nested functions were described without names")

typedef enum {
#define LJP_DROPENUM(kind, what)	LJP_DROP_##kind,
  LJP_DROPDEF(LJP_DROPENUM)
#undef LJP_DROPENUM
  LJP_DROP__MAX
} LJPDrop;

void ljp_emit_drop(LJPDrop what);

#define LJP_BYTES(c)	(0x0101010101010101ull * (uint64_t)(c))

/* Nonzero if a byte of W, 8 bytes of a name, is one ljp_name_copy
** replaces. (x - 0x01..) & ~x & 0x80.. is nonzero iff a byte of x is 0,
** and with 0x21.. for x iff a byte of x is below 0x21 (exact for either). */
static inline uint64_t ljp_name_bad8(uint64_t w)
{
  uint64_t p = (w | LJP_BYTES(1)) ^ LJP_BYTES(')');	/* '(' or ')' */
  uint64_t q = w ^ LJP_BYTES(';'), d = w ^ LJP_BYTES(0x7f);
  return (((w - LJP_BYTES(0x21)) & ~w) | ((p - LJP_BYTES(1)) & ~p) |
	  ((q - LJP_BYTES(1)) & ~q) | ((d - LJP_BYTES(1)) & ~d)) & LJP_BYTES(0x80);
}

/* The one name cleaner: copies N bytes of SRC to DST with whitespace,
** control characters, DEL, '(', ')' and ';' replaced by '_'. The perf map
** splits at whitespace, stackcollapse-perf.pl cuts a name at '(' (a lone
** ')' would remain) and ';' separates folded frames. */
static inline void ljp_name_copy(char *dst, const char *src, size_t n)
{
  /* Bit c set: byte c < 64 is replaced (0..' ', '(', ')', ';'). */
  const uint64_t low = 0x1ffffffffull | (1ull << '(') | (1ull << ')') |
		       (1ull << ';');
  size_t i = 0;
  for (;; i++) {
    unsigned char c;
    int bad;
    if ((i & 7) == 0) {  /* Whole words with nothing to replace: copied. */
      uint64_t w;
      for (; n - i >= 8; i += 8) {
	memcpy(&w, src + i, 8);
	if (ljp_name_bad8(w)) break;
	memcpy(dst + i, &w, 8);
      }
    }
    if (i >= n) break;
    c = (unsigned char)src[i];
    bad = c < 64 ? (int)((low >> c) & 1) : c == 0x7f;
    dst[i] = bad ? '_' : (char)c;
  }
}

#endif
