/* C host torture program: embeds LuaJIT through the C API and crosses the
 * C/Lua boundary in every direction, with errors and yields at many levels.
 *
 *   host [all|panic]
 *
 * "all" (default) runs every scenario twice (JIT on, JIT off) and prints a
 * deterministic transcript; it exits 0 and prints "HOST OK" when all internal
 * checks passed, else exits 2 at the first failed check. "panic" raises an
 * error outside any protected call; the panic handler prints and exits 7.
 *
 * Built twice (against the patched and the control static library); both
 * builds must print byte-identical output (compare.py).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"
#include "luajit.h"

#define CHECK(cond) do { if (!(cond)) { \
  printf("CHECK FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
  fflush(stdout); exit(2); } } while (0)

/* Print a Lua value deterministically (no addresses). */
static void show(lua_State *L, int idx, char *buf, size_t n)
{
  switch (lua_type(L, idx)) {
  case LUA_TNIL: snprintf(buf, n, "nil"); break;
  case LUA_TBOOLEAN: snprintf(buf, n, lua_toboolean(L, idx) ? "true" : "false"); break;
  case LUA_TNUMBER: snprintf(buf, n, "%.14g", lua_tonumber(L, idx)); break;
  case LUA_TSTRING: snprintf(buf, n, "\"%s\"", lua_tostring(L, idx)); break;
  default: snprintf(buf, n, "<%s>", luaL_typename(L, idx)); break;
  }
}

/* Print the stack from index base+1 to top, then pop to base. */
static void dump(lua_State *L, const char *label, int base)
{
  char buf[600];
  int i, top = lua_gettop(L);
  printf("%s:", label);
  for (i = base + 1; i <= top; i++) {
    show(L, i, buf, sizeof(buf));
    printf(" %s", buf);
  }
  printf("\n");
  lua_settop(L, base);
}

static const char *status_name(int st)
{
  switch (st) {
  case 0: return "OK";
  case LUA_YIELD: return "YIELD";
  case LUA_ERRRUN: return "ERRRUN";
  case LUA_ERRSYNTAX: return "ERRSYNTAX";
  case LUA_ERRMEM: return "ERRMEM";
  case LUA_ERRERR: return "ERRERR";
  default: return "?";
  }
}

/* -- C functions called from Lua ------------------------------------------ */

/* descend(n, catch_at, kind): C -> Lua -> C ... recursion through lua_call.
 * At n == 0 an error of the given kind is raised. At level catch_at the
 * call below is made with lua_pcall and the error becomes a return value. */
static int c_descend(lua_State *L)
{
  int n = (int)luaL_checkinteger(L, 1);
  int catch_at = (int)luaL_checkinteger(L, 2);
  const char *kind = luaL_checkstring(L, 3);
  if (n == 0) {
    if (strcmp(kind, "cerror") == 0) {
      lua_pushfstring(L, "lua_error from C at bottom");
      return lua_error(L);
    } else if (strcmp(kind, "luaL_error") == 0) {
      return luaL_error(L, "luaL_error %d", 42);
    } else if (strcmp(kind, "table") == 0) {
      lua_newtable(L);
      lua_pushinteger(L, 1234);
      lua_setfield(L, -2, "code");
      return lua_error(L);
    } else if (strcmp(kind, "argerror") == 0) {
      luaL_checkinteger(L, 4); /* missing argument */
    } else if (strcmp(kind, "lua") == 0) {
      lua_getglobal(L, "lua_fail"); /* error() raised from Lua below C */
      lua_call(L, 0, 0);
    }
    lua_pushinteger(L, 0);
    return 1;
  }
  lua_getglobal(L, "down"); /* Lua function that calls descend(n-1, ...) */
  lua_pushinteger(L, n - 1);
  lua_pushinteger(L, catch_at);
  lua_pushstring(L, kind);
  if (n == catch_at) {
    int st = lua_pcall(L, 3, 1, 0);
    if (st != 0) {
      /* convert the error into a string result */
      const char *m = lua_isstring(L, -1) ? lua_tostring(L, -1) : luaL_typename(L, -1);
      lua_pushfstring(L, "caught@%d[%s]: %s", n, status_name(st), m);
      lua_remove(L, -2);
      return 1;
    }
  } else {
    lua_call(L, 3, 1);
  }
  /* numbers count the levels on the way up; strings (caught errors) pass */
  if (lua_type(L, -1) == LUA_TNUMBER) {
    lua_Number v = lua_tonumber(L, -1) + 1;
    lua_pop(L, 1);
    lua_pushnumber(L, v);
  }
  return 1;
}

