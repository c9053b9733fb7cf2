/* C host with two lua_States in two threads, started without LUAJIT_PERF:
** `ljperf record -p` switches recording on in both and off again. Each
** thread runs Lua recursion down to a C payload (host_burn) and prints
** "T<n> status=<luaJIT_perf_status> rate=<iterations/s>" every 0.1 s, and
** BAD if a result changes. argv[1]: seconds to run (default: until killed).
** argv[2] "busy": Lua loops that reach no poll by themselves instead (no
** allocation; thread 1 interpreted, thread 2 in one trace for ~1 s), under
** the same recursion.
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include <luajit.h>

static double run_for;
static int busy;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

__attribute__((noinline)) static double host_burn(long n)
{
  volatile double x = 1.0;
  long i;
  for (i = 0; i < n; i++) x = x * 1.0000001 + 1e-9;
  return x;
}

__attribute__((noinline)) static int host_spin(lua_State *L)
{
  lua_pushnumber(L, host_burn((long)luaL_checkinteger(L, 1)));
  return 1;
}

typedef struct Tick { int id; long iters; double t0, start; } Tick;

/* tick(): counts an iteration, prints status and speed every 0.1 s;
** returns false when the run is over. */
static int host_tick(lua_State *L)
{
  Tick *tk = (Tick *)lua_touserdata(L, lua_upvalueindex(1));
  double t = now();
  tk->iters++;
  if (t - tk->t0 >= 0.1) {
    pthread_mutex_lock(&out_lock);
    printf("T%d status=%d rate=%.0f\n", tk->id, luaJIT_perf_status(L),
	   tk->iters / (t - tk->t0));
    fflush(stdout);
    pthread_mutex_unlock(&out_lock);
    tk->iters = 0;
    tk->t0 = t;
  }
  lua_pushboolean(L, run_for <= 0 || t - tk->start < run_for);
  return 1;
}

static const char script[] =
  "local id = ...\n"
  "local function rec(d, n) if d == 0 then return host_spin(n) + 0 end\n"
  "  return rec(d - 1, n) + 0 end\n"
  "local function work(n) local t = {}\n"
  "  for i = 1, 40 do t[i] = ('y'):rep(i) .. i end\n"
  "  return rec(5, n) + #t end\n"
  "local expect\n"
  "repeat local v = work(20000)\n"
  "  if expect == nil then expect = v elseif v ~= expect then\n"
  "    io.write('BAD ', id, ' ', v, '\\n') io.flush() end\n"
  "until not tick()\n";

static const char busy_script[] =
  "local id = ...\n"
  "local function spin(n) local s = 0\n"
  "  for i = 1, n do s = (s * 31 + i) % 1000003 end return s end\n"
  "local function rec(d, n) if d == 0 then return spin(n) end\n"
  "  return rec(d - 1, n) + 0 end\n"
  "local n = id == 1 and 2e6 or 1e8\n"
  "local expect\n"
  "repeat local v = rec(6, n)\n"
  "  if expect == nil then expect = v elseif v ~= expect then\n"
  "    io.write('BAD ', id, ' ', v, '\\n') io.flush() end\n"
  "until not tick()\n";

static void *worker(void *arg)
{
  Tick tk = { (int)(long)arg, 0, 0, 0 };
  lua_State *L = luaL_newstate();
  if (!L) { fputs("no lua_State\n", stderr); exit(2); }
  luaL_openlibs(L);
  lua_register(L, "host_spin", host_spin);
  lua_pushlightuserdata(L, &tk);
  lua_pushcclosure(L, host_tick, 1);
  lua_setglobal(L, "tick");
  if (busy && tk.id == 1)
    luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE|LUAJIT_MODE_OFF);
  tk.t0 = tk.start = now();
  if ((busy ? luaL_loadbuffer(L, busy_script, sizeof(busy_script) - 1, "=host")
	    : luaL_loadbuffer(L, script, sizeof(script) - 1, "=host")) != 0 ||
      (lua_pushinteger(L, tk.id), lua_pcall(L, 1, 0, 0)) != 0) {
    fprintf(stderr, "T%d: %s\n", tk.id, lua_tostring(L, -1));
    exit(1);
  }
  lua_close(L);
  return NULL;
}

int main(int argc, char **argv)
{
  pthread_t th[2];
  long i;
  run_for = argc > 1 ? atof(argv[1]) : 0;
  busy = argc > 2 && !strcmp(argv[2], "busy");
  setvbuf(stdout, NULL, _IOLBF, 0);
  puts("ready");
  for (i = 0; i < 2; i++) pthread_create(&th[i], NULL, worker, (void *)(i + 1));
  for (i = 0; i < 2; i++) pthread_join(th[i], NULL);
  puts("done");
  return 0;
}
