/*
** Lua frame records in a window of the VM entry's C frame (ljperf, arm64).
** Copied into LuaJIT's src/ at build time; see lj_fpwin.c.
*/

#ifndef _LJ_FPWIN_H
#define _LJ_FPWIN_H

#include "lj_obj.h"

#if LJ_HASFPWIN
/* The C frame of a VM entry, from sp up (vm_arm64.dasc: must match):
**   sp+0    fixed slots (CFRAME_OFS_*), the depth (32 bits) at sp+44
**   sp+48   FPR and GPR saves (stock offsets)
**   sp+192  the window: record FPWIN_K (lowest) ... record 1 (highest)
**   sp+704  the entry record {fp, lr}: "record 0"
**   sp+720  the entry's first Lua frame base (where depth counting stops),
**           in bytes from the Lua stack's start (the stack may move)
** Record d is the d-th Lua frame of this entry, {next, PC} with next =
** record d-1, the address 16 higher: every link of the chain rises.
** Frames deeper than FPWIN_K share record FPWIN_K. fp is always computed
** from the depth, never loaded from a record, and the depth never drops
** below 0, so a wrong count gives wrong chains, never a bad fp or a
** clobbered entry record.
*/
#define FPWIN_K			32
#define FPWIN_OFS_DEPTH		44
#define FPWIN_OFS_ENTRY		704
#define FPWIN_OFS_BASE0		720
#define FPWIN_CFRAME_SIZE	736

/* Record of depth d (0: the entry record) in the C frame cf. */
#define fpwin_rec(cf, d) \
  ((void **)((char *)(cf) + FPWIN_OFS_ENTRY - 16*((d) < FPWIN_K ? (d) : FPWIN_K)))

LJ_FUNCA void *lj_fpwin_sync(lua_State *L, TValue *base, const BCIns *pc,
			     void *cf);
#endif

#endif
