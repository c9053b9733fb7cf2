/*
** A C host with its own poll loop (tests/offcpu, case idle): ROUNDS
** (argv[1]) times, it waits 20 ms in poll() on a pipe nobody writes, with
** no Lua frame on its stack (the host's idle event loop), then calls the
** Lua function `handler` (argv[2], a file returning it), which blocks
** 20 ms in usleep through the FFI. Prints `time idle S` and
** `time handler S` (CLOCK_MONOTONIC) and `time total S`.
*/
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void host_wait(int fd)
{
  struct pollfd p = { fd, POLLIN, 0 };
  poll(&p, 1, 20);
}

int main(int argc, char **argv)
{
  int rounds = argc > 1 ? atoi(argv[1]) : 50, fds[2], i;
  double idle = 0, handler = 0, t0, t;
  lua_State *L;
  if (argc < 3 || pipe(fds) != 0) {
    fprintf(stderr, "usage: pollhost ROUNDS HANDLER.lua\n");
    return 2;
  }
  L = luaL_newstate();
  luaL_openlibs(L);
  if (luaL_dofile(L, argv[2]) != 0) {
    fprintf(stderr, "pollhost: %s\n", lua_tostring(L, -1));
    return 1;
  }
  lua_setglobal(L, "handler");
  t0 = now();
  for (i = 0; i < rounds; i++) {
    t = now();
    host_wait(fds[0]);
    idle += now() - t;
    t = now();
    lua_getglobal(L, "handler");
    if (lua_pcall(L, 0, 0, 0) != 0) {
      fprintf(stderr, "pollhost: %s\n", lua_tostring(L, -1));
      return 1;
    }
    handler += now() - t;
  }
  printf("time idle %.6f\ntime handler %.6f\ntime total %.6f\n", idle, handler, now() - t0);
  lua_close(L);
  return 0;
}
