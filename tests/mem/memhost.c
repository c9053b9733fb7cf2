/*
** Allocation samples of the patched VM, switched from a C host
** (vm_patch/src/lj_perfmem.c), without perf: each check prints "ok NAME" or
** "FAIL NAME: why" and the exit status counts the failures.
**
**   start/stop     luaJIT_perf_start(L, "mem") wraps the allocator and the
**                  status says so; stop puts the host's own back, exactly
**   rate           every trap is a minor page fault: the same work with
**                  samples every 64 KiB takes one fault more per 64 KiB
**                  the host's allocator handed out (within 20%): the frees
**                  of sampled blocks, even with the full GC freeing them
**                  all, ride on those traps (a trap of their own per 7)
**   stacked        a host wrapper put over ours (Tarantool's memprof does
**                  that): a stop cannot unwrap, ours passes through, a
**                  start takes it up again, and once the host's wrapper
**                  is gone a stop unwraps
**   close          lua_close while sampling frees everything through the
**                  host's own allocator (its count of live bytes is 0)
**   threads        two states in two threads sample at once
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"
#include "luajit.h"

static int failures;

static void check(int ok, const char *name, const char *why)
{
  if (ok) printf("ok %s\n", name);
  else { printf("FAIL %s: %s\n", name, why); failures++; }
}

/* The host's allocator: counts live bytes and bytes allocated. */
typedef struct Host { size_t live, total; } Host;

static void *host_alloc(void *ud, void *p, size_t osize, size_t nsize)
{
  Host *h = (Host *)ud;
  if (p) h->live -= osize;
  if (nsize == 0) { free(p); return NULL; }
  p = realloc(p, nsize);
  if (p) { h->live += nsize; h->total += nsize; }
  return p;
}

/* A wrapper of the host's own, stacked over whatever is there. */
typedef struct Wrap { lua_Alloc f; void *ud; long calls; } Wrap;

static void *wrap_alloc(void *ud, void *p, size_t osize, size_t nsize)
{
  Wrap *w = (Wrap *)ud;
  w->calls++;
  return w->f(w->ud, p, osize, nsize);
}

static void run(lua_State *L, const char *code)
{
  if (luaL_dostring(L, code)) {
    fprintf(stderr, "memhost: %s\n", lua_tostring(L, -1));
    exit(2);
  }
}

/* 64 MiB of short-lived strings and tables. */
static const char *WORK =
  "local t = {} for i = 1, 262144 do t[i % 128] = string.rep('x', 200) .. i "
  "t[i % 128 + 200] = {i, i} end";

static long minflt(void)
{
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

static int mem_on(lua_State *L)
{
  return (luaJIT_perf_status(L) & LUAJIT_PERF_MEM) != 0;
}

static void test_startstop(void)
{
  Host h = {0};
  void *ud;
  lua_State *L = lua_newstate(host_alloc, &h);
  luaL_openlibs(L);
  check(!mem_on(L), "start/stop.off", "status says mem before a start");
  check(luaJIT_perf_start(L, "mem") == 0 && mem_on(L), "start/stop.start",
	"start failed or status does not say mem");
  check(lua_getallocf(L, &ud) != host_alloc, "start/stop.wrapped",
	"the allocator is still the host's");
  run(L, WORK);
  check(luaJIT_perf_stop(L, "mem") == 0 && !mem_on(L), "start/stop.stop",
	"stop failed or status still says mem");
  check(lua_getallocf(L, &ud) == host_alloc && ud == &h, "start/stop.unwrapped",
	"the host's allocator is not back");
  lua_close(L);
  check(h.live == 0, "start/stop.close", "bytes left live after lua_close");
}

static void test_rate(void)
{
  Host h = {0};
  long f0, off, on;
  size_t total;
  lua_State *L = lua_newstate(host_alloc, &h);
  char buf[160];
  luaL_openlibs(L);
  run(L, WORK);  /* Warm: the heap has grown to its size. */
  run(L, "collectgarbage()");
  f0 = minflt(); run(L, WORK); run(L, "collectgarbage()"); off = minflt() - f0;
  setenv("LUAJIT_PERF_MEMRATE", "65536", 1);
  luaJIT_perf_start(L, "mem");
  total = h.total;
  f0 = minflt(); run(L, WORK); run(L, "collectgarbage()"); on = minflt() - f0;
  total = h.total - total;
  luaJIT_perf_stop(L, "mem");
  unsetenv("LUAJIT_PERF_MEMRATE");
  {
    double want = (double)total / 65536.0, got = (double)(on - off);
    snprintf(buf, sizeof(buf), "%ld faults with samples, %ld without, "
	     "expected %.0f more (%zu bytes allocated)", on, off, want, total);
    check(got > 0.8 * want && got < 1.2 * want, "rate", buf);
    printf("# rate: %.0f faults more, %.0f expected\n", got, want);
  }
  lua_close(L);
}

static void test_stacked(void)
{
  Host h = {0};
  Wrap w;
  void *ud;
  lua_Alloc ours;
  lua_State *L = lua_newstate(host_alloc, &h);
  luaL_openlibs(L);
  luaJIT_perf_start(L, "mem");
  ours = lua_getallocf(L, &w.ud);
  w.f = ours; w.calls = 0;
  lua_setallocf(L, wrap_alloc, &w);
  luaJIT_perf_stop(L, "mem");
  check(!mem_on(L), "stacked.stop", "status says mem after a stop");
  check(lua_getallocf(L, &ud) == wrap_alloc, "stacked.kept",
	"the host's wrapper was taken away");
  run(L, WORK);
  check(w.calls > 0, "stacked.passes", "the host's wrapper saw no allocation");
  check(luaJIT_perf_start(L, "mem") == 0 && mem_on(L), "stacked.restart",
	"a start after the stop did not take it up again");
  check(lua_getallocf(L, &ud) == wrap_alloc, "stacked.once",
	"a start wrapped a second time");
  run(L, WORK);
  lua_setallocf(L, w.f, w.ud);  /* The host's wrapper goes: ours on top. */
  luaJIT_perf_stop(L, "mem");
  check(lua_getallocf(L, &ud) == host_alloc && ud == &h, "stacked.unwrapped",
	"the host's allocator is not back");
  lua_close(L);
  check(h.live == 0, "stacked.close", "bytes left live after lua_close");
}

static void test_close(void)
{
  Host h = {0};
  lua_State *L = lua_newstate(host_alloc, &h);
  luaL_openlibs(L);
  setenv("LUAJIT_PERF_MEMRATE", "256", 1);
  luaJIT_perf_start(L, "mem");
  unsetenv("LUAJIT_PERF_MEMRATE");
  run(L, "keep = {} for i = 1, 20000 do keep[i] = {i} end");
  lua_close(L);
  check(h.live == 0, "close", "bytes left live after lua_close while sampling");
}

static void *thread_main(void *arg)
{
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  *(int *)arg = luaJIT_perf_start(L, "mem") == 0 && mem_on(L);
  run(L, WORK);
  run(L, WORK);
  lua_close(L);
  return NULL;
}

static void test_threads(void)
{
  pthread_t t[2];
  int ok[2] = {0, 0}, i;
  for (i = 0; i < 2; i++) pthread_create(&t[i], NULL, thread_main, &ok[i]);
  for (i = 0; i < 2; i++) pthread_join(t[i], NULL);
  check(ok[0] && ok[1], "threads", "a state in a thread did not sample");
}

int main(void)
{
  test_startstop();
  test_rate();
  test_stacked();
  test_close();
  test_threads();
  return failures;
}
