/*
** Allocation samples for perf (patch 0006; ljperf record --mem).
**
** While on, a state's allocator (g->allocf) is wrapped. Every RATE bytes on
** average (exponential gaps, as Go's heap profiler) an allocation traps, and
** so does the free of a sampled block: the wrapper writes to a page it
** dropped (MADV_DONTNEED), and perf records the page fault (event
** page-faults, period 1) with the kernel's frame-pointer call chain and
** these registers (perf record --user-regs=ax,bx,cx,dx,si,di,r8-r14):
**   CX   PERFMEM_MAGIC | SKIP<<8 | NFREE<<4 | TYPE (1: an allocation, 2:
**        frees only, 3: the blocks lua_close frees, all those still live);
**        the chain's SKIP leaf frames are the wrapper's own
**        (the trap's IP, and perfmem_allocf if it is there)
**   AX   the block's size in bytes     DX  its address
**   SI   RATE | (PHASE & 0xffff)<<32 | (LASTEND & 0xffff)<<48
**   R8   the trap's sequence number (the kernel may count one fault twice)
**   R13  the interpreter's PC in the innermost Lua frame, as in CPU
**        samples; 0 when not known here (a trace: its address is in the
**        chain)
**   BX, DI, R9, R10, R11, R12, R14: the first NFREE hold sampled blocks
**        freed (or reallocated) since the last trap, oldest first, each
**        ADDRESS | (PHASE at its free & 0xffff)<<48
** Frees wait for the next trap (one of their own only when 7 wait); a stop,
** lua_close, and while switched on remotely a poll 100 ms after the
** oldest, flush them. Those also trap when a cycle completed since the
** last trap (the poll: 100 ms after it), so that the reader knows.
** PHASE counts the GC's cycle boundaries since the start: 2N-1 while the
** Nth cycle seen runs, 2N once it completed (a cycle a full GC abandons
** never completes: the next start goes from 2N-1 to 2N+1). LASTEND is the
** PHASE at which the latest cycle completed (0: none yet).
** The kind of a block is not carried: the reader takes it from the chain.
** Off, the program's own allocator is in g->allocf: no allocation runs
** anything of this file. Everything is taken from the C heap and mmap, never
** from the Lua heap it samples.
*/

#define lj_perfmem_c
#define LUA_CORE

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "lua.h"

#include "lj_obj.h"
#include "lj_frame.h"
#include "lj_perfmem.h"
#include "lj_gc.h"

#if LJ_HASPERFMEM && LJ_TARGET_X64

#define PERFMEM_MAGIC	0x4c4a4d454d0000ull	/* "LJMEM" << 16 */
#define PERFMEM_ALLOC	(PERFMEM_MAGIC | 1u)	/* | SKIP << 8 */
#define PERFMEM_FREE	(PERFMEM_MAGIC | 2u)
#define PERFMEM_CLOSE	(PERFMEM_MAGIC | 3u)
#define PERFMEM_NTRAP	64	/* Trap pages, re-armed by one madvise. */
#define PERFMEM_PAGE	4096
#define PERFMEM_MINLIVE	4096	/* Smallest table of sampled blocks. */
#define PERFMEM_NHINT	4096	/* Hints: sampled blocks per address bucket. */
#define PERFMEM_NFREE	7	/* Frees one trap carries. */
#define PERFMEM_FREEAGE	100000000	/* ns: a remote poll flushes older ones. */

typedef struct PerfMem {
  lua_Alloc allocf;	/* The allocator wrapped, */
  void *allocd;		/* and its state. */
  global_State *g;
  struct PerfMem *next;	/* perfmem_all */
  int64_t left;		/* Bytes until the next sample. */
  uint64_t rate;	/* Mean gap; 0: stopped, passing through. */
  uint64_t rng;		/* xorshift64* state of the gaps. */
  uint64_t seq;		/* Traps made. */
  uint64_t phase;	/* GC cycle boundaries (see above), */
  uint64_t lastend;	/* and the latest completion's, */
  uint64_t saidend;	/* as the last trap said it, */
  int64_t said_t;	/* at this time (CLOCK_MONOTONIC_COARSE). */
  uint64_t pend[PERFMEM_NFREE];	/* Frees waiting for a trap, */
  uint32_t npend;	/* how many, */
  int64_t pend_t;	/* and when the oldest came (CLOCK_MONOTONIC_COARSE). */
  char *trap;		/* PERFMEM_NTRAP pages, */
  uint32_t ntrap;	/* the next one to write. */
  uint32_t mask;	/* Sampled blocks not freed yet: open addressing, */
  uint32_t nlive;	/* linear probing, at most a quarter full. */
  uintptr_t *live;
  uint8_t hint[PERFMEM_NHINT];	/* Live sampled blocks in each bucket of
				** perfmem_hint (255: at least, for good). */
} PerfMem;

