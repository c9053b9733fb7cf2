/*
** ljperf emitter: the public entry points of ljperf_emit.h. One process-wide
** lock (ljp_lock) serialises the writers (perfmap.c, jitdump.c); a fork is
** detected by pid (cached; the atfork child handler forgets it) and gives
** the child its own files: at its first call, or at once in a child of
** root. Every file-scope name carries the ljp_ prefix: the amalgamation
** (ljamalg.c) compiles this file with all of LuaJIT.
*/
#include "ljperf_emit_common.h"

static pthread_mutex_t ljp_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t ljp_once = PTHREAD_ONCE_INIT;
static pid_t ljp_owner;		/* pid the outputs belong to; 0: never opened */
static unsigned ljp_want;		/* outputs requested by open, not yet closed */
static int ljp_fresh;	/* reopened after fork, not yet told to caller */
static char ljp_dir[PATH_MAX];	/* resolved jitdump directory */
static pid_t ljp_pid;		/* getpid() cache, reset in a fork child */
static int ljp_batch;		/* open batches: >0 defers writes */
static uint64_t ljp_drops[LJP_DROP__MAX];	/* drops since the last close */

static const char *const ljp_dropwhat[LJP_DROP__MAX] = {
#define LJP_DROPSTR(kind, what)	what,
  LJP_DROPDEF(LJP_DROPSTR)
#undef LJP_DROPSTR
};

static pid_t ljp_mypid(void)
{
  if (!ljp_pid) ljp_pid = getpid();
  return ljp_pid;
}

/* fork() while another thread holds the lock must not leave the child's
** copy locked forever: hold it across fork (glibc runs these handlers). */
static void ljp_fork_prepare(void) { pthread_mutex_lock(&ljp_lock); }
static void ljp_fork_parent(void) { pthread_mutex_unlock(&ljp_lock); }
static void ljp_check_fork(void);
static void ljp_fork_child(void)
{
  ljp_pid = 0;
  ljp_batch = 0;
  memset(ljp_drops, 0, sizeof(ljp_drops));  /* the parent counts its own */
  ljp_jd_forget_tid();
  /* A child of root may drop privileges next (nginx workers run as `user`,
  ** e.g. nobody): create its files now, as root. perf refuses a jitdump or
  ** perf map owned by neither itself nor root, and a stale root-owned file
  ** of a reused pid would stop an unprivileged child from creating its own.
  ** Describing the code still waits for the child's first call. */
  if (ljp_want && geteuid() == 0) ljp_check_fork();
  pthread_mutex_unlock(&ljp_lock);
}
static void ljp_register_atfork(void)
{
  (void)pthread_atfork(ljp_fork_prepare, ljp_fork_parent, ljp_fork_child);
}

static unsigned ljp_open_mask(void)
{
  return (ljp_map_isopen() ? LJP_MAP : 0) | (ljp_jd_isopen() ? LJP_JITDUMP : 0);
}

static void ljp_open_outputs(unsigned mask)
{
  if (mask & LJP_MAP) ljp_map_open(ljp_owner);
  if (mask & LJP_JITDUMP) {
    if (ljp_jd_open(ljp_owner, ljp_dir) == 0) ljp_inl_open(ljp_owner, ljp_dir);
  }
}

/* Lock held. In a fork child: drop the parent's outputs without writing to
** them and open the wanted ones for our pid. */
static void ljp_check_fork(void)
{
  pid_t pid = ljp_mypid();
  if (ljp_owner == pid) return;
  ljp_map_abandon();
  ljp_jd_abandon();
  ljp_inl_abandon();
  ljp_owner = pid;
  if (ljp_want) {
    ljp_open_outputs(ljp_want);
    ljp_fresh = 1;
  }
}

unsigned ljp_emit_open(unsigned mask, const char *dir)
{
  unsigned r;
  pthread_once(&ljp_once, ljp_register_atfork);
  pthread_mutex_lock(&ljp_lock);
  ljp_check_fork();
  mask &= LJP_MAP | LJP_JITDUMP;
  if ((mask & LJP_JITDUMP) && !ljp_jd_isopen()) {
    const char *d = (dir && *dir) ? dir : getenv("LUAJIT_PERF_DIR");
    if (!d || !*d) d = "/tmp";
    snprintf(ljp_dir, sizeof(ljp_dir), "%s", d);
  }
  ljp_want |= mask;
  ljp_open_outputs(mask);
  r = ljp_open_mask();
  pthread_mutex_unlock(&ljp_lock);
  return r;
}

