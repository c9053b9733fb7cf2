/*
** jit.perf (patch 0003): require("jit.perf") gives start([what]),
** stop([what]) and status(), over lj_perf.c's switch (and, with 0010,
** heapsnapshot(path)). lib_package.c's
** require finds it built in, after every loader a host installs.
*/

#define lib_perf_c
#define LUA_LIB

#include "lua.h"
#include "lauxlib.h"
#include "luajit.h"

#include "lj_obj.h"
#include "lj_perfint.h"

#if LJ_HASPERF

static unsigned perf_argparts(lua_State *L)
{
  unsigned mask;
  char bad[48];
  const char *what = luaL_optstring(L, 1, "1");
  if (lj_perf_parse(what, &mask, bad, sizeof(bad)) < 0)
    luaL_error(L, "unknown part '%s' (use " PERF_VALUES ")", bad);
  return mask;
}

static int perf_lstart(lua_State *L)
{
  unsigned failed = lj_perf_start(L, perf_argparts(L), 0);
  if (failed) {
    char buf[32];
    lua_pushnil(L);
    lua_pushfstring(L, "could not start:%s", lj_perf_partnames(failed, buf));
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int perf_lstop(lua_State *L)
{
  lj_perf_stop(L, perf_argparts(L));
  lua_pushboolean(L, 1);
  return 1;
}

static int perf_lstatus(lua_State *L)
{
  unsigned mask = lj_perf_status(G(L));
  lua_createtable(L, 0, 5);
  lua_pushboolean(L, (mask & LUAJIT_PERF_MAP) != 0);
  lua_setfield(L, -2, "map");
  lua_pushboolean(L, (mask & LUAJIT_PERF_JITDUMP) != 0);
  lua_setfield(L, -2, "jitdump");
  lua_pushboolean(L, (mask & LUAJIT_PERF_FRAMES) != 0);
  lua_setfield(L, -2, "frames");
  lua_pushboolean(L, (mask & PERF_MEM) != 0);
  lua_setfield(L, -2, "mem");
  lua_pushboolean(L, (mask & PERF_REMOTE) != 0);
  lua_setfield(L, -2, "remote");
  return 1;
}

int luaopen_jit_perf(lua_State *L)
{
  static const luaL_Reg funcs[] = {
    { "start", perf_lstart }, { "stop", perf_lstop },
    { "status", perf_lstatus }, { NULL, NULL }
  };
  lua_createtable(L, 0, 3);
  luaL_register(L, NULL, funcs);
  lj_heapsnap_open(L);  /* 0010: heapsnapshot(path) */
  return 1;
}

#endif
