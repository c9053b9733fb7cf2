/* heap.errors: luaJIT_perf_heapsnapshot from a C host: GOOD_PATH gives 0,
** BAD_PATH -1 (and one line on stderr); the state goes on. */
#include <stdio.h>
#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"
#include "luajit.h"

int main(int argc, char **argv)
{
  lua_State *L;
  if (argc != 3) { fprintf(stderr, "usage: heaphost GOOD_PATH BAD_PATH\n"); return 2; }
  L = luaL_newstate();
  luaL_openlibs(L);
  if (luaL_dostring(L, "KEEP = {} for i = 1, 100 do KEEP[i] = {i} end") != 0) return 1;
  printf("%d\n", luaJIT_perf_heapsnapshot(L, argv[1]));
  printf("%d\n", luaJIT_perf_heapsnapshot(L, argv[2]));
  if (luaL_dostring(L, "assert(#KEEP == 100)") != 0) return 1;
  printf("alive\n");
  lua_close(L);
  return 0;
}
