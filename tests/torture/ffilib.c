/* Small C library for the FFI torture programs (ffi_calls.lua,
 * ffi_callbacks.lua, jit_ffi.lua). Functions take more integer and floating
 * point arguments than the SysV x86-64 ABI passes in registers (6 integer,
 * 8 SSE), so some arguments live on the stack, and call back into Lua through
 * function pointers created with ffi.cast().
 *
 * Results are weighted sums, so a swapped or dropped argument changes them.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT int64_t tl_ints12(int64_t a1, int64_t a2, int64_t a3, int64_t a4,
                         int64_t a5, int64_t a6, int64_t a7, int64_t a8,
                         int64_t a9, int64_t a10, int64_t a11, int64_t a12)
{
  return a1 * 1 + a2 * 2 + a3 * 3 + a4 * 4 + a5 * 5 + a6 * 6 + a7 * 7 +
         a8 * 8 + a9 * 9 + a10 * 10 + a11 * 11 + a12 * 12;
}

EXPORT double tl_doubles12(double d1, double d2, double d3, double d4,
                           double d5, double d6, double d7, double d8,
                           double d9, double d10, double d11, double d12)
{
  return d1 * 1 + d2 * 2 + d3 * 3 + d4 * 4 + d5 * 5 + d6 * 6 + d7 * 7 +
         d8 * 8 + d9 * 9 + d10 * 10 + d11 * 11 + d12 * 12;
}

/* Interleaved integer/float/small-type arguments: 9 integer-class and
 * 10 SSE-class arguments, several of each on the stack. */
EXPORT double tl_mixed(int8_t c, double d1, int32_t i1, float f1, uint16_t s,
                       double d2, int64_t l1, double d3, int32_t i2, double d4,
                       uint8_t b, double d5, int64_t l2, float f2, double d6,
                       int32_t i3, double d7, int64_t l3, double d8)
{
  return c * 1.0 + d1 * 2 + i1 * 3.0 + f1 * 4 + s * 5.0 + d2 * 6 + l1 * 7.0 +
         d3 * 8 + i2 * 9.0 + d4 * 10 + b * 11.0 + d5 * 12 + l2 * 13.0 +
         f2 * 14 + d6 * 15 + i3 * 16.0 + d7 * 17 + l3 * 18.0 + d8 * 19;
}

typedef struct tl_pair { int32_t a; double b; } tl_pair;
typedef struct tl_big { int64_t v[5]; } tl_big;  /* passed in memory */

EXPORT double tl_structs(tl_pair p, tl_big big, int32_t k, tl_pair q)
{
  double s = p.a + p.b * 2 + k * 3 + q.a * 4 + q.b * 5;
  for (int i = 0; i < 5; i++) s += (double)big.v[i] * (10 + i);
  return s;
}

EXPORT tl_big tl_make_big(int64_t seed)
{
  tl_big r;
  for (int i = 0; i < 5; i++) r.v[i] = seed * (i + 1);
  return r;
}

/* Callbacks ---------------------------------------------------------------*/

typedef int64_t (*tl_icb)(int64_t a1, int64_t a2, int64_t a3, int64_t a4,
                          int64_t a5, int64_t a6, int64_t a7, int64_t a8,
                          int64_t a9, int64_t a10);
typedef double (*tl_dcb)(double d1, double d2, double d3, double d4,
                         double d5, double d6, double d7, double d8,
                         double d9, double d10, int32_t i1, int32_t i2);
typedef int (*tl_cb1)(int x);

/* Calls cb with arguments that do not fit in registers (4 ints / 2 doubles
 * are on the stack of the callback). */
EXPORT int64_t tl_call_icb(tl_icb cb, int64_t base)
{
  return cb(base + 1, base + 2, base + 3, base + 4, base + 5, base + 6,
            base + 7, base + 8, base + 9, base + 10);
}

EXPORT double tl_call_dcb(tl_dcb cb, double base)
{
  return cb(base + 0.5, base + 1.5, base + 2.5, base + 3.5, base + 4.5,
            base + 5.5, base + 6.5, base + 7.5, base + 8.5, base + 9.5,
            11, 12);
}

/* Calls cb(i) for i in [0, n) and sums the results; stops early when the
 * callback returns a negative value. */
EXPORT int64_t tl_loop_cb(tl_cb1 cb, int n)
{
  int64_t s = 0;
  for (int i = 0; i < n; i++) {
    int r = cb(i);
    if (r < 0) return -s - 1;
    s += r;
  }
  return s;
}

/* A deliberately deep C frame (with a large local array) around a callback,
 * so unwinding crosses a C frame with real stack usage. */
EXPORT int tl_deep_cb(tl_cb1 cb, int depth)
{
  volatile char buf[512];
  memset((char *)buf, depth & 0xff, sizeof(buf));
  if (depth <= 0) return cb(buf[7]);
  return tl_deep_cb(cb, depth - 1) + buf[depth % 512];
}

/* qsort-style nesting: C sorts, the Lua comparator may call back into C. */
typedef int (*tl_cmp)(const void *, const void *);
EXPORT void tl_sort_ints(int32_t *a, size_t n, tl_cmp cmp)
{
  qsort(a, n, sizeof(int32_t), cmp);
}

EXPORT int tl_int_cmp(int32_t a, int32_t b) { return (a > b) - (a < b); }

/* Stores a callback for later use (after other calls happened). */
static tl_cb1 saved_cb;
EXPORT void tl_save_cb(tl_cb1 cb) { saved_cb = cb; }
EXPORT int tl_call_saved(int x) { return saved_cb ? saved_cb(x) : -12345; }

/* Misc: varargs, strings, out parameters. */
#include <stdarg.h>
EXPORT double tl_sum_varargs(int n, ...)
{
  va_list ap;
  double s = 0;
  va_start(ap, n);
  for (int i = 0; i < n; i++) {
    if (i % 2 == 0) s += va_arg(ap, int) * (i + 1);
    else s += va_arg(ap, double) * (i + 1);
  }
  va_end(ap);
  return s;
}

EXPORT size_t tl_fill(char *out, size_t n, int seed)
{
  for (size_t i = 0; i < n; i++) out[i] = (char)('a' + (seed + i) % 26);
  return n;
}
