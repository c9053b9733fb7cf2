/* Classes of the addresses in a sampled chain.
**
** The host's own code by a symbol table (`syms` file: "ADDR CLASS NAME"
** lines, sorted, from nm of the non-PIE host: CLASS vm for the
** interpreter's lj_vm.o, lj for LuaJIT's C, host for the rest); JIT code
** by the VM's mcode areas and Lua bytecode by its live prototypes, both
** read from the VM once sampling has stopped; shared libraries by dladdr.
*/
#ifndef FPCLASS_H
#define FPCLASS_H

#include <stdint.h>

#define FPC_CLASSDEF(_) \
  _(MAIN, "main") _(HOST, "host") _(VM, "interp") _(LJ, "lj_c") \
  _(TRACE, "trace") _(LUA, "lua_bc") _(LIB, "lib") _(UNKNOWN, "unknown")

enum {
#define FPC_ENUM(name, text) FPC_##name,
  FPC_CLASSDEF(FPC_ENUM)
#undef FPC_ENUM
  FPC_NCLASS
};

extern const char *const fpc_classname[FPC_NCLASS];

struct lua_State;

/* Loads the symbol table; 0 or -1 with a message on stderr. */
int fpc_load_syms(const char *path);
/* Takes the VM's mcode areas and prototype bytecode ranges. */
void fpc_load_vm(struct lua_State *L);
int fpc_class(uintptr_t a);
/* A name for a: its symbol, "chunk:line" of a prototype's bytecode (the
** line it is defined at), "[trace]", a library's symbol or "[?]". */
const char *fpc_name(uintptr_t a);

#endif
