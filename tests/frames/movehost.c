/* Runs a Lua program as `luajit [-joff] FILE ARGS...` does (arg table,
** traceback on errors), in a lua_State whose allocator moves every block it
** resizes. LuaJIT's own allocator shrinks a block in place, so a Lua stack
** shrunk by the GC never moves under `luajit`; under this host every shrink
** (and growth) of a stack moves it, with its live frames. The program sees
** the global MOVING_ALLOC = true and the count movehost_big_shrinks. Used
** by tests/frames (case stackmove). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include <luajit.h>

/* Shrinking resizes of blocks of 64 KiB or more: the program reads it
** through the FFI (ffi.C.movehost_big_shrinks) to see its stacks moved. */
unsigned long movehost_big_shrinks;

/* Never in place: a new block, the old contents, the old block freed. */
static void *moving_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
  void *p;
  (void)ud;
  if (nsize == 0) {
    free(ptr);
    return NULL;
  }
  p = malloc(nsize);
  if (p && ptr) {
    memcpy(p, ptr, osize < nsize ? osize : nsize);
    free(ptr);
    if (nsize < osize && osize >= 65536) movehost_big_shrinks++;
  }
  return p;
}

static int traceback(lua_State *L)
{
  luaL_traceback(L, L, lua_tostring(L, 1), 1);
  return 1;
}

int main(int argc, char **argv)
{
  lua_State *L;
  int i = 1, k;
  int jit = 1;
  if (i < argc && strcmp(argv[i], "-joff") == 0) {
    jit = 0;
    i++;
  }
  if (i >= argc) {
    fprintf(stderr, "usage: movehost [-joff] FILE [ARGS...]\n");
    return 2;
  }
  L = lua_newstate(moving_alloc, NULL);
  if (!L) {
    fprintf(stderr, "movehost: cannot create a Lua state\n");
    return 2;
  }
  luaL_openlibs(L);
  if (!jit) luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
  lua_pushboolean(L, 1);
  lua_setglobal(L, "MOVING_ALLOC");
  lua_createtable(L, argc - i, i + 1);  /* arg[0] = FILE, arg[1..] = ARGS */
  for (k = 0; k < argc; k++) {
    lua_pushstring(L, argv[k]);
    lua_rawseti(L, -2, k - i);
  }
  lua_setglobal(L, "arg");
  lua_pushcfunction(L, traceback);
  if (luaL_loadfile(L, argv[i]) != 0 || lua_pcall(L, 0, 0, -2) != 0) {
    fprintf(stderr, "movehost: %s\n", lua_tostring(L, -1));
    lua_close(L);
    return 1;
  }
  lua_close(L);
  return 0;
}
