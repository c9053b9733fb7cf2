/* C library called through the FFI by the frame-pointer tests. */
__attribute__((noinline)) double ffilib_spin(long n)
{
  volatile double x = 1.0;
  long i;
  for (i = 0; i < n; i++) x = x * 1.0000001 + 1e-9;
  return x;
}

/* Calls back into Lua n times through a function pointer. */
double ffilib_each(long n, double (*cb)(long))
{
  double s = 0;
  long i;
  for (i = 0; i < n; i++) s += cb(i);
  return s;
}