/* callloop(f, n): calls f(i) for i = 1..n with lua_call, sums the results. */
static int c_callloop(lua_State *L)
{
  int i, n = (int)luaL_checkinteger(L, 2);
  lua_Number s = 0;
  luaL_checktype(L, 1, LUA_TFUNCTION);
  for (i = 1; i <= n; i++) {
    lua_pushvalue(L, 1);
    lua_pushinteger(L, i);
    lua_call(L, 1, 1);
    s += lua_tonumber(L, -1);
    lua_pop(L, 1);
  }
  lua_pushnumber(L, s);
  return 1;
}

/* cyield(...): yields all its arguments to the resumer (lua_yield from C). */
static int c_yield(lua_State *L)
{
  return lua_yield(L, lua_gettop(L));
}

/* cadd(a, b): plain C function used from hot Lua loops. */
static int c_add(lua_State *L)
{
  lua_pushnumber(L, luaL_checknumber(L, 1) + luaL_checknumber(L, 2));
  return 1;
}

/* cpcall body: receives a lightuserdata with an int mode. */
static int c_cpbody(lua_State *L)
{
  int *mode = (int *)lua_touserdata(L, 1);
  if (*mode == 1) return luaL_error(L, "error inside lua_cpcall");
  if (*mode == 2) {
    /* run Lua code that errors, unprotected inside the cpcall */
    luaL_loadstring(L, "local t = nil; return t.x");
    lua_call(L, 0, 0);
  }
  *mode = 100;
  return 0;
}

/* Userdata with a C __gc that counts finalizations. */
static int gc_count;
static int c_udgc(lua_State *L)
{
  (void)L;
  gc_count++;
  return 0;
}

static int c_newud(lua_State *L)
{
  int *p = (int *)lua_newuserdata(L, sizeof(int));
  *p = (int)luaL_optinteger(L, 1, 0);
  luaL_getmetatable(L, "torture.ud");
  lua_setmetatable(L, -2);
  return 1;
}