/* States with a wrapper. A stop while another wrapper sits on top of ours
** (Tarantool's memprof) cannot unwrap: that one calls ours. Ours then
** passes through (rate 0) and stays listed, to be found again by a start.
*/
static PerfMem *perfmem_all;
static pthread_mutex_t perfmem_mutex = PTHREAD_MUTEX_INITIALIZER;

static PerfMem *perfmem_find(global_State *g)
{
  PerfMem *m;
  for (m = perfmem_all; m; m = m->next)
    if (m->g == g) return m;
  return NULL;
}

/* -- Sampled blocks ------------------------------------------------------- */

/* A block's bucket for the hints: 16-byte granules, 64 KiB apart. */
#define perfmem_hint(p)	(((uintptr_t)(p) >> 4) & (PERFMEM_NHINT-1))

static LJ_AINLINE uint32_t perfmem_hash(PerfMem *m, uintptr_t p)
{
  return (uint32_t)(((uint64_t)(p >> 4) * 0x9e3779b97f4a7c15ull) >> 32) & m->mask;
}

static int perfmem_grow(PerfMem *m)
{
  uint32_t i, osz = m->mask + 1, nsz = osz * 2;
  uintptr_t *old = m->live, *nl = (uintptr_t *)calloc(nsz, sizeof(uintptr_t));
  if (!nl) return 0;
  m->live = nl;
  m->mask = nsz - 1;
  for (i = 0; i < osz; i++)
    if (old[i]) {
      uint32_t h = perfmem_hash(m, old[i]);
      while (nl[h]) h = (h + 1) & m->mask;
      nl[h] = old[i];
    }
  free(old);
  return 1;
}

/* Remembers P; 0 if there is no room (then it is not sampled). */
static int perfmem_add(PerfMem *m, uintptr_t p)
{
  uint32_t h;
  if ((m->nlive + 1) * 4 > m->mask + 1 && !perfmem_grow(m)) return 0;
  h = perfmem_hash(m, p);
  while (m->live[h]) {
    if (m->live[h] == p) return 1;
    h = (h + 1) & m->mask;
  }
  m->live[h] = p;
  m->nlive++;
  if (m->hint[perfmem_hint(p)] < 255) m->hint[perfmem_hint(p)]++;
  return 1;
}

/* Forgets P if it was sampled (backward-shift deletion keeps every probe
** sequence unbroken). Returns whether it was.
*/
static int perfmem_forget(PerfMem *m, uintptr_t p)
{
  uint32_t h = perfmem_hash(m, p), j;
  while (m->live[h] != p) {
    if (!m->live[h]) return 0;
    h = (h + 1) & m->mask;
  }
  for (j = (h + 1) & m->mask; m->live[j]; j = (j + 1) & m->mask) {
    uint32_t k = perfmem_hash(m, m->live[j]);
    /* Move live[j] into the hole at h unless its home k lies in (h, j]. */
    if (h <= j ? (k <= h || k > j) : (k <= h && k > j)) {
      m->live[h] = m->live[j];
      h = j;
    }
  }
  m->live[h] = 0;
  m->nlive--;
  if (m->hint[perfmem_hint(p)] < 255) m->hint[perfmem_hint(p)]--;
  return 1;
}

/* -- Sampling ------------------------------------------------------------- */

