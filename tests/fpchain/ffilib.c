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

/* Trace call records (tests/inline): a C function without a frame pointer,
** and a tiny one with one (its entry and exit windows are most of it). */
__attribute__((noinline, optimize("omit-frame-pointer")))
double ffilib_frameless(double y, long n)
{
  volatile double x = y;
  long i;
  for (i = 0; i < n; i++) x = x * 1.0000002 + 1e-9;
  return x;
}

/* y * 0.5 + 1 with a frame-pointer prologue, written out: GCC drops the
** frame of a leaf this small even with -fno-omit-frame-pointer. */
double ffilib_tiny(double y);
__asm__(
  ".text\n"
  ".globl ffilib_tiny\n"
  ".type ffilib_tiny, @function\n"
  "ffilib_tiny:\n"
  "  push %rbp\n"
  "  mov %rsp, %rbp\n"
  "  mulsd .Lffilib_half(%rip), %xmm0\n"
  "  addsd .Lffilib_one(%rip), %xmm0\n"
  "  pop %rbp\n"
  "  ret\n"
  ".size ffilib_tiny, .-ffilib_tiny\n"
  ".section .rodata\n"
  ".p2align 3\n"
  ".Lffilib_half: .double 0.5\n"
  ".Lffilib_one: .double 1.0\n"
  ".text\n"
);
