/* memtraps: emits memory-sampling traps exactly as the patched VM does
** (docs/memory.md, "The trap protocol"), from plain C, so lj_merge --mem
** can be checked against a known truth (tests/lj_merge/mem.py).
**
**   memtraps N RATE TRUTH_FILE
**
** Each of N rounds: f_a allocates 64 bytes, f_b 1000, f_c 20000 (malloc),
** each through mem_alloc(), which samples Go's way (exponential gaps with
** mean RATE bytes, from a fixed-seed generator: the same run every time).
** A sampled allocation makes a trap: CX = "LJMEM" magic | SKIP << 8 |
** NFREE << 4 | 1, AX = size, DX = address, SI = RATE | PHASE << 32 |
** LASTEND << 48, R8 = sequence number, R13 = 0, the NFREE sampled blocks
** freed since the last trap in BX, DI, R9, R10, R11, R12, R14 (address |
** PHASE << 48), and one byte written to a page dropped with
** madvise(MADV_DONTNEED), so the kernel takes a page fault there (perf's
** page-faults event). When 7 frees wait, they trap alone (TYPE 2); the end
** flushes them so too, then frees every block still live as lua_close does
** (TYPE 3 traps: in use as before in both views). f_c's blocks are freed at
** once.
**
** Then a GC cycle, as the VM marks one (PHASE 1 while it runs, 2 once it
** completed, LASTEND 2): during it, even f_b blocks are freed and N/4 more
** f_a blocks allocated; after it, f_b blocks i % 4 == 1 are freed and N/4
** more f_a allocated. In use as of that cycle: allocated before it began
** and not freed by its end; in use now: not freed.
**
** TRUTH_FILE gets, per function, Go's scaling of what was sampled
** (w = 1 / (1 - exp(-S / RATE)) per sampled allocation of S bytes):
**   F alloc_objects alloc_space inuse_objects inuse_space traps now_objects now_space
** (inuse_*: as of the cycle) and a line `traps ALLOCS FREES FLUSHES CLOSED
** CLOSES` (every allocation trap, every sampled free, every trap of frees
** only; the frees and traps of the close).
*/

#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAGIC       0x4c4a4d454d0000ULL  /* "LJMEM" in bits 16..55 */
#define SKIP        1                    /* the trap's own IP, in mem_alloc/mem_free */
#define T_ALLOC     1
#define T_FREE      2
#define T_CLOSE     3
#define NFREE       7                    /* frees one trap carries */
#define TRAP_PAGES  64

static char *trap_area;
static long page_size;
static unsigned trap_next;               /* next page of trap_area to touch */
static uint64_t seq;                     /* R8: one per trap */
static uint64_t rate;
static uint64_t phase, lastend;          /* the GC cycle boundaries */
static uint64_t pend[NFREE];             /* sampled frees waiting for a trap */
static unsigned npend;
static double next_gap;                  /* bytes until the next sample */
static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static unsigned long n_alloc_traps, n_frees, n_flushes, n_closed, n_closes;

/* Index of each function in truth[]. */
enum { F_A, F_B, F_C, NF };
static const char *fname[NF] = { "f_a", "f_b", "f_c" };
static double truth[NF][2];              /* alloc_objects, alloc_space */
static unsigned long ftraps[NF];

struct block { char *p; size_t size; int sampled; int f; long aphase, fphase; };

static double uniform(void)              /* (0, 1], xorshift64* */
{
  rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
  return ((rng * 0x2545f4914f6cdd1dULL) >> 11) / 9007199254740992.0 + 1e-17;
}

static void arm(void)
{
  if (trap_next == TRAP_PAGES) {         /* one madvise per TRAP_PAGES traps */
    if (madvise(trap_area, TRAP_PAGES * page_size, MADV_DONTNEED)) { perror("madvise"); exit(1); }
    trap_next = 0;
  }
}

/* The trap: registers as the protocol says, then a write to a dropped page.
** Inlined into the allocator wrapper, as in the VM: the faulting IP is the
** wrapper's (SKIP = 1), the call chain's next entry its caller. */
static inline __attribute__((always_inline)) void mem_trap(uint64_t type, uint64_t size, void *addr)
{
  char *page;
  arm();
  page = trap_area + (size_t)trap_next++ * page_size;
  {
    register uint64_t r8 __asm__("r8") = ++seq;
    register uint64_t r9 __asm__("r9") = pend[2];
    register uint64_t r10 __asm__("r10") = pend[3];
    register uint64_t r11 __asm__("r11") = pend[4];
    register uint64_t r12 __asm__("r12") = pend[5];
    register uint64_t r13 __asm__("r13") = 0;
    register uint64_t r14 __asm__("r14") = pend[6];
    __asm__ volatile("movb $1, (%[p])"
                     : : [p] "r" (page), "a" (size),
                         "c" (MAGIC | (SKIP << 8) | (uint64_t)npend << 4 | type), "d" (addr),
                         "S" (rate | (phase & 0xffff) << 32 | (lastend & 0xffff) << 48),
                         "b" (pend[0]), "D" (pend[1]), "r" (r8), "r" (r9), "r" (r10),
                         "r" (r11), "r" (r12), "r" (r13), "r" (r14)
                     : "memory");
  }
  npend = 0;
}

static double weight(size_t size)
{
  return 1.0 / (1.0 - exp(-(double)size / (double)rate));
}