/* Bytes to the next sample: exponential with mean RATE. */
static int64_t perfmem_gap(PerfMem *m)
{
  uint64_t x = m->rng;
  double u;
  x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
  m->rng = x;
  u = ((double)((x * 0x2545f4914f6cdd1dull) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  return (int64_t)(-log(u) * (double)m->rate);
}

/* The interpreter's PC in the innermost Lua frame, when the state runs the
** interpreter or a function it called (then the VM saved it in its C frame
** before the call that allocates): the states before LJ_VMST_GC (INTERP
** and C; tarantool/luajit: INTERP, LFUNC, FFUNC, CFUNC), and RECORD, which
** the interpreter keeps while a trace is recorded. The recorder's own
** allocations find its lj_vm_cpcall frame, whose PC is no bytecode (the
** reader checks it against the innermost Lua frame). NULL otherwise.
*/
static const BCIns *perfmem_pc(global_State *g)
{
  int32_t st = (int32_t)g->vmstate;
  if (st < 0 && (~st < LJ_VMST_GC || ~st == LJ_VMST_RECORD)) {
    lua_State *L = gco2th(gcref(g->cur_L));
    void *cf = cframe_raw(L->cframe);
    if (cf) return cframe_pc(cf);
  }
  return NULL;
}

static int64_t perfmem_now(void)
{
  struct timespec ts;
  if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0) return 0;
  return (int64_t)ts.tv_sec*1000000000 + ts.tv_nsec;
}

/* The trap (always inlined: its IP is the chain's leaf frame), with the
** waiting frees. Each page faults once; every PERFMEM_NTRAP traps one
** madvise drops them all again.
*/
static LJ_AINLINE void perfmem_trap(PerfMem *m, uint64_t type, void *p,
				    size_t size, const BCIns *pc)
{
  uint64_t *f = m->pend;
  register uint64_t r8 __asm__("r8") = ++m->seq;
  register uint64_t r9 __asm__("r9") = f[2];
  register uint64_t r10 __asm__("r10") = f[3];
  register uint64_t r11 __asm__("r11") = f[4];
  register uint64_t r12 __asm__("r12") = f[5];
  register uint64_t r13 __asm__("r13") = (uint64_t)(uintptr_t)pc;
  register uint64_t r14 __asm__("r14") = f[6];
  char *page = m->trap + (size_t)m->ntrap * PERFMEM_PAGE;
  __asm__ volatile("movb $0, (%0)"
		   : : "r"(page), "a"(size), "c"(type | (uint64_t)m->npend << 4),
		       "d"(p), "S"(m->rate | (m->phase & 0xffff) << 32 |
			      (m->lastend & 0xffff) << 48), "b"(f[0]),
		       "D"(f[1]), "r"(r8), "r"(r9), "r"(r10), "r"(r11),
		       "r"(r12), "r"(r13), "r"(r14)
		   : "memory");
  m->npend = 0;
  m->saidend = m->lastend;
  m->said_t = perfmem_now();
  if (++m->ntrap == PERFMEM_NTRAP) {
    m->ntrap = 0;
    madvise(m->trap, PERFMEM_NTRAP * PERFMEM_PAGE, MADV_DONTNEED);
  }
}


/* A sampled block P was freed: it waits for the next trap. Returns 1 when
** PERFMEM_NFREE wait (the caller traps).
*/
static int perfmem_pend(PerfMem *m, void *p)
{
  if (!m->npend) m->pend_t = perfmem_now();
  m->pend[m->npend++] = (uint64_t)(uintptr_t)p | (m->phase & 0xffff) << 48;
  return m->npend == PERFMEM_NFREE;
}

/* The waiting frees, in a trap of their own (stop, close, poll), also
** without frees when a cycle completed since the last trap said LASTEND;
** TYPE PERFMEM_FREE, or PERFMEM_CLOSE for those of perfmem_freeall.
*/
static LJ_NOINLINE void perfmem_flush(PerfMem *m, uint64_t type)
{
  if (m->npend || m->lastend != m->saidend)
    perfmem_trap(m, type | 1u << 8, NULL, 0, NULL);
}

/* lua_close frees every block: all sampled ones still live are said. */
static void perfmem_freeall(PerfMem *m)
{
  uint32_t i;
  perfmem_flush(m, PERFMEM_FREE);
  for (i = 0; i <= m->mask; i++)
    if (m->live[i] && perfmem_pend(m, (void *)m->live[i]))
      perfmem_flush(m, PERFMEM_CLOSE);
  perfmem_flush(m, PERFMEM_CLOSE);
}

/* An allocation crossed the gap: the next gap, and P remembered. Returns
** the PC for the trap, or (void *)-1: not sampled (no room to remember P).
*/
static LJ_NOINLINE const BCIns *perfmem_sample(PerfMem *m, void *p)
{
  m->left = perfmem_gap(m);
  if (!perfmem_add(m, (uintptr_t)p)) return (const BCIns *)(intptr_t)-1;
  return perfmem_pc(m->g);
}

static void *perfmem_allocf(void *ud, void *p, size_t osize, size_t nsize);

/* An allocation crossed the gap, or P may be a sampled block. The traps
** sit in this function's body: perfmem_allocf tail-calls it, so the next
** frame of the chain is the allocator's caller (SKIP 1); if it did not
** (no sibling calls at -O0), perfmem_allocf's frame is there too (SKIP 2).
*/
static LJ_NOINLINE void *perfmem_slow(PerfMem *m, void *p, size_t osize,
				      size_t nsize)
{
  void *np = m->allocf(m->allocd, p, osize, nsize);
  uint64_t skip = (uintptr_t)__builtin_return_address(0) -
		  (uintptr_t)perfmem_allocf < 256 ? 2u << 8 : 1u << 8;
  if (p && (np || !nsize) && perfmem_forget(m, (uintptr_t)p) &&
      perfmem_pend(m, p))
    perfmem_trap(m, PERFMEM_FREE | skip, NULL, 0, NULL);
  if (np && nsize && (m->left -= (int64_t)nsize) < 0 && m->rate) {
    const BCIns *pc = perfmem_sample(m, np);
    if (pc != (const BCIns *)(intptr_t)-1)
      perfmem_trap(m, PERFMEM_ALLOC | skip, np, nsize, pc);
  }
  return np;
}

/* The wrapper: the allocator's own work plus a countdown and, for a free
** or a reallocation, one byte of hints.
*/
static void *perfmem_allocf(void *ud, void *p, size_t osize, size_t nsize)
{
  PerfMem *m = (PerfMem *)ud;
  int64_t left = m->left - (int64_t)nsize;
  if (LJ_LIKELY(left >= 0) && LJ_LIKELY(!p || !m->hint[perfmem_hint(p)])) {
    m->left = left;
    return m->allocf(m->allocd, p, osize, nsize);
  }
  return perfmem_slow(m, p, osize, nsize);
}

/* -- Switching ------------------------------------------------------------ */

static void perfmem_reset(PerfMem *m, uint64_t rate)
{
  m->npend = 0;
  m->phase = m->g && m->g->gc.state != GCSpause;
  m->lastend = m->saidend = 0;
  memset(m->live, 0, (size_t)(m->mask + 1) * sizeof(uintptr_t));
  memset(m->hint, 0, sizeof(m->hint));
  m->nlive = 0;
  m->rate = rate;
  m->left = rate ? perfmem_gap(m) : INT64_MAX;
}

/* RATE 0: LUAJIT_PERF_MEMRATE from the environment, else the default (a
** value it cannot use is said once).
*/
static uint64_t perfmem_rate(uint64_t rate)
{
  static int said;
  const char *s;
  char *end;
  unsigned long long v;
  if (rate) return rate;
  s = getenv("LUAJIT_PERF_MEMRATE");
  if (!s || !*s) return LJ_PERFMEM_RATE;
  v = strtoull(s, &end, 10);
  if (!*end && *s >= '0' && *s <= '9' && v >= LJ_PERFMEM_MINRATE &&
      v <= LJ_PERFMEM_MAXRATE)
    return v;
  if (!said) {
    said = 1;
    fprintf(stderr, "ljperf: LUAJIT_PERF_MEMRATE: '%.40s' is not a byte count "
	    "from %u to %u; sampling every %u bytes\n", s, LJ_PERFMEM_MINRATE,
	    LJ_PERFMEM_MAXRATE, LJ_PERFMEM_RATE);
  }
  return LJ_PERFMEM_RATE;
}

int lj_perfmem_start(global_State *g, uint64_t rate)
{
  PerfMem *m;
  int ok = 1;
  pthread_mutex_lock(&perfmem_mutex);
  m = perfmem_find(g);
  if (m) {  /* On, or passing through since a stop that could not unwrap. */
    if (!m->rate) perfmem_reset(m, perfmem_rate(rate));
    goto done;
  }
  m = (PerfMem *)calloc(1, sizeof(PerfMem));
  if (!m) { ok = 0; goto done; }
  m->live = (uintptr_t *)calloc(PERFMEM_MINLIVE, sizeof(uintptr_t));
  m->trap = (char *)mmap(NULL, PERFMEM_NTRAP * PERFMEM_PAGE,
			 PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
  if (!m->live || m->trap == MAP_FAILED) {
    if (m->trap != MAP_FAILED && m->trap)
      munmap(m->trap, PERFMEM_NTRAP * PERFMEM_PAGE);
    free(m->live);
    free(m);
    ok = 0;
    goto done;
  }
#ifdef MADV_NOHUGEPAGE
  madvise(m->trap, PERFMEM_NTRAP * PERFMEM_PAGE, MADV_NOHUGEPAGE);  /* 4 KiB pages. */
#endif
  m->mask = PERFMEM_MINLIVE - 1;
  m->rng = ((uint64_t)(uintptr_t)m ^ (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull) | 1;
  m->g = g;
  m->allocf = g->allocf;
  m->allocd = g->allocd;
  perfmem_reset(m, perfmem_rate(rate));
  m->next = perfmem_all;
  perfmem_all = m;
  g->allocd = m;
  g->allocf = perfmem_allocf;
done:
  pthread_mutex_unlock(&perfmem_mutex);
  return ok;
}

void lj_perfmem_stop(global_State *g, int closing)
{
  PerfMem *m, **pp;
  pthread_mutex_lock(&perfmem_mutex);
  for (pp = &perfmem_all; (m = *pp) != NULL; pp = &m->next)
    if (m->g == g) break;
  if (m) {
    if (closing) perfmem_freeall(m);
    else perfmem_flush(m, PERFMEM_FREE);
    if (g->allocf == perfmem_allocf && g->allocd == m) {  /* Ours on top. */
      g->allocf = m->allocf;
      g->allocd = m->allocd;
      *pp = m->next;
      munmap(m->trap, PERFMEM_NTRAP * PERFMEM_PAGE);
      free(m->live);
      free(m);
    } else {
      perfmem_reset(m, 0);
      if (closing) {  /* The wrapper above still calls it: keep it, unlisted. */
	*pp = m->next;
	m->g = NULL;
      }
    }
  }
  pthread_mutex_unlock(&perfmem_mutex);
}

int lj_perfmem_on(global_State *g)
{
  PerfMem *m;
  pthread_mutex_lock(&perfmem_mutex);
  m = perfmem_find(g);
  pthread_mutex_unlock(&perfmem_mutex);
  return m && m->rate;
}

/* G's sampler, if it samples. Ours on top needs no lock: only G's own
** thread changes its allocator.
*/
static PerfMem *perfmem_of(global_State *g)
{
  PerfMem *m;
  if (g->allocf == perfmem_allocf) return (PerfMem *)g->allocd;
  if (!__atomic_load_n(&perfmem_all, __ATOMIC_RELAXED)) return NULL;
  pthread_mutex_lock(&perfmem_mutex);
  m = perfmem_find(g);
  pthread_mutex_unlock(&perfmem_mutex);
  return m && m->rate ? m : NULL;
}

void lj_perfmem_gc(global_State *g, int end)
{
  PerfMem *m = perfmem_of(g);
  if (!m || !m->rate) return;
  if (!end) m->phase += (m->phase & 1) ? 2 : 1;
  else if ((m->phase & 1)) m->lastend = ++m->phase;
}

void lj_perfmem_poll(global_State *g)
{
  PerfMem *m = perfmem_of(g);
  int64_t now;
  if (!m || (!m->npend && m->lastend == m->saidend)) return;
  now = perfmem_now();
  if ((m->npend && now - m->pend_t >= PERFMEM_FREEAGE) ||
      (m->lastend != m->saidend && now - m->said_t >= PERFMEM_FREEAGE))
    perfmem_flush(m, PERFMEM_FREE);
}

#else

/* With LJ_HASPERF (arm64, 0009) lj_perfint.h's no-op macros stand in for
** these, and ljamalg.c would expand them here. */
#if !LJ_HASPERF
int lj_perfmem_start(global_State *g, uint64_t rate)
{
  UNUSED(g); UNUSED(rate);
  return 0;
}
void lj_perfmem_stop(global_State *g, int closing)
{
  UNUSED(g); UNUSED(closing);
}
int lj_perfmem_on(global_State *g) { UNUSED(g); return 0; }
void lj_perfmem_poll(global_State *g) { UNUSED(g); }
#endif
void lj_perfmem_gc(global_State *g, int end) { UNUSED(g); UNUSED(end); }

#endif
