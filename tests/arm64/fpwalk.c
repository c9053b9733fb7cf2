/* The sampler (fpwalk.h). Invariant: the handler does only
** async-signal-safe work: reads through a pipe, stores into memory
** allocated before the timer started. */
#define _GNU_SOURCE
#include "fpwalk.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>

const char *const fpw_stopname[FPW_NSTOP] = {
#define FPW_TEXT(name, tag, text) text,
  FPW_STOPDEF(FPW_TEXT)
#undef FPW_TEXT
};
const char *const fpw_tag[FPW_NSTOP] = {
#define FPW_TAG(name, tag, text) #tag,
  FPW_STOPDEF(FPW_TAG)
#undef FPW_TAG
};

volatile int fpw_phase;

static FpwSample *fpw_buf;
static int fpw_cap;
static volatile int fpw_n;
static int fpw_pipe[2];

/* Reads 16 bytes at p as the kernel's copy_from_user would: through the
** kernel, so an unmapped or unreadable address fails instead of faulting. */
static int fpw_read(uintptr_t p, uintptr_t rec[2])
{
  if (write(fpw_pipe[1], (const void *)p, 16) != 16) return -1;
  return read(fpw_pipe[0], rec, 16) == 16 ? 0 : -1;
}

static void fpw_walk(FpwSample *s, uintptr_t pc, uintptr_t fp)
{
  int n = 0;
  s->a[n++] = pc;
  for (;;) {
    uintptr_t rec[2];
    if (n >= FPW_MAX) { s->stop = FPW_MAXDEPTH; break; }
    if (fp == 0) { s->stop = FPW_END; break; }
    if (fp & 15) { s->stop = FPW_UNALIGNED; break; }
    if (fpw_read(fp, rec)) { s->stop = FPW_UNREADABLE; break; }
    s->a[n++] = rec[1];
    if (rec[0] <= fp) {  /* the kernel stores lr, then stops */
      s->stop = rec[0] == 0 ? FPW_END : FPW_NOTRISING;
      break;
    }
    fp = rec[0];
  }
  s->n = (uint16_t)n;
}

static void fpw_handler(int sig, siginfo_t *si, void *uc_)
{
  ucontext_t *uc = uc_;
  int e = errno;
  (void)sig; (void)si;
  if (fpw_n < fpw_cap) {
    FpwSample *s = &fpw_buf[fpw_n];
    s->phase = (uint16_t)fpw_phase;
    fpw_walk(s, uc->uc_mcontext.pc, uc->uc_mcontext.regs[29]);
    fpw_n++;
  }
  errno = e;
}

int fpw_start(long usec, int cap)
{
  struct sigaction sa;
  struct itimerval it;
  fpw_buf = calloc((size_t)cap, sizeof(FpwSample));
  if (!fpw_buf || pipe2(fpw_pipe, O_NONBLOCK | O_CLOEXEC)) return -1;
  fpw_cap = cap;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = fpw_handler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGPROF, &sa, NULL)) return -1;
  it.it_interval.tv_sec = usec / 1000000;
  it.it_interval.tv_usec = usec % 1000000;
  it.it_value = it.it_interval;
  return setitimer(ITIMER_PROF, &it, NULL);
}

void fpw_stop(void)
{
  struct itimerval it;
  memset(&it, 0, sizeof(it));
  setitimer(ITIMER_PROF, &it, NULL);
  signal(SIGPROF, SIG_IGN);
}

const FpwSample *fpw_samples(int *n)
{
  *n = fpw_n;
  return fpw_buf;
}
