/* Address classes (fpclass.h). Ranges are half-open [lo, hi); a symbol's
** range ends where the next symbol starts. */
#define _GNU_SOURCE
#include "fpclass.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lua.h"
#include "lj_obj.h"
#include "lj_jit.h"
#include "lj_dispatch.h"

const char *const fpc_classname[FPC_NCLASS] = {
#define FPC_TEXT(name, text) text,
  FPC_CLASSDEF(FPC_TEXT)
#undef FPC_TEXT
};

typedef struct FpcRange { uintptr_t lo, hi; int cls; const char *name; } FpcRange;

static FpcRange *fpc_sym, *fpc_vm;  /* host symbols; VM areas */
static int fpc_nsym, fpc_nvm, fpc_capvm;

int fpc_load_syms(const char *path)
{
  FILE *f = fopen(path, "r");
  char cls[16], name[512];
  unsigned long addr;
  int cap = 0;
  if (!f) { fprintf(stderr, "fpwalk: cannot open %s\n", path); return -1; }
  while (fscanf(f, "%lx %15s %511s", &addr, cls, name) == 3) {
    if (fpc_nsym == cap) {
      cap = cap ? 2 * cap : 1024;
      fpc_sym = realloc(fpc_sym, (size_t)cap * sizeof(FpcRange));
    }
    if (fpc_nsym) fpc_sym[fpc_nsym - 1].hi = addr;
    fpc_sym[fpc_nsym].lo = fpc_sym[fpc_nsym].hi = addr;
    fpc_sym[fpc_nsym].name = strdup(name);
    fpc_sym[fpc_nsym].cls = !strcmp(name, "main") ? FPC_MAIN :
      !strcmp(cls, "vm") ? FPC_VM : !strcmp(cls, "lj") ? FPC_LJ : FPC_HOST;
    fpc_nsym++;
  }
  fclose(f);
  if (fpc_nsym < 2) { fprintf(stderr, "fpwalk: no symbols in %s\n", path); return -1; }
  fpc_nsym--;  /* the last symbol only bounds the one before it */
  return 0;
}

static void fpc_add(uintptr_t lo, uintptr_t hi, int cls, const char *name)
{
  if (fpc_nvm == fpc_capvm) {
    fpc_capvm = fpc_capvm ? 2 * fpc_capvm : 256;
    fpc_vm = realloc(fpc_vm, (size_t)fpc_capvm * sizeof(FpcRange));
  }
  fpc_vm[fpc_nvm].lo = lo; fpc_vm[fpc_nvm].hi = hi; fpc_vm[fpc_nvm].cls = cls;
  fpc_vm[fpc_nvm].name = strdup(name);
  fpc_nvm++;
}

void fpc_load_vm(lua_State *L)
{
  global_State *g = G(L);
  GCobj *o;
#if LJ_HASJIT
  jit_State *J = G2J(g);
  MCode *mc;
  for (mc = J->mcarea; mc; mc = ((MCLink *)mc)->next)
    fpc_add((uintptr_t)mc, (uintptr_t)mc + ((MCLink *)mc)->size, FPC_TRACE, "[trace]");
#endif
  for (o = gcref(g->gc.root); o; o = gcref(o->gch.nextgc))
    if (o->gch.gct == ~LJ_TPROTO) {
      GCproto *pt = gco2pt(o);
      uintptr_t bc = (uintptr_t)proto_bc(pt);
      const char *chunk = strrchr(proto_chunknamestr(pt), '/');
      char name[256];
      snprintf(name, sizeof(name), "%s:%d",
               chunk ? chunk + 1 : proto_chunknamestr(pt), (int)pt->firstline);
      fpc_add(bc, bc + pt->sizebc * sizeof(BCIns), FPC_LUA, name);
    }
}

/* The range holding a, or NULL. */
static const FpcRange *fpc_find(uintptr_t a)
{
  int lo = 0, hi = fpc_nsym - 1, i;
  if (a >= fpc_sym[0].lo && a < fpc_sym[fpc_nsym - 1].hi) {
    while (lo < hi) {  /* the last symbol starting at or below a */
      int mid = (lo + hi + 1) / 2;
      if (fpc_sym[mid].lo <= a) lo = mid; else hi = mid - 1;
    }
    return &fpc_sym[lo];
  }
  for (i = 0; i < fpc_nvm; i++)
    if (a >= fpc_vm[i].lo && a < fpc_vm[i].hi) return &fpc_vm[i];
  return NULL;
}

int fpc_class(uintptr_t a)
{
  Dl_info di;
  const FpcRange *r = fpc_find(a);
  if (r) return r->cls;
  if (dladdr((void *)a, &di) && di.dli_fname) return FPC_LIB;
  return FPC_UNKNOWN;
}

const char *fpc_name(uintptr_t a)
{
  Dl_info di;
  const FpcRange *r = fpc_find(a);
  if (r) return r->name;
  if (dladdr((void *)a, &di) && di.dli_sname) return di.dli_sname;
  return "[?]";
}
