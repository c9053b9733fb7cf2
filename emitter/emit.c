/*
** ljperf emitter: the public entry points of ljperf_emit.h. One process-wide
** lock serialises the writers (perfmap.c, jitdump.c); a fork is detected by
** pid (cached; the atfork child handler forgets it) and gives the child its
** own files: at its first call, or at once in a child of root.
*/
#include "ljperf_emit_common.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pid_t owner;		/* pid the outputs belong to; 0: never opened */
static unsigned want;		/* outputs requested by open, not yet closed */
static int fresh_pending;	/* reopened after fork, not yet told to caller */
static char jd_dir[PATH_MAX];	/* resolved jitdump directory */
static pid_t cur_pid;		/* getpid() cache, reset in a fork child */
static int batch;		/* open batches: >0 defers writes */

static pid_t my_pid(void)
{
  if (!cur_pid) cur_pid = getpid();
  return cur_pid;
}

/* fork() while another thread holds the lock must not leave the child's
** copy locked forever: hold it across fork (glibc runs these handlers). */
static void fork_prepare(void) { pthread_mutex_lock(&lock); }
static void fork_parent(void) { pthread_mutex_unlock(&lock); }
static void check_fork(void);
static void fork_child(void)
{
  cur_pid = 0;
  batch = 0;
  ljp_jd_forget_tid();
  /* A child of root may drop privileges next (nginx workers run as `user`,
  ** e.g. nobody): create its files now, as root. perf refuses a jitdump or
  ** perf map owned by neither itself nor root, and a stale root-owned file
  ** of a reused pid would stop an unprivileged child from creating its own.
  ** Describing the code still waits for the child's first call. */
  if (want && geteuid() == 0) check_fork();
  pthread_mutex_unlock(&lock);
}
static void register_atfork(void)
{
  (void)pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static unsigned open_mask(void)
{
  return (ljp_map_isopen() ? LJP_MAP : 0) | (ljp_jd_isopen() ? LJP_JITDUMP : 0);
}

static void open_outputs(unsigned mask)
{
  if (mask & LJP_MAP) ljp_map_open(owner);
  if (mask & LJP_JITDUMP) ljp_jd_open(owner, jd_dir);
}

/* Lock held. In a fork child: drop the parent's outputs without writing to
** them and open the wanted ones for our pid. */
static void check_fork(void)
{
  pid_t pid = my_pid();
  if (owner == pid) return;
  ljp_map_abandon();
  ljp_jd_abandon();
  owner = pid;
  if (want) {
    open_outputs(want);
    fresh_pending = 1;
  }
}

unsigned ljp_emit_open(unsigned mask, const char *dir)
{
  unsigned r;
  pthread_once(&once, register_atfork);
  pthread_mutex_lock(&lock);
  check_fork();
  mask &= LJP_MAP | LJP_JITDUMP;
  if ((mask & LJP_JITDUMP) && !ljp_jd_isopen()) {
    const char *d = (dir && *dir) ? dir : getenv("LUAJIT_PERF_DIR");
    if (!d || !*d) d = "/tmp";
    snprintf(jd_dir, sizeof(jd_dir), "%s", d);
  }
  want |= mask;
  open_outputs(mask);
  r = open_mask();
  pthread_mutex_unlock(&lock);
  return r;
}

unsigned ljp_emit_begin(int *fresh)
{
  unsigned r;
  int f;
  pthread_mutex_lock(&lock);
  check_fork();
  f = fresh_pending;
  fresh_pending = 0;
  r = open_mask();
  pthread_mutex_unlock(&lock);
  if (fresh) *fresh = f;
  return r;
}

void ljp_emit_load(uint64_t addr, uint64_t size, const char *name,
		   const void *bytes, const LJPLine *lines, size_t nlines)
{
  pthread_mutex_lock(&lock);
  check_fork();
  if (ljp_map_isopen()) ljp_map_load(addr, size, name, batch > 0);
  if (ljp_jd_isopen()) ljp_jd_load(addr, size, name, bytes, lines, nlines, batch > 0);
  pthread_mutex_unlock(&lock);
}

void ljp_emit_batch_begin(void)
{
  pthread_mutex_lock(&lock);
  batch++;
  pthread_mutex_unlock(&lock);
}

void ljp_emit_batch_end(void)
{
  pthread_mutex_lock(&lock);
  if (batch > 0 && --batch == 0) {
    check_fork();
    if (ljp_map_isopen()) ljp_map_flush();
    if (ljp_jd_isopen()) ljp_jd_flush();
  }
  pthread_mutex_unlock(&lock);
}

void ljp_emit_close(void)
{
  pthread_mutex_lock(&lock);
  if (owner == my_pid()) {
    if (ljp_map_isopen()) ljp_map_flush();
    if (ljp_jd_isopen()) ljp_jd_flush();
    ljp_map_close();
    ljp_jd_close();
  } else {  /* fork child that never called in: inherited, do not write */
    ljp_map_abandon();
    ljp_jd_abandon();
    owner = my_pid();
  }
  want = 0;
  fresh_pending = 0;
  pthread_mutex_unlock(&lock);
}
