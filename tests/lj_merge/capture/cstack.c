/* cstack: known C stacks for lj_merge fixtures.
**   parent main -> a -> b -> c        (spins SECS)
**   child  main -> d -> c             (fork)
**   thread start_thread -> worker -> b -> c, thread comm "cs worker"
**   with MODE 2: main -> sys_loop -> read(2) on /dev/zero (kernel frames)
**   with MODE 3: main -> a -> b -> c for SECS/2, then main -> garbage, which
**   spins with rbp at a record whose return address is -1 (as a nil TValue
**   would be): perf script prints those samples without any call chain
** Build: cc -O1 -g -fno-omit-frame-pointer -fno-inline -pthread
** Usage: cstack SECS MODE   (MODE 0: parent only, 1: all, 2: syscalls) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static volatile unsigned long sink;
static double now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
__attribute__((noinline)) void c(double secs)
{
  double e = now() + secs;
  while (now() < e) for (int i = 0; i < 10000; i++) sink += i;
}
__attribute__((noinline)) void b(double s) { c(s); sink++; }
__attribute__((noinline)) void a(double s) { b(s); sink++; }
__attribute__((noinline)) void d(double s) { c(s); sink++; }
__attribute__((noinline)) void sys_loop(double s)
{
  char buf[4096];
  int fd = open("/dev/zero", O_RDONLY);
  double e = now() + s;
  while (now() < e) if (read(fd, buf, sizeof buf) < 0) break;
  close(fd);
}
static unsigned long bad_rec[2];	/* {next, ret}: ret is -1 */
__attribute__((noinline)) void garbage(double s)
{
  long n = s > 0 ? (long)(s * 2e9) + 1 : 1;
  bad_rec[0] = 0;
  bad_rec[1] = ~0ul;
  __asm__ volatile("push %%rbp\n\tmov %1, %%rbp\n"
		   "1:\tdec %0\n\tjnz 1b\n\tpop %%rbp"
		   : "+r"(n) : "r"(bad_rec) : "memory");
}
static void *worker(void *p)
{
  pthread_setname_np(pthread_self(), "cs worker");
  b(*(double *)p);
  return 0;
}
int main(int argc, char **argv)
{
  double s = argc > 1 ? atof(argv[1]) : 0.2;
  int mode = argc > 2 ? atoi(argv[2]) : 0;
  if (mode == 2) { sys_loop(s); return 0; }
  if (mode == 3) { a(s / 2); garbage(s / 2); return 0; }
  if (mode == 0) { a(s); return 0; }
  pid_t pid = fork();
  if (pid == 0) { d(s); _exit(0); }
  pthread_t t;
  pthread_create(&t, 0, worker, &s);
  a(s);
  pthread_join(t, 0);
  waitpid(pid, 0, 0);
  return 0;
}
