/* In-process sampler of x29 frame chains by the arm64 kernel's rules.
**
** SIGPROF (ITIMER_PROF) interrupts the process; the handler walks the chain
** from the interrupted pc and x29 exactly as perf's user unwinder does on
** arm64 (arch/arm64/kernel/perf_callchain.c): store pc; while the frame
** pointer is non-zero and 16-byte aligned and fewer than FPW_MAX addresses
** are stored, read the {fp, lr} record at it (a read that faults ends the
** chain), store lr, and go on only if the next fp is strictly higher.
** Samples are kept in a preallocated array; nothing is symbolized in the
** handler.
*/
#ifndef FPWALK_H
#define FPWALK_H

#include <stdint.h>

#define FPW_MAX 127   /* perf's default kernel.perf_event_max_stack */

/* Why a walk ended: name, tag, text. FPW_END: a zero fp, the chain's
** normal end. */
#define FPW_STOPDEF(_) \
  _(END, end, "fp 0") _(UNALIGNED, unaligned, "unaligned") \
  _(UNREADABLE, unreadable, "unreadable") _(NOTRISING, notrising, "not rising") \
  _(MAXDEPTH, maxdepth, "max depth")

enum {
#define FPW_ENUM(name, tag, text) FPW_##name,
  FPW_STOPDEF(FPW_ENUM)
#undef FPW_ENUM
  FPW_NSTOP
};

extern const char *const fpw_stopname[FPW_NSTOP], *const fpw_tag[FPW_NSTOP];

typedef struct FpwSample {
  uint16_t phase;  /* fpw_phase when taken */
  uint16_t n;      /* addresses stored: a[0] is the pc */
  uint8_t stop;    /* FPW_* */
  uintptr_t a[FPW_MAX];
} FpwSample;

extern volatile int fpw_phase;  /* the host's current workload */

/* Starts sampling every usec microseconds of process CPU time; at most
** cap samples are kept. Returns 0 or -1 (errno set). */
int fpw_start(long usec, int cap);
void fpw_stop(void);
/* The samples taken so far. */
const FpwSample *fpw_samples(int *n);

#endif