/* The allocator wrapper (the VM's lj_mem_newgco role): samples, traps. */
/* The allocator wrapper (the VM's lj_mem_newgco role): samples, traps. */
__attribute__((noinline)) static struct block mem_alloc(size_t size, int f)
{
  struct block b = { malloc(size), size, 0, f, (long)phase, -1 };
  if (!b.p) { perror("malloc"); exit(1); }
  b.p[0] = 1;
  next_gap -= (double)size;
  if (next_gap <= 0) {
    double w = weight(size);
    b.sampled = 1;
    next_gap = -log(uniform()) * (double)rate;
    truth[f][0] += w;
    truth[f][1] += w * (double)size;
    ftraps[f]++;
    n_alloc_traps++;
    mem_trap(T_ALLOC, size, b.p);
  }
  return b;
}

/* A sampled block's free waits for the next trap (one of its own when
** NFREE wait). */
__attribute__((noinline)) static void mem_free(struct block *b)
{
  if (b->sampled) {
    n_frees++;
    pend[npend++] = (uint64_t)(uintptr_t)b->p | (phase & 0xffff) << 48;
    if (npend == NFREE) {
      n_flushes++;
      mem_trap(T_FREE, 0, NULL);
    }
  }
  free(b->p);
  b->fphase = (long)phase;
}

/* What lua_close does: every sampled block still live freed, in traps of
** their own. */
__attribute__((noinline)) static void mem_close(struct block *bs, long n)
{
  long i;
  for (i = 0; i < n; i++)
    if (bs[i].sampled && bs[i].fphase < 0) {
      n_closed++;
      pend[npend++] = (uint64_t)(uintptr_t)bs[i].p | (phase & 0xffff) << 48;
      if (npend == NFREE) { n_closes++; mem_trap(T_CLOSE, 0, NULL); }
    }
}

/* What a stop does: the waiting frees in a trap of their own. */
__attribute__((noinline)) static void mem_flush(void)
{
  if (npend) {
    n_flushes++;
    mem_trap(T_FREE, 0, NULL);
  }
}

/* Adds B to the in-use truth of both views. */
static void count(double inuse[NF][4], const struct block *b)
{
  double w;
  if (!b->sampled) return;
  w = weight(b->size);
  if (b->aphase <= (long)lastend - 2 && (b->fphase < 0 || b->fphase >= (long)lastend)) {
    inuse[b->f][0] += w;
    inuse[b->f][1] += w * (double)b->size;
  }
  if (b->fphase < 0) {
    inuse[b->f][2] += w;
    inuse[b->f][3] += w * (double)b->size;
  }
}

/* The callers lj_merge must name: each uses the block after the call (no
** tail call, so each keeps its frame in the chain). */
__attribute__((noinline)) struct block f_a(void) { struct block b = mem_alloc(64, F_A); b.p[1] = 2; return b; }
__attribute__((noinline)) struct block f_b(void) { struct block b = mem_alloc(1000, F_B); b.p[1] = 2; return b; }
__attribute__((noinline)) void f_c(struct block *c) { *c = mem_alloc(20000, F_C); c->p[1] = 2; mem_free(c); }

int main(int argc, char **argv)
{
  long n, i, na;
  struct block *as, *bs, *cs;
  double inuse[NF][4] = {{0}};
  FILE *out;
  if (argc != 4) { fprintf(stderr, "usage: memtraps N RATE TRUTH_FILE\n"); return 2; }
  n = atol(argv[1]);
  rate = strtoull(argv[2], NULL, 10);
  if (n <= 0 || rate == 0) { fprintf(stderr, "memtraps: bad N or RATE\n"); return 2; }
  page_size = sysconf(_SC_PAGESIZE);
  trap_area = mmap(NULL, TRAP_PAGES * page_size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (trap_area == MAP_FAILED) { perror("mmap"); return 1; }
  if (madvise(trap_area, TRAP_PAGES * page_size, MADV_NOHUGEPAGE)) { perror("madvise"); return 1; }
  trap_next = TRAP_PAGES;                /* armed at the first trap */
  next_gap = -log(uniform()) * (double)rate;
  na = n + n / 4 * 2;
  as = calloc(na, sizeof *as);
  bs = calloc(n, sizeof *bs);
  cs = calloc(n, sizeof *cs);
  if (!as || !bs || !cs) { perror("calloc"); return 1; }
  for (i = 0; i < n; i++) {
    as[i] = f_a();
    bs[i] = f_b();
    f_c(&cs[i]);
  }
  phase = 1;                             /* a cycle starts */
  for (i = 0; i < n; i += 2) mem_free(&bs[i]);
  for (i = 0; i < n / 4; i++) as[n + i] = f_a();
  phase = lastend = 2;                   /* and completes */
  for (i = 1; i < n; i += 4) mem_free(&bs[i]);
  for (i = 0; i < n / 4; i++) as[n + n / 4 + i] = f_a();
  mem_flush();
  for (i = 0; i < na; i++) count(inuse, &as[i]);
  for (i = 0; i < n; i++) count(inuse, &bs[i]);
  for (i = 0; i < n; i++) count(inuse, &cs[i]);
  mem_close(as, na);
  mem_close(bs, n);
  if (npend) { n_closes++; mem_trap(T_CLOSE, 0, NULL); }
  out = fopen(argv[3], "w");
  if (!out) { perror(argv[3]); return 1; }
  for (i = 0; i < NF; i++)
    fprintf(out, "%s %.6f %.6f %.6f %.6f %lu %.6f %.6f\n", fname[i], truth[i][0], truth[i][1],
            inuse[i][0], inuse[i][1], ftraps[i], inuse[i][2], inuse[i][3]);
  fprintf(out, "traps %lu %lu %lu %lu %lu\n", n_alloc_traps, n_frees + n_closed, n_flushes,
          n_closed, n_closes);
  fclose(out);
  return 0;
}
