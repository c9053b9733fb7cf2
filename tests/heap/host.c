/* heap.errors: luaJIT_perf_heapsnapshot from a C host: GOOD_PATH gives 0,
** BAD_PATH -1 (and one line on stderr); the state goes on.
** heap.packed: --packed runs SCRIPT in a state whose allocator places
** blocks 8 bytes apart (a bump allocator that never frees), closer than
** lj_alloc or glibc place them. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"
#include "luajit.h"

#define PACKED_SIZE	((size_t)1 << 30)	/* Reserved, touched as used. */

static char *packed_next, *packed_end;

static void *packed_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
  char *p;
  (void)ud;
  if (nsize == 0) return NULL;
  nsize = (nsize + 7) & ~(size_t)7;
  if (ptr && nsize <= osize) return ptr;
  if ((size_t)(packed_end - packed_next) < nsize) return NULL;
  p = packed_next;
  packed_next += nsize;
  if (ptr) memcpy(p, ptr, osize);
  return p;
}

static int packed(int argc, char **argv)
{
  lua_State *L;
  int i;
  packed_next = (char *)mmap(NULL, PACKED_SIZE, PROT_READ|PROT_WRITE,
			     MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE, -1, 0);
  if (packed_next == MAP_FAILED) { perror("mmap"); return 1; }
  packed_end = packed_next + PACKED_SIZE;
  if (!(L = lua_newstate(packed_alloc, NULL))) {
    fprintf(stderr, "heaphost: lua_newstate failed\n");
    return 1;
  }
  luaL_openlibs(L);
  lua_newtable(L);
  for (i = 2; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - 2);
  }
  lua_setglobal(L, "arg");
  if (luaL_dofile(L, argv[2]) != 0) {
    fprintf(stderr, "heaphost: %s\n", lua_tostring(L, -1));
    return 1;
  }
  lua_close(L);
  return 0;
}

int main(int argc, char **argv)
{
  lua_State *L;
  if (argc >= 3 && !strcmp(argv[1], "--packed")) return packed(argc, argv);
  if (argc != 3) {
    fprintf(stderr, "usage: heaphost GOOD_PATH BAD_PATH\n"
		    "       heaphost --packed SCRIPT [ARG...]\n");
    return 2;
  }
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