unsigned ljp_emit_begin(int *fresh)
{
  unsigned r;
  int f;
  pthread_mutex_lock(&ljp_lock);
  ljp_check_fork();
  f = ljp_fresh;
  ljp_fresh = 0;
  r = ljp_open_mask();
  pthread_mutex_unlock(&ljp_lock);
  if (fresh) *fresh = f;
  return r;
}

/* NAME for the writers ("anon" if NULL or empty), cleaned once into CBUF
** (SZ bytes) when it fits; else they clean it. */
static LJPName ljp_name_prep(const char *name, char *cbuf, size_t sz)
{
  LJPName nm = { name && *name ? name : "anon", 0, 0 };
  nm.n = strlen(nm.s);
  if (nm.n < sz) {
    ljp_name_copy(cbuf, nm.s, nm.n);
    cbuf[nm.n] = '\0';
    nm.s = cbuf; nm.clean = 1;
  }
  return nm;
}

/* The first drop of a kind is told at once, the count at close. Called
** with ljp_lock held. */
static void ljp_dropped(LJPDrop what)
{
  if ((unsigned)what < LJP_DROP__MAX && ljp_drops[what]++ == 0)
    ljp_say("%s (reported once; the count follows at exit)", ljp_dropwhat[what]);
}

void ljp_emit_load(uint64_t addr, uint64_t size, const char *name,
		   const void *bytes, const LJPLine *lines, size_t nlines)
{
  char cbuf[1024];
  LJPName nm = ljp_name_prep(name, cbuf, sizeof(cbuf));
  pthread_mutex_lock(&ljp_lock);
  ljp_check_fork();
  if (ljp_map_isopen()) ljp_map_load(addr, size, &nm, ljp_batch > 0);
  if (ljp_jd_isopen() &&
      ljp_jd_load(addr, size, &nm, bytes, lines, nlines, ljp_batch > 0))
    ljp_dropped(LJP_DROP_TOOBIG);
  pthread_mutex_unlock(&ljp_lock);
}

void ljp_emit_trace(uint64_t addr, uint64_t size, const char *name,
		    const LJPLine *lines, size_t nlines, const LJPInline *inl)
{
  char cbuf[1024];
  LJPName nm = ljp_name_prep(name, cbuf, sizeof(cbuf));
  pthread_mutex_lock(&ljp_lock);
  ljp_check_fork();
  if (ljp_map_isopen()) ljp_map_load(addr, size, &nm, ljp_batch > 0);
  if (ljp_jd_isopen()) {
    uint64_t index = ljp_jd_nextindex();
    if (ljp_jd_load(addr, size, &nm, NULL, lines, nlines, ljp_batch > 0))
      ljp_dropped(LJP_DROP_TOOBIG);
    if (inl && ljp_inl_isopen() && ljp_jd_nextindex() != index)
      ljp_inl_trace(index, addr, size, inl, ljp_batch > 0);
  }
  pthread_mutex_unlock(&ljp_lock);
}

void ljp_emit_batch_begin(void)
{
  pthread_mutex_lock(&ljp_lock);
  ljp_batch++;
  pthread_mutex_unlock(&ljp_lock);
}

void ljp_emit_batch_end(void)
{
  pthread_mutex_lock(&ljp_lock);
  if (ljp_batch > 0 && --ljp_batch == 0) {
    ljp_check_fork();
    if (ljp_map_isopen()) ljp_map_flush();
    if (ljp_jd_isopen()) ljp_jd_flush();
    if (ljp_inl_isopen()) ljp_inl_flush();
  }
  pthread_mutex_unlock(&ljp_lock);
}

void ljp_emit_drop(LJPDrop what)
{
  pthread_mutex_lock(&ljp_lock);
  ljp_dropped(what);
  pthread_mutex_unlock(&ljp_lock);
}

void ljp_emit_close(void)
{
  pthread_mutex_lock(&ljp_lock);
  for (int i = 0; i < LJP_DROP__MAX; i++)
    if (ljp_drops[i])
      ljp_say("%s: %llu times", ljp_dropwhat[i], (unsigned long long)ljp_drops[i]);
  memset(ljp_drops, 0, sizeof(ljp_drops));
  if (ljp_owner == ljp_mypid()) {
    if (ljp_map_isopen()) ljp_map_flush();
    if (ljp_jd_isopen()) ljp_jd_flush();
    if (ljp_inl_isopen()) ljp_inl_flush();
    ljp_map_close();
    ljp_jd_close();
    ljp_inl_close();
  } else {  /* fork child that never called in: inherited, do not write */
    ljp_map_abandon();
    ljp_jd_abandon();
    ljp_inl_abandon();
    ljp_owner = ljp_mypid();
  }
  ljp_want = 0;
  ljp_fresh = 0;
  pthread_mutex_unlock(&ljp_lock);
}
