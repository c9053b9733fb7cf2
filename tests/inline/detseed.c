/* LD_PRELOAD shim for tests/inline (identity): LuaJIT seeds its PRNG (string
** hashes, mcode placement) with getrandom(2) through syscall(3); this gives
** it fixed bytes so that two runs of a program make the same traces. Every
** other system call goes through unchanged.
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <string.h>
#include <sys/syscall.h>

long syscall(long nr, ...)
{
  static long (*next)(long, ...);
  va_list ap;
  long a[6];
  int i;
  va_start(ap, nr);
  for (i = 0; i < 6; i++) a[i] = va_arg(ap, long);
  va_end(ap);
  if (nr == SYS_getrandom) {
    unsigned char *p = (unsigned char *)a[0];
    size_t n = (size_t)a[1];
    for (i = 0; (size_t)i < n; i++) p[i] = (unsigned char)(0x5a + 37 * i);
    return (long)n;
  }
  if (!next) next = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
  return next(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}
