/*
** C hosts of the patched VM for the end-to-end tests (vm_under_perf.py):
**
**   host threads ITERATIONS   two pthreads, each with its own lua_State
**                             (perf support from LUAJIT_PERF), run chunks
**                             "=thread_a" / "=thread_b" at the same time.
**                             Prints "thread a TID RESULT" per thread.
**   host serial ITERATIONS    the same two states one after the other in
**                             the main thread: the second is created after
**                             the first was closed.
**   host capi ITERATIONS      LUAJIT_PERF unset: loads "=capi_chunk",
**                             runs it, then luaJIT_perf_start(L, NULL),
**                             runs it again, luaJIT_perf_stop(L, NULL).
**                             Prints the status after each step and
**                             "phase T0 T1" (CLOCK_MONOTONIC ns) around
**                             the run after the start; then tries "bogus"
**                             and "all" (both rejected) and "map,jitdump"
**                             (status "parts"). Status: the number and the
**                             names of its LUAJIT_PERF_* bits.
*/
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"
#include "luajit.h"

static long iterations;

/* Each chunk's hot function is on line 1, its loop on line 3. */
static const char *chunk_src =
  "local function %s(n)\n"
  "  local s = 0\n"
  "  for i = 1, n do s = (s + i * %d) %% 1000003 end\n"
  "  return s\n"
  "end\n"
  "return %s\n";

static void die(lua_State *L, const char *what)
{
  fprintf(stderr, "host: %s: %s\n", what, L ? lua_tostring(L, -1) : "?");
  exit(2);
}

/* Loads chunk NAME defining function FN; leaves the function on the stack. */
static void load_fn(lua_State *L, const char *name, const char *fn, int k)
{
  char src[512];
  snprintf(src, sizeof(src), chunk_src, fn, k, fn);
  if (luaL_loadbuffer(L, src, strlen(src), name) || lua_pcall(L, 0, 1, 0))
    die(L, name);
}

/* Calls the function at the top of the stack with N, keeps the function. */
static long call_fn(lua_State *L, long n)
{
  long r;
  lua_pushvalue(L, -1);
  lua_pushnumber(L, (lua_Number)n);
  if (lua_pcall(L, 1, 1, 0)) die(L, "call");
  r = (long)lua_tonumber(L, -1);
  lua_pop(L, 1);
  return r;
}

static unsigned long long now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

typedef struct Job {
  const char *tag, *chunk, *fn;
  int k, concurrent;
  long result, tid;
  unsigned long long t0, t1;
} Job;

static pthread_barrier_t barrier;

static void *thread_main(void *arg)
{
  Job *j = (Job *)arg;
  lua_State *L = luaL_newstate();
  if (!L) die(NULL, "luaL_newstate");
  luaL_openlibs(L);
  j->tid = (long)syscall(SYS_gettid);
  if (j->concurrent)
    pthread_barrier_wait(&barrier);  /* Both states exist: load concurrently. */
  load_fn(L, j->chunk, j->fn, j->k);
  j->t0 = now_ns();
  j->result = call_fn(L, iterations);
  j->t1 = now_ns();
  lua_close(L);
  return NULL;
}

static int run_threads(int concurrent)
{
  Job jobs[2] = { { "a", "=thread_a", "work_a", 3, concurrent, 0, 0, 0, 0 },
		  { "b", "=thread_b", "work_b", 5, concurrent, 0, 0, 0, 0 } };
  pthread_t th[2];
  int i;
  if (concurrent) {
    pthread_barrier_init(&barrier, NULL, 2);
    for (i = 0; i < 2; i++)
      if (pthread_create(&th[i], NULL, thread_main, &jobs[i])) die(NULL, "pthread_create");
    for (i = 0; i < 2; i++) pthread_join(th[i], NULL);
  } else {
    for (i = 0; i < 2; i++) thread_main(&jobs[i]);
  }
  for (i = 0; i < 2; i++)
    printf("thread %s %ld %ld %llu %llu\n", jobs[i].tag, jobs[i].tid, jobs[i].result,
	   jobs[i].t0, jobs[i].t1);
  return 0;
}

/* Prints "status WHEN BITS PART..." from the LUAJIT_PERF_* bits. */
static void print_status(lua_State *L, const char *when)
{
  int st = luaJIT_perf_status(L);
  printf("status %s %d%s%s%s\n", when, st,
	 (st & LUAJIT_PERF_MAP) ? " map" : "",
	 (st & LUAJIT_PERF_JITDUMP) ? " jitdump" : "",
	 (st & LUAJIT_PERF_FRAMES) ? " frames" : "");
}

static int run_capi(void)
{
  lua_State *L = luaL_newstate();
  long r;
  unsigned long long t0, t1;
  if (!L) die(NULL, "luaL_newstate");
  luaL_openlibs(L);
  printf("pid %d\n", (int)getpid());
  print_status(L, "initial");
  load_fn(L, "=capi_chunk", "capi_work", 7);
  r = call_fn(L, iterations / 4);	/* Before the start (and compiled). */
  printf("start %d\n", luaJIT_perf_start(L, NULL));
  print_status(L, "started");
  t0 = now_ns();
  r += call_fn(L, iterations);
  t1 = now_ns();
  printf("phase %llu %llu\n", t0, t1);
  printf("stop %d\n", luaJIT_perf_stop(L, NULL));
  print_status(L, "stopped");
  printf("bad part %d\n", luaJIT_perf_start(L, "bogus"));
  printf("all %d\n", luaJIT_perf_start(L, "all"));  /* Undocumented: no. */
  if (luaJIT_perf_start(L, "map,jitdump") == 0) print_status(L, "parts");
  luaJIT_perf_stop(L, NULL);
  printf("result %ld\n", r);
  lua_close(L);
  return 0;
}

int main(int argc, char **argv)
{
  if (argc != 3) {
    fprintf(stderr, "usage: %s threads|serial|capi ITERATIONS\n", argv[0]);
    return 2;
  }
  iterations = atol(argv[2]);
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (!strcmp(argv[1], "threads")) return run_threads(1);
  if (!strcmp(argv[1], "serial")) return run_threads(0);
  if (!strcmp(argv[1], "capi")) return run_capi();
  fprintf(stderr, "unknown mode %s\n", argv[1]);
  return 2;
}
