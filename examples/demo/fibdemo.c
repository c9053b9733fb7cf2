/*
** ljperf demo: a C host running alternating C and Lua recursive Fibonacci.
**
**   main -> lua_pcall -> demo.lua: run() -> fib_lua(n)
**   fib_lua(n) (Lua) = fib_c(n-1) + fib_c(n-2)       through the FFI
**   fib_c(n)   (C)   = fib_lua(n-1) + fib_lua(n-2)   through an FFI callback
**
** Leaves burn CPU either in Lua (lua_work) or in C (c_work) and time
** themselves, so the program prints the Lua/C split it measured; a profile
** of it must show the same split.
**
** usage: fibdemo [SECONDS] [SCRIPT]   (default: 3, demo.lua next to us)
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

typedef int (*fib_cb)(int);
static fib_cb fib_lua_cb;
static double c_seconds;

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Leaf work in C: a fixed amount, timed. */
__attribute__((noinline)) static int c_work(int n)
{
  double t0 = now();
  volatile double x = n;
  int i;
  for (i = 0; i < 40000; i++) x = x * 1.0000001 + 1e-9;
  c_seconds += now() - t0;
  return 1;
}

/* Called from Lua through the FFI. */
__attribute__((noinline)) int fib_c(int n)
{
  if (n < 2) return c_work(n);
  return fib_lua_cb(n - 1) + fib_lua_cb(n - 2);
}

void fib_set_callback(fib_cb cb) { fib_lua_cb = cb; }
double fib_c_seconds(void) { return c_seconds; }

int main(int argc, char **argv)
{
  double seconds = argc > 1 ? atof(argv[1]) : 3.0;
  char path[4096];
  lua_State *L;
  if (argc > 2) {
    snprintf(path, sizeof(path), "%s", argv[2]);
  } else {  /* demo.lua next to the executable */
    const char *slash = strrchr(argv[0], '/');
    int dir = slash ? (int)(slash - argv[0]) + 1 : 0;
    snprintf(path, sizeof(path), "%.*sdemo.lua", dir, argv[0]);
  }
  L = luaL_newstate();
  if (!L) return 2;
  luaL_openlibs(L);
  if (luaL_loadfile(L, path) != 0) {
    fprintf(stderr, "fibdemo: %s\n", lua_tostring(L, -1));
    return 1;
  }
  lua_pushnumber(L, seconds);
  if (lua_pcall(L, 1, 0, 0) != 0) {
    fprintf(stderr, "fibdemo: %s\n", lua_tostring(L, -1));
    return 1;
  }
  lua_close(L);
  return 0;
}
