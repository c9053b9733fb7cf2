/* Lua C module for the frame-pointer tests: C functions registered through
** the Lua C API (spin burns CPU in C; sandwich calls back into Lua). */
#include <lua.h>
#include <lauxlib.h>

/* Burns N iterations in C; never inlined so it shows up as its own frame. */
__attribute__((noinline)) static double cmod_burn(long n)
{
  volatile double x = 1.0;
  long i;
  for (i = 0; i < n; i++) x = x * 1.0000001 + 1e-9;
  return x;
}

static int cmod_spin(lua_State *L)
{
  lua_pushnumber(L, cmod_burn((long)luaL_checkinteger(L, 1)));
  return 1;
}

/* cmod.call(f, ...): calls f(...) with lua_call from C. */
static int cmod_call(lua_State *L)
{
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

int luaopen_cmod(lua_State *L)
{
  static const luaL_Reg funcs[] = {
    { "spin", cmod_spin }, { "call", cmod_call }, { NULL, NULL }
  };
  luaL_register(L, "cmod", funcs);
  return 1;
}
