/*
** End-to-end subject for perf: generates a few x86-64 functions in anonymous
** executable memory, describes them with ljp_emit_load (line tables point
** at a fake source file) and runs them.
**
**   e2e_prog MODE SECONDS
**   MODE run       describe once, run
**        flip      like LuaJIT compiling a trace: after half the time flip
**                  the code page RX->RW, add a function, flip back RW->RX,
**                  describe only the new function
**        flip-re   same, then describe all live functions again
**        same      two loads with identical bytes and different names at
**                  the same address (build-id merge probe): lj_same_a runs
**                  first, then the same bytes are re-described as lj_same_b
** Prints "pid N" and "flip_ns T" (CLOCK_MONOTONIC) on stdout.
** Env: LUAJIT_PERF_DIR (jitdump directory), E2E_OUTPUTS=map|jitdump|both.
*/
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ljperf_emit.h"

#define SRC "/fake/lj/e2e_source.lua"

typedef struct Fn {
  const char *name;
  uint8_t *p;		/* start */
  size_t size;
  LJPLine lines[4];
  size_t nlines;
} Fn;

static uint8_t *pc, *base;

static uint64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void emit(const void *b, size_t n) { memcpy(pc, b, n); pc += n; }
static void prologue(void) { emit("\x55\x48\x89\xe5", 4); }	/* push rbp; mov rbp,rsp */
static void epilogue(void) { emit("\x5d\xc3", 2); }		/* pop rbp; ret */
static void call(const Fn *f)
{
  int32_t rel = (int32_t)(f->p - (pc + 5));
  emit("\xe8", 1); emit(&rel, 4);
}
static void line(Fn *f, uint32_t l)
{
  f->lines[f->nlines].addr = (uint64_t)(uintptr_t)pc;
  f->lines[f->nlines].line = l;
  f->lines[f->nlines].file = SRC;
  f->nlines++;
}

/* Leaf: a counted loop. Lines: L prologue, L+1 setup, L+2 loop, L+3 exit. */
static void gen_leaf(Fn *f, const char *name, uint32_t iters, uint32_t l)
{
  f->name = name; f->p = pc; f->nlines = 0;
  line(f, l); prologue();
  line(f, l + 1); emit("\xb9", 1); emit(&iters, 4);	/* mov ecx, iters */
  line(f, l + 2); emit("\xff\xc9\x75\xfc", 4);		/* 1: dec ecx; jnz 1b */
  line(f, l + 3); epilogue();
  f->size = (size_t)(pc - f->p);
}

/* Caller of up to two functions. Lines: L prologue, L+1 calls, L+2 exit. */
static void gen_caller(Fn *f, const char *name, const Fn *a, const Fn *b, uint32_t l)
{
  f->name = name; f->p = pc; f->nlines = 0;
  line(f, l); prologue();
  line(f, l + 1); call(a); if (b) call(b);
  emit("\x90", 1);  /* nop: return addresses stay on the call line */
  line(f, l + 2); epilogue();
  f->size = (size_t)(pc - f->p);
}

static void describe(const Fn *f)
{
  ljp_emit_load((uint64_t)(uintptr_t)f->p, f->size, f->name, NULL, f->lines, f->nlines);
}

static void run_for(void (*fn)(void), double secs)
{
  uint64_t end = now_ns() + (uint64_t)(secs * 1e9);
  while (now_ns() < end) fn();
}

int main(int argc, char **argv)
{
  if (argc != 3) { fprintf(stderr, "usage: %s run|flip|flip-re|same SECONDS\n", argv[0]); return 2; }
  const char *mode = argv[1];
  double secs = atof(argv[2]);
  const char *outs = getenv("E2E_OUTPUTS");
  unsigned mask = LJP_MAP | LJP_JITDUMP;
  if (outs && !strcmp(outs, "map")) mask = LJP_MAP;
  if (outs && !strcmp(outs, "jitdump")) mask = LJP_JITDUMP;
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  base = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) { perror("mmap"); return 1; }
  pc = base;
  static Fn gamma_, delta_, beta_, alpha_, eps_, same_;
  gen_leaf(&gamma_, "lj_gamma", 3000000, 20);
  gen_leaf(&delta_, "lj_delta", 1000000, 30);
  gen_caller(&beta_, "lj_beta", &gamma_, &delta_, 40);
  gen_caller(&alpha_, "lj_alpha", &beta_, NULL, 50);
  if (mprotect(base, 2 * pg, PROT_READ | PROT_EXEC)) { perror("mprotect"); return 1; }
  if (ljp_emit_open(mask, NULL) != mask) { fprintf(stderr, "ljp_emit_open failed\n"); return 1; }
  printf("pid %d\n", (int)getpid());
  void (*alpha)(void) = (void (*)(void))(uintptr_t)alpha_.p;
  uint64_t flip = 0;

  if (!strcmp(mode, "same")) {
    /* Identical bytes, same address, two names, one after the other. */
    pc = base + pg / 2;
    if (mprotect(base, 2 * pg, PROT_READ | PROT_WRITE)) return 1;
    gen_leaf(&same_, "lj_same_a", 2000000, 60);
    if (mprotect(base, 2 * pg, PROT_READ | PROT_EXEC)) return 1;
    describe(&same_);
    void (*same)(void) = (void (*)(void))(uintptr_t)same_.p;
    run_for(same, secs / 2);
    flip = now_ns();
    same_.name = "lj_same_b";
    for (size_t i = 0; i < same_.nlines; i++) same_.lines[i].line += 100;
    describe(&same_);
    run_for(same, secs / 2);
  } else {
    describe(&gamma_); describe(&delta_); describe(&beta_); describe(&alpha_);
    if (!strcmp(mode, "run")) {
      run_for(alpha, secs);
    } else {
      run_for(alpha, secs / 2);
      /* LuaJIT-style: unprotect, write new code, protect again. */
      if (mprotect(base, 2 * pg, PROT_READ | PROT_WRITE)) { perror("mprotect"); return 1; }
      pc = base + pg / 2;
      gen_leaf(&eps_, "lj_epsilon", 1000, 70);
      if (mprotect(base, 2 * pg, PROT_READ | PROT_EXEC)) { perror("mprotect"); return 1; }
      flip = now_ns();
      describe(&eps_);
      if (!strcmp(mode, "flip-re")) {
	int fresh;
	ljp_emit_begin(&fresh);
	describe(&gamma_); describe(&delta_); describe(&beta_); describe(&alpha_);
      }
      run_for(alpha, secs / 2);
    }
  }
  printf("flip_ns %llu\n", (unsigned long long)flip);
  ljp_emit_close();
  return 0;
}
