// C++ and DWARF unwinding through the VM (.eh_frame of the interpreter):
// exceptions cross Lua frames in both directions, destructors run.
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
extern "C" {
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
}

static int destructed = 0;
struct Guard { ~Guard() { destructed++; } };

// Throws a C++ exception from a function called by Lua.
static int cpp_throw(lua_State *L)
{
  Guard g;
  (void)L;
  throw std::runtime_error("from C++");
}

// Calls back into Lua, which raises a Lua error through this C++ frame.
static int cpp_callback(lua_State *L)
{
  Guard g;
  lua_pushvalue(L, 1);
  lua_call(L, 0, 0);
  return 0;
}

static int fails = 0;
static void check(bool ok, const char *what)
{
  std::printf("%s: %s\n", ok ? "PASS" : "FAIL", what);
  if (!ok) fails++;
}

int main()
{
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  lua_register(L, "cpp_throw", cpp_throw);
  lua_register(L, "cpp_callback", cpp_callback);

  // 1. A C++ exception thrown below Lua frames reaches a C++ catch.
  luaL_loadstring(L, "local function f() cpp_throw() end local function g() f() end g()");
  bool caught = false;
  try {
    lua_call(L, 0, 0);
  } catch (std::runtime_error &e) {
    caught = std::strcmp(e.what(), "from C++") == 0;
  }
  check(caught && destructed == 1, "C++ exception crosses Lua frames to a C++ catch");
  lua_settop(L, 0);

  // 2. lua_pcall catches a C++ exception from below Lua frames.
  luaL_loadstring(L, "local function f() cpp_throw() end f()");
  int st = lua_pcall(L, 0, 0, 0);
  check(st != 0 && destructed == 2, "lua_pcall catches a C++ exception");
  lua_settop(L, 0);

  // 3. A Lua error unwinds through a C++ frame (destructor runs) to pcall.
  luaL_loadstring(L, "return pcall(cpp_callback, function() error('lua error') end)");
  st = lua_pcall(L, 0, 2, 0);
  check(st == 0 && !lua_toboolean(L, 1) &&
        std::string(lua_tostring(L, 2)).find("lua error") != std::string::npos &&
        destructed == 3, "Lua error unwinds through a C++ frame to pcall");
  lua_settop(L, 0);

  // 4. The VM still works afterwards (JIT and interpreter).
  luaL_loadstring(L, "local s = 0 for i = 1, 1e5 do s = s + i end return s");
  st = lua_pcall(L, 0, 1, 0);
  check(st == 0 && lua_tonumber(L, -1) == 5000050000.0, "VM usable after unwinding");
  lua_close(L);
  return fails ? 1 : 0;
}
