/* C host embedding the patched VM: main -> lua_pcall -> Lua -> host_outer
** -> lua_call -> Lua -> host_inner (burns CPU). Used to check that
** frame-pointer call chains show these frames in this order. */
#include <stdio.h>
#include <stdlib.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

__attribute__((noinline)) static int host_inner(lua_State *L)
{
  volatile double x = 1.0;
  long i, n = (long)luaL_checkinteger(L, 1);
  for (i = 0; i < n; i++) x = x * 1.0000001 + 1e-9;
  lua_pushnumber(L, x);
  return 1;
}

/* host_outer(f, n): calls Lua function f(n) with lua_call. */
__attribute__((noinline)) static int host_outer(lua_State *L)
{
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 2);
  lua_call(L, 1, 1);
  return 1;
}

static const char script[] =
  "local rounds, n = ...\n"
  "local function lua_inner(k) local r = host_inner(k) return r end\n"
  "local function lua_outer(k) local r = host_outer(lua_inner, k) return r end\n"
  "local s = 0\n"
  "for i = 1, rounds do s = s + lua_outer(n) end\n"
  "return s\n";

int main(int argc, char **argv)
{
  lua_State *L = luaL_newstate();
  long rounds = argc > 1 ? atol(argv[1]) : 2000;
  long n = argc > 2 ? atol(argv[2]) : 200000;
  if (!L) return 2;
  luaL_openlibs(L);
  lua_register(L, "host_inner", host_inner);
  lua_register(L, "host_outer", host_outer);
  if (luaL_loadbuffer(L, script, sizeof(script) - 1, "=host") != 0) {
    fprintf(stderr, "load: %s\n", lua_tostring(L, -1));
    return 1;
  }
  lua_pushinteger(L, rounds);
  lua_pushinteger(L, n);
  if (lua_pcall(L, 2, 1, 0) != 0) {
    fprintf(stderr, "run: %s\n", lua_tostring(L, -1));
    return 1;
  }
  printf("%.3f\n", lua_tonumber(L, -1));
  lua_close(L);
  return 0;
}