static void open_host(lua_State *L)
{
  luaL_openlibs(L);
  lua_register(L, "descend", c_descend);
  lua_register(L, "callloop", c_callloop);
  lua_pushcfunction(L, c_yield);
  lua_setglobal(L, "cyield");
  lua_pushcfunction(L, c_add);
  lua_setglobal(L, "cadd");
  lua_pushcfunction(L, c_newud);
  lua_setglobal(L, "newud");
  luaL_newmetatable(L, "torture.ud");
  lua_pushcfunction(L, c_udgc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
}

static const char lua_helpers[] =
  "function down(n, c, k) return (descend(n, c, k)) end\n"
  "function lua_fail() error('error() from Lua under C') end\n"
  "function traceback(m) return debug.traceback(m, 2):gsub('0x%x+', '0x?') end\n"
  "function deep(n, f, ...) if n == 0 then return f(...) end local r = deep(n - 1, f, ...) return r end\n";

static void load_or_die(lua_State *L, const char *src, const char *name)
{
  int st = luaL_loadbuffer(L, src, strlen(src), name);
  if (st != 0) {
    printf("load %s failed: %s\n", name, lua_tostring(L, -1));
    exit(2);
  }
}

/* -- Scenarios ------------------------------------------------------------- */

static void scen_descend(lua_State *L)
{
  static const char *kinds[] = { "none", "cerror", "luaL_error", "table", "argerror", "lua" };
  static const int depths[] = { 0, 1, 5, 60 };
  unsigned k, d;
  int base = lua_gettop(L);
  printf("-- descend (C -> Lua -> C ...), errors caught at various levels\n");
  for (k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
    for (d = 0; d < sizeof(depths) / sizeof(depths[0]); d++) {
      int n = depths[d];
      int catches[3];
      int c;
      catches[0] = -1;          /* only the outermost lua_pcall */
      catches[1] = n;           /* at the top C level */
      catches[2] = n > 2 ? n / 2 : 0;  /* in the middle */
      for (c = 0; c < 3; c++) {
        char label[128];
        int st;
        lua_getglobal(L, "descend");
        lua_pushinteger(L, n);
        lua_pushinteger(L, catches[c]);
        lua_pushstring(L, kinds[k]);
        st = lua_pcall(L, 3, 1, 0);
        snprintf(label, sizeof(label), "%s depth=%d catch=%d %s", kinds[k], n,
                 catches[c], status_name(st));
        if (st != 0 && lua_istable(L, -1)) {
          lua_getfield(L, -1, "code");
          lua_remove(L, -2);
        }
        dump(L, label, base);
        if (strcmp(kinds[k], "none") == 0) CHECK(st == 0);
      }
    }
  }
}

static void scen_errfunc(lua_State *L)
{
  int base = lua_gettop(L);
  int st;
  printf("-- lua_pcall with a message handler (traceback) at depth\n");
  lua_getglobal(L, "traceback");
  lua_getglobal(L, "deep");
  lua_pushinteger(L, 25);
  lua_getglobal(L, "descend");
  lua_pushinteger(L, 3);
  lua_pushinteger(L, -1);
  lua_pushstring(L, "cerror");
  st = lua_pcall(L, 5, 1, base + 1);
  CHECK(st == LUA_ERRRUN);
  dump(L, "traceback", base + 1);
  lua_settop(L, base);
  /* handler that errors itself -> LUA_ERRERR */
  load_or_die(L, "error('handler broken')", "=handler");
  load_or_die(L, "error('original')", "=body");
  st = lua_pcall(L, 0, 0, base + 1);
  printf("errerr: %s\n", status_name(st));
  CHECK(st == LUA_ERRERR);
  lua_settop(L, base);
  /* syntax error through luaL_loadstring */
  st = luaL_loadstring(L, "return +");
  printf("syntax: %s %s\n", status_name(st), lua_tostring(L, -1));
  CHECK(st == LUA_ERRSYNTAX);
  lua_settop(L, base);
}

static void scen_callloop(lua_State *L)
{
  int base = lua_gettop(L);
  printf("-- C function calling lua_call in a loop, hot Lua around it\n");
  load_or_die(L,
    "local s = 0\n"
    "for i = 1, 200 do\n"
    "  s = s + callloop(function(x) return x * 2 + cadd(x, i) end, 100)\n"
    "end\n"
    "local t = 0\n"
    "for i = 1, 50000 do t = cadd(t, i % 7) end\n"
    "local ok, e = pcall(callloop, function(x) if x == 77 then error('stop at ' .. x) end return x end, 100)\n"
    "return s, t, ok, e\n", "=callloop");
  CHECK(lua_pcall(L, 0, 4, 0) == 0);
  dump(L, "callloop", base);
}

static void scen_cpcall(lua_State *L)
{
  int mode, st;
  printf("-- lua_cpcall\n");
  for (mode = 0; mode < 3; mode++) {
    int m = mode;
    st = lua_cpcall(L, c_cpbody, &m);
    printf("cpcall mode %d: %s %s m=%d\n", mode, status_name(st),
           st ? lua_tostring(L, -1) : "-", m);
    if (st) lua_pop(L, 1);
    CHECK((mode == 0) == (st == 0));
  }
}

static void scen_resume(lua_State *L)
{
  int base = lua_gettop(L);
  lua_State *co;
  int st, i;
  printf("-- lua_resume / lua_yield from C\n");
  co = lua_newthread(L);
  load_or_die(co,
    "local a, b = ...\n"
    "local x = coroutine.yield(a + b)\n"           /* Lua yield */
    "local y, z = cyield('from C', x)\n"           /* C yield */
    "local ok, w = pcall(function() return coroutine.yield('in pcall') end)\n"
    "local t = setmetatable({}, {__index = function(t, k) return cyield('in __index', k) end})\n"
    "local v = t.key\n"
    "if v == 'fail' then error('coroutine fails') end\n"
    "return 'done', y, z, w, v\n", "=co");
  lua_pushinteger(co, 2);
  lua_pushinteger(co, 3);
  st = lua_resume(co, 2);
  printf("resume1: %s\n", status_name(st));
  dump(co, " values", 0);
  lua_pushstring(co, "X");
  st = lua_resume(co, 1);
  printf("resume2: %s\n", status_name(st));
  dump(co, " values", 0);
  lua_pushstring(co, "Y");
  lua_pushstring(co, "Z");
  st = lua_resume(co, 2);
  printf("resume3: %s\n", status_name(st));
  dump(co, " values", 0);
  lua_pushstring(co, "W");
  st = lua_resume(co, 1);
  printf("resume4: %s\n", status_name(st));
  dump(co, " values", 0);
  lua_pushstring(co, "V");
  st = lua_resume(co, 1);
  printf("resume5: %s\n", status_name(st));
  CHECK(st == 0);
  dump(co, " values", 0);
  st = lua_resume(co, 0);
  printf("resume dead: %s %s\n", status_name(st), lua_tostring(co, -1));
  lua_settop(co, 0);
  lua_settop(L, base);

  /* a coroutine that errors at depth, and one that yields from depth */
  for (i = 0; i < 2; i++) {
    co = lua_newthread(L);
    load_or_die(co,
      "local mode = ...\n"
      "return deep(120, function()\n"
      "  if mode == 0 then error({}) end\n"
      "  local r = coroutine.yield('deep yield')\n"
      "  return r * 2\n"
      "end)\n", "=codeep");
    lua_pushinteger(co, i);
    st = lua_resume(co, 1);
    printf("deep %d first: %s %s\n", i, status_name(st), luaL_typename(co, -1));
    if (st == LUA_YIELD) {
      lua_settop(co, 0);
      lua_pushinteger(co, 21);
      st = lua_resume(co, 1);
      printf("deep %d second: %s %g\n", i, status_name(st), lua_tonumber(co, -1));
      CHECK(st == 0 && lua_tonumber(co, -1) == 42);
    } else {
      CHECK(st == LUA_ERRRUN);
    }
    lua_settop(co, 0);
    lua_settop(L, base);
  }
}

static void scen_threads_refs(lua_State *L)
{
  enum { NT = 8 };
  int refs[NT];
  lua_State *th[NT];
  int base = lua_gettop(L);
  int i, round, alive;
  long total = 0;
  printf("-- lua_newthread x%d kept in the registry with luaL_ref\n", NT);
  for (i = 0; i < NT; i++) {
    th[i] = lua_newthread(L);
    refs[i] = luaL_ref(L, LUA_REGISTRYINDEX); /* pops the thread */
    load_or_die(th[i],
      "local id = ...\n"
      "local acc = 0\n"
      "for step = 1, id + 2 do\n"
      "  local ud = newud(step)\n"
      "  acc = acc + (coroutine.yield(acc) or 0) + step * id\n"
      "end\n"
      "return acc\n", "=thread");
    lua_pushinteger(th[i], i + 1);
  }
  alive = NT;
  for (round = 0; alive > 0; round++) {
    for (i = 0; i < NT; i++) {
      int st, nargs;
      if (!th[i]) continue;
      nargs = round == 0 ? 1 : 0;
      if (round > 0) { lua_pushinteger(th[i], round); nargs = 1; }
      st = lua_resume(th[i], nargs);
      CHECK(st == 0 || st == LUA_YIELD);
      if (st == 0) {
        printf("thread %d finished in round %d: %g\n", i + 1, round, lua_tonumber(th[i], -1));
        total += (long)lua_tonumber(th[i], -1);
        luaL_unref(L, LUA_REGISTRYINDEX, refs[i]);
        th[i] = NULL;
        alive--;
      } else {
        lua_settop(th[i], 0);
      }
      if (round % 2 == 1) lua_gc(L, LUA_GCCOLLECT, 0);
    }
  }
  printf("threads total %ld\n", total);
  /* refs are recycled after unref */
  {
    int r1, r2;
    lua_pushstring(L, "a");
    r1 = luaL_ref(L, LUA_REGISTRYINDEX);
    luaL_unref(L, LUA_REGISTRYINDEX, r1);
    lua_pushstring(L, "b");
    r2 = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_rawgeti(L, LUA_REGISTRYINDEX, r2);
    printf("ref reuse: %s %s\n", r1 == r2 ? "same" : "different", lua_tostring(L, -1));
    lua_pop(L, 1);
    luaL_unref(L, LUA_REGISTRYINDEX, r2);
    lua_pushnil(L);
    printf("ref nil: %d\n", luaL_ref(L, LUA_REGISTRYINDEX));
  }
  lua_gc(L, LUA_GCCOLLECT, 0);
  printf("userdata finalized so far: %d\n", gc_count);
  lua_settop(L, base);
}

static void scen_mixed_hot(lua_State *L)
{
  int base = lua_gettop(L);
  printf("-- errors through C frames inside hot (compiled) Lua loops\n");
  load_or_die(L,
    "local s, errs = 0, 0\n"
    "for i = 1, 20000 do\n"
    "  local ok, v = pcall(descend, i % 4, -1, (i % 1000 == 0) and 'cerror' or 'none')\n"
    "  if ok then s = s + v else errs = errs + 1 end\n"
    "end\n"
    "local co = coroutine.wrap(function()\n"
    "  for i = 1, 1000 do cyield(i) end\n"
    "  return -1\n"
    "end)\n"
    "local y = 0\n"
    "for i = 1, 1001 do y = y + co() end\n"
    "return s, errs, y\n", "=hot");
  CHECK(lua_pcall(L, 0, 3, 0) == 0);
  dump(L, "hot", base);
}

static void run_all(int jit)
{
  lua_State *L = luaL_newstate();
  CHECK(L != NULL);
  gc_count = 0;
  open_host(L);
  if (!jit) luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
  printf("==== JIT %s\n", jit ? "on" : "off");
  load_or_die(L, lua_helpers, "=helpers");
  CHECK(lua_pcall(L, 0, 0, 0) == 0);
  scen_descend(L);
  scen_errfunc(L);
  scen_callloop(L);
  scen_cpcall(L);
  scen_resume(L);
  scen_threads_refs(L);
  scen_mixed_hot(L);
  CHECK(lua_gettop(L) == 0);
  lua_close(L);
  printf("userdata finalized after close: %d\n", gc_count);
}

static int panic_handler(lua_State *L)
{
  printf("panic handler: %s\n", lua_tostring(L, -1));
  fflush(stdout);
  exit(7);
  return 0;
}

int main(int argc, char **argv)
{
  const char *mode = argc > 1 ? argv[1] : "all";
  setvbuf(stdout, NULL, _IOFBF, 1 << 16);
  if (strcmp(mode, "panic") == 0) {
    lua_State *L = luaL_newstate();
    open_host(L);
    lua_atpanic(L, panic_handler);
    load_or_die(L, lua_helpers, "=helpers");
    lua_call(L, 0, 0);
    printf("calling descend unprotected\n");
    lua_getglobal(L, "descend");
    lua_pushinteger(L, 4);
    lua_pushinteger(L, -1);
    lua_pushstring(L, "cerror");
    lua_call(L, 3, 1); /* no protection: the error reaches the panic handler */
    printf("not reached\n");
    return 3;
  }
  if (strcmp(mode, "all") != 0) {
    fprintf(stderr, "usage: host [all|panic]\n");
    return 2;
  }
  run_all(1);
  run_all(0);
  printf("HOST OK\n");
  return 0;
}
