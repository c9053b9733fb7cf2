/* C side of the lj_merge FFI fixture (capture/real/ffi.lua). Built with
** frame pointers so perf's fp unwinder walks through it. */
__attribute__((noinline)) double ljm_spin(long n)
{
  volatile double x = 1.0;
  long i;
  for (i = 0; i < n; i++) x = x * 1.0000001 + 1e-9;
  return x;
}

/* Calls back into Lua N times through a function pointer. */
__attribute__((noinline)) double ljm_each(long n, double (*cb)(long))
{
  double s = 0;
  long i;
  for (i = 0; i < n; i++) s += cb(i);
  return s;
}
