/*
** Behaviour tests of the perf map and jitdump writers.
**   emit_behaviour TEST     (see the table at the end; ctest runs each one)
**
** Every test runs "the program" in a forked child (stdout/stderr captured to
** files) and checks exit status, stderr lines and the files it left. As root
** the whole test runs in a private mount namespace with a tmpfs on /tmp, so
** /tmp/perf-PID.map files and mounts vanish with it; tests that need mounts,
** chown or setuid fail (not skip) when not root. Dumps are checked by our own
** reader (jd_read.h) and by ljperf/jitdump.py's validate().
*/
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ljperf_emit.h"
#include "ljperf_jitdump.h"
#include "jd_read.h"

#ifndef PYTHON_EXE
#define PYTHON_EXE "python3"
#endif
#ifndef JITDUMP_PY
#error "define JITDUMP_PY (path of ljperf/jitdump.py)"
#endif

/* The jitdump header's e_machine for the target this test is built for
** (the ELF spec's numbers; arm64_writers.py runs this test under qemu). */
#if defined(__x86_64__)
#define TEST_ELF_MACH 62
#elif defined(__aarch64__)
#define TEST_ELF_MACH 183
#else
#error "emit_behaviour knows the e_machine of x86-64 and aarch64 only"
#endif

#define BOTH (LJP_MAP | LJP_JITDUMP)
#define NOBODY 65534

static char g_dir[256];	/* scratch directory of this test */
static int g_isolated;		/* private mount namespace, tmpfs on /tmp */
static char *g_track[4096];	/* files to remove at exit when not isolated */
static int g_ntrack;

#define CHECK(cond, ...) do { if (!(cond)) { \
  fprintf(stderr, "FAIL %s:%d: (%s) ", __FILE__, __LINE__, #cond); \
  fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } } while (0)
/* In "the program" (child): report and exit with a distinctive status. */
#define CCHECK(cond, code) do { if (!(cond)) { \
  fprintf(stderr, "child check failed %s:%d: %s\n", __FILE__, __LINE__, #cond); \
  fflush(stderr); _exit(code); } } while (0)

static char *fmt(const char *f, ...)
{
  static char bufs[8][PATH_MAX + 64];
  static int k;
  char *b = bufs[k++ & 7];
  va_list ap;
  va_start(ap, f);
  vsnprintf(b, sizeof(bufs[0]), f, ap);
  va_end(ap);
  return b;
}

static const char *map_path(pid_t pid) { return fmt("/tmp/perf-%d.map", (int)pid); }
static const char *dump_path(const char *dir, pid_t pid) { return fmt("%s/jit-%d.dump", dir, (int)pid); }

static void track(const char *path)
{
  if (!g_isolated && g_ntrack < 4096) g_track[g_ntrack++] = strdup(path);
}

static void cleanup(void)
{
  if (getpid() != (pid_t)strtol(getenv("LJP_TEST_PID") ? getenv("LJP_TEST_PID") : "0", NULL, 10))
    return;  /* only the test process cleans up, not forked children */
  for (int i = 0; i < g_ntrack; i++) unlink(g_track[i]);
  if (g_dir[0] && !g_isolated) {
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof(cmd), "chmod -R u+w '%s'; rm -rf '%s'", g_dir, g_dir);
    if (system(cmd)) {}
  }
}

/* Mounts a tmpfs (options OPTS) over /tmp. A build or source tree under
** the /tmp below it (the cwd, JITDUMP_PY) stays visible: its top directory
** is bound back in place through a directory fd.
*/
static void tmpfs_over_tmp(const char *name, const char *opts)
{
  const char *keep[2];
  char cwd[PATH_MAX];
  int old = open("/tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);
  CHECK(old >= 0 && getcwd(cwd, sizeof(cwd)), "open /tmp, getcwd: %s", strerror(errno));
  CHECK(mount(name, "/tmp", "tmpfs", 0, opts) == 0, "tmpfs %s on /tmp: %s", name, strerror(errno));
  keep[0] = cwd;
  keep[1] = JITDUMP_PY;
  for (int i = 0; i < 2; i++) {
    char top[PATH_MAX];
    if (strncmp(keep[i], "/tmp/", 5) != 0) continue;
    snprintf(top, sizeof(top), "%s", keep[i] + 5);
    *strchrnul(top, '/') = 0;
    if (!top[0] || access(fmt("/tmp/%s", top), F_OK) == 0) continue;
    CHECK(mkdir(fmt("/tmp/%s", top), 0755) == 0, "mkdir /tmp/%s: %s", top, strerror(errno));
    CHECK(mount(fmt("/proc/self/fd/%d/%s", old, top), fmt("/tmp/%s", top), NULL,
		MS_BIND | MS_REC, NULL) == 0, "bind /tmp/%s: %s", top, strerror(errno));
  }
  close(old);
}

/* Sets up the scratch dir; as root in a private mount namespace. */
static void setup(int need_root)
{
  if (geteuid() == 0) {
    CHECK(unshare(CLONE_NEWNS) == 0, "unshare(CLONE_NEWNS): %s", strerror(errno));
    CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0, "make / private: %s", strerror(errno));
    tmpfs_over_tmp("ljp-test", "size=64m,mode=1777");
    g_isolated = 1;
  } else {
    CHECK(!need_root, "this test needs root (mounts tmpfs, chown, setuid); CI runs it as root");
  }
  char t[] = "/tmp/ljp-emit-test.XXXXXX";
  CHECK(mkdtemp(t), "mkdtemp: %s", strerror(errno));
  chmod(t, 0755);
  snprintf(g_dir, sizeof(g_dir), "%s", t);
  setenv("LJP_TEST_PID", fmt("%d", (int)getpid()), 1);
  unsetenv("LUAJIT_PERF_DIR");
  atexit(cleanup);
}

/* -- Running "the program" ------------------------------------------------- */

typedef struct Run {
  pid_t pid;
  int status;
  char out[65536], err[65536];
} Run;

static void read_file(const char *path, char *buf, size_t len)
{
  int fd = open(path, O_RDONLY);
  ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : 0;
  buf[n > 0 ? n : 0] = 0;
  if (fd >= 0) close(fd);
}

/* Runs FN(ARG) in a child; the child exits 0 when FN returns. */
static void run(Run *r, void (*fn)(void *), void *arg)
{
  const char *o = fmt("%s/child.out", g_dir), *e = fmt("%s/child.err", g_dir);
  char op[PATH_MAX], ep[PATH_MAX];
  snprintf(op, sizeof(op), "%s", o); snprintf(ep, sizeof(ep), "%s", e);
  fflush(NULL);
  r->pid = fork();
  CHECK(r->pid >= 0, "fork: %s", strerror(errno));
  if (r->pid == 0) {
    int fo = open(op, O_WRONLY | O_CREAT | O_TRUNC, 0666), fe = open(ep, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fo < 0 || fe < 0) _exit(120);
    fchmod(fo, 0666); fchmod(fe, 0666);  /* may drop privileges later */
    dup2(fo, 1); dup2(fe, 2); close(fo); close(fe);
    setvbuf(stdout, NULL, _IONBF, 0);
    fn(arg);
    fflush(NULL);
    _exit(0);
  }
  CHECK(waitpid(r->pid, &r->status, 0) == r->pid, "waitpid: %s", strerror(errno));
  read_file(op, r->out, sizeof(r->out));
  read_file(ep, r->err, sizeof(r->err));
  track(map_path(r->pid));
}

static int count_lines(const char *s)
{
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

static void expect_exit0(const Run *r)
{
  CHECK(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0,
	"program status 0x%x (want exit 0); stderr:\n%s", r->status, r->err);
}

/* Exactly one stderr line, containing all the given fragments. */
static void expect_one_line(const Run *r, const char *a, const char *b, const char *c)
{
  CHECK(count_lines(r->err) == 1, "want exactly one stderr line, got:\n%s", r->err);
  CHECK(strstr(r->err, a) && strstr(r->err, b) && strstr(r->err, c),
	"stderr line lacks '%s' / '%s' / '%s': %s", a, b, c, r->err);
  CHECK(!strncmp(r->err, "ljperf: ", 8), "stderr line must start with 'ljperf: ': %s", r->err);
}

/* jitdump.py validate() via the command line; 0 if the dump is sane. */
static int validate(const char *path)
{
  char out[PATH_MAX];
  snprintf(out, sizeof(out), "%s/validate.out", g_dir);
  fflush(NULL);
  pid_t p = fork();
  CHECK(p >= 0, "fork");
  if (p == 0) {
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1); dup2(fd, 2);
    setenv("PYTHONDONTWRITEBYTECODE", "1", 1);
    execlp(PYTHON_EXE, PYTHON_EXE, JITDUMP_PY, path, (char *)NULL);
    dprintf(1, "cannot run %s: %s\n", PYTHON_EXE, strerror(errno));
    _exit(127);
  }
  int st;
  waitpid(p, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    char buf[16384];
    read_file(out, buf, sizeof(buf));
    fprintf(stderr, "jitdump.py %s:\n%s", path, buf);
    return 1;
  }
  return 0;
}

static void load_dump(JD *jd, const char *path)
{
  CHECK(jd_load(jd, path) == 0, "cannot read a jitdump header from %s", path);
  CHECK(!jd->truncated, "%s ends with a partial record", path);
}

static int file_exists(const char *p) { struct stat st; return lstat(p, &st) == 0; }

/* Does /proc/self/maps (or an fd of ours) mention PATH? */
static int self_maps_has(const char *path, const char *perm)
{
  FILE *f = fopen("/proc/self/maps", "r");
  char *l = NULL;
  size_t cap = 0;
  int found = 0;
  while (f && getline(&l, &cap, f) > 0)
    if (strstr(l, path) && (!perm || strstr(l, perm))) found = 1;
  free(l);
  if (f) fclose(f);
  return found;
}

static int self_fd_has(const char *path)
{
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  char lp[PATH_MAX], tgt[PATH_MAX];
  int found = 0;
  while (d && (e = readdir(d))) {
    snprintf(lp, sizeof(lp), "/proc/self/fd/%s", e->d_name);
    ssize_t n = readlink(lp, tgt, sizeof(tgt) - 1);
    if (n > 0) { tgt[n] = 0; if (!strcmp(tgt, path)) found = 1; }
  }
  if (d) closedir(d);
  return found;
}

/* A load with unique bytes at a fake address (the writer never executes it). */
static void fake_load(uint64_t addr, uint32_t size, const char *name, uint32_t seed, size_t nlines)
{
  uint8_t code[4096];
  LJPLine lines[256];
  if (size > sizeof(code)) size = sizeof(code);
  for (uint32_t i = 0; i < size; i++) code[i] = (uint8_t)(i * 7 + seed);
  if (size >= 8) { memcpy(code, &seed, 4); memcpy(code + 4, &addr, 4); }
  if (nlines > 256) nlines = 256;
  for (size_t i = 0; i < nlines; i++) {
    lines[i].addr = addr + i * size / nlines;
    lines[i].line = (uint32_t)(100 + i);
    lines[i].file = "@fake/source.lua";
  }
  ljp_emit_load(addr, size, name, code, nlines ? lines : NULL, nlines);
}

/* -- map: line format, dedup, sanitising, mode 0644 ----------------------- */

/* Names for the cleaner: every byte but NUL, and a bad byte at each of
** CLEAN_AT positions (the cleaner copies 8 clean bytes at a time). */
#define CLEAN_AT	21
static char clean_all[256];

/* The cleaned form of byte C, as ljperf_emit.h documents it. */
static char clean_ref(unsigned char c)
{
  return c <= ' ' || c == '(' || c == ')' || c == ';' || c == 0x7f ? '_' : (char)c;
}

static void prog_map(void *arg)
{
  (void)arg;
  for (int i = 0; i < 255; i++) clean_all[i] = (char)(i + 1);
  umask(077);  /* the writer must still produce 0644 */
  CCHECK(ljp_emit_open(LJP_MAP, NULL) == LJP_MAP, 3);
  ljp_emit_load(0x1000, 0x10, "f_one", NULL, NULL, 0);
  ljp_emit_load(0x1000, 0x10, "f_one", NULL, NULL, 0);		/* dup */
  ljp_emit_load(0x2000, 0x20, "f two(x);y\n", NULL, NULL, 0);
  ljp_emit_load(0x1000, 0x10, "f_other", NULL, NULL, 0);	/* new name */
  ljp_emit_load(0x1000, 0x18, "f_one", NULL, NULL, 0);		/* new size */
  ljp_emit_load(0x3000, 0x8, NULL, NULL, NULL, 0);
  ljp_emit_load(0x2000, 0x20, "f two(x);y\n", NULL, NULL, 0);	/* dup */
  ljp_emit_load(0x5000, 0x10, clean_all, NULL, NULL, 0);  /* bytes 1..255 */
  for (int i = 0; i < CLEAN_AT; i++) {  /* one bad byte at each position */
    char nm[CLEAN_AT + 1];
    memset(nm, 'a' + i % 26, CLEAN_AT);
    nm[i] = "\t(;)\x7f "[i % 6];
    nm[CLEAN_AT] = '\0';
    ljp_emit_load(0x6000 + (uint64_t)i * 16, 16, nm, NULL, NULL, 0);
  }
  for (int pass = 0; pass < 2; pass++)  /* grows the set; second pass all dups */
    for (int i = 0; i < 3000; i++)
      ljp_emit_load(0x100000 + (uint64_t)i * 16, 16, fmt("bulk_%d", i), NULL, NULL, 0);
  CCHECK(ljp_emit_begin(NULL) == LJP_MAP, 4);
  ljp_emit_close();
  CCHECK(ljp_emit_begin(NULL) == 0, 5);
  ljp_emit_load(0x4000, 4, "after_close", NULL, NULL, 0);	/* no-op */
}

static void t_map(void)
{
  Run r;
  struct stat st;
  static char m[1 << 20];
  run(&r, prog_map, NULL);
  expect_exit0(&r);
  CHECK(r.err[0] == 0, "unexpected stderr: %s", r.err);
  const char *mp = map_path(r.pid);
  CHECK(lstat(mp, &st) == 0 && S_ISREG(st.st_mode), "no map file %s", mp);
  CHECK((st.st_mode & 0777) == 0644, "map mode %o, want 0644", st.st_mode & 0777);
  read_file(mp, m, sizeof(m));
  const char *head = "1000 10 f_one\n2000 20 f_two_x__y_\n1000 10 f_other\n1000 18 f_one\n3000 8 anon\n";
  CHECK(!strncmp(m, head, strlen(head)), "map starts with:\n%.300s\nwant:\n%s", m, head);
  CHECK(count_lines(m) == 5 + 1 + CLEAN_AT + 3000, "map has %d lines, want %d", count_lines(m),
	5 + 1 + CLEAN_AT + 3000);
  char want[300] = "5000 10 ";
  for (int i = 0; i < 255; i++) want[8 + i] = clean_ref((unsigned char)(i + 1));
  strcpy(want + 8 + 255, "\n");
  CHECK(strstr(m, want) != NULL, "bytes 1..255 not cleaned as documented:\n%.300s", m);
  for (int i = 0; i < CLEAN_AT; i++) {
    char nm[CLEAN_AT + 1];
    memset(nm, 'a' + i % 26, CLEAN_AT);
    nm[i] = '_';
    nm[CLEAN_AT] = '\0';
    CHECK(strstr(m, fmt("%x 10 %s\n", 0x6000 + i * 16, nm)) != NULL,
	  "bad byte at %d not cleaned", i);
  }
  CHECK(strstr(m, "100000 10 bulk_0\n") && strstr(m, "10bb70 10 bulk_2999\n"), "bulk lines missing");
  CHECK(!strstr(m, "after_close"), "load after close was written");
  CHECK(!file_exists(dump_path("/tmp", r.pid)), "map-only program wrote a jitdump");
}

/* -- jitdump: records, line filtering, closing entry, marker mapping ------ */

static uint8_t jd_code[3][32];

static void prog_jitdump(void *arg)
{
  (void)arg;
  umask(077);
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 32; k++) jd_code[i][k] = (uint8_t)(i * 50 + k);
  CCHECK(ljp_emit_open(LJP_JITDUMP, g_dir) == LJP_JITDUMP, 3);
  CCHECK(self_maps_has(dump_path(g_dir, getpid()), "r-xp"), 4);  /* perf's marker */
  uint64_t a = (uint64_t)(uintptr_t)jd_code[0];
  LJPLine l0[] = {
    { a - 4, 9, "src.lua" },	/* before the code: dropped */
    { a, 10, "src.lua" },
    { a + 8, 11, "src.lua" },
    { a + 8, 12, "other.lua" },	/* same address: kept (ascending, not strictly) */
    { a + 4, 99, "src.lua" },	/* out of order: dropped */
    { a + 40, 98, "src.lua" },	/* beyond the code: dropped */
  };
  ljp_emit_load(a, 32, "jd zero", NULL, l0, 6);
  static const uint8_t synth[32] = "synthetic bytes, not at addr!!";
  ljp_emit_load((uint64_t)(uintptr_t)jd_code[1], 32, "jd_one", synth, NULL, 0);
  uint64_t b = (uint64_t)(uintptr_t)jd_code[2];
  LJPLine l2[] = { { b, 5, "x.lua" }, { b + 16, 6, "x.lua" } };  /* caller's own "closing" */
  ljp_emit_load(b, 16, "jd_two", NULL, l2, 2);
  ljp_emit_load(b + 16, 0, "jd_empty", NULL, l2, 1);	/* size 0: no DEBUG_INFO */
  ljp_emit_close();
  CCHECK(!self_maps_has(dump_path(g_dir, getpid()), NULL), 5);  /* unmapped */
  ljp_emit_load(b, 16, "after_close", NULL, NULL, 0);	/* no-op */
}

static void expect_entry(const JDRec *d, size_t i, uint64_t addr, uint32_t line, const char *file)
{
  CHECK(i < d->nent, "entry %zu missing", i);
  CHECK(d->ent[i].addr == addr && d->ent[i].line == line && !strcmp(d->ent[i].file, file),
	"entry %zu: 0x%llx %u %s, want 0x%llx %u %s", i, (unsigned long long)d->ent[i].addr,
	d->ent[i].line, d->ent[i].file, (unsigned long long)addr, line, file);
}

static void t_jitdump(void)
{
  Run r;
  JD jd;
  struct stat st;
  run(&r, prog_jitdump, NULL);
  expect_exit0(&r);
  CHECK(r.err[0] == 0, "unexpected stderr: %s", r.err);
  CHECK(!file_exists(map_path(r.pid)), "jitdump-only program wrote a perf map");
  const char *p = dump_path(g_dir, r.pid);
  CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0644, "dump %s missing or mode not 0644", p);
  CHECK(validate(p) == 0, "jitdump.py rejects %s", p);
  load_dump(&jd, p);
  CHECK(jd.version == 1 && jd.mach == TEST_ELF_MACH && jd.pid == (uint32_t)r.pid && jd.flags == 0,
	"header: version %u mach %u pid %u flags %llu", jd.version, jd.mach, jd.pid,
	(unsigned long long)jd.flags);
  /* DEBUG, LOAD, LOAD, DEBUG, LOAD, LOAD, CLOSE */
  static const uint32_t ids[] = { 2, 0, 0, 2, 0, 0, 3 };
  CHECK(jd.nrec == 7, "%zu records, want 7", jd.nrec);
  for (size_t i = 0; i < 7; i++) CHECK(jd.rec[i].id == ids[i], "record %zu id %u, want %u", i, jd.rec[i].id, ids[i]);
  CHECK(jd.ts <= jd.rec[0].ts, "header timestamp after the first record");
  const char *names[] = { "jd_zero", "jd_one", "jd_two", "jd_empty" };
  for (size_t i = 0; i < 4; i++) {
    const JDRec *l = jd_load_n(&jd, i);
    CHECK(l->index == i && !strcmp(l->name, names[i]) && l->pid == (uint32_t)r.pid &&
	  l->tid == (uint32_t)r.pid, "load %zu: index %llu name %s pid %u tid %u", i,
	  (unsigned long long)l->index, l->name, l->pid, l->tid);
  }
  const JDRec *l0 = jd_load_n(&jd, 0), *l1 = jd_load_n(&jd, 1), *l2 = jd_load_n(&jd, 2);
  uint8_t want0[32];
  for (int k = 0; k < 32; k++) want0[k] = (uint8_t)k;
  CHECK(l0->csize == 32 && !memcmp(l0->code, want0, 32), "load 0 bytes not copied from addr");
  CHECK(l1->csize == 32 && !memcmp(l1->code, "synthetic bytes, not at addr!!", 31), "load 1 bytes not BYTES");
  CHECK(jd_load_n(&jd, 3)->csize == 0, "empty load has bytes");
  const JDRec *d0 = jd_debug_of(&jd, l0), *d2 = jd_debug_of(&jd, l2);
  CHECK(d0 && d0->nent == 4, "load 0 DEBUG_INFO: %zu entries, want 4", d0 ? d0->nent : 0);
  uint64_t a = l0->addr, b = l2->addr;
  expect_entry(d0, 0, a, 10, "src.lua");
  expect_entry(d0, 1, a + 8, 11, "src.lua");
  expect_entry(d0, 2, a + 8, 12, "other.lua");
  expect_entry(d0, 3, a + 32, 12, "other.lua");	/* closing entry */
  CHECK(d2 && d2->nent == 2, "load 2 DEBUG_INFO: %zu entries, want 2", d2 ? d2->nent : 0);
  expect_entry(d2, 0, b, 5, "x.lua");
  expect_entry(d2, 1, b + 16, 5, "x.lua");
  CHECK(!jd_debug_of(&jd, l1), "load without lines got a DEBUG_INFO");
  for (size_t i = 1; i < jd.nrec; i++) CHECK(jd.rec[i].ts >= jd.rec[i - 1].ts, "timestamps decrease");
  jd_free(&jd);
}

/* -- directory choice: argument, $LUAJIT_PERF_DIR, /tmp ------------------- */

static void prog_dirs(void *arg)
{
  (void)arg;
  setenv("LUAJIT_PERF_DIR", fmt("%s/env", g_dir), 1);
  CCHECK(ljp_emit_open(LJP_JITDUMP, "") == LJP_JITDUMP, 3);	/* "" -> env */
  fake_load(0x1000, 16, "in_env", 1, 2);
  ljp_emit_close();
  CCHECK(ljp_emit_open(LJP_JITDUMP, fmt("%s/arg", g_dir)) == LJP_JITDUMP, 4);  /* new dir: */
  fake_load(0x2000, 16, "in_arg", 2, 2);  /* same pid, other path: a fresh file */
  ljp_emit_close();
  unsetenv("LUAJIT_PERF_DIR");
  CCHECK(ljp_emit_open(LJP_JITDUMP, NULL) == LJP_JITDUMP, 5);	/* -> /tmp */
  fake_load(0x3000, 16, "in_tmp", 3, 2);
  ljp_emit_close();
}

static void t_dirs(void)
{
  Run r;
  JD jd;
  CHECK(mkdir(fmt("%s/env", g_dir), 0755) == 0 && mkdir(fmt("%s/arg", g_dir), 0755) == 0, "mkdir");
  run(&r, prog_dirs, NULL);
  track(dump_path("/tmp", r.pid));
  expect_exit0(&r);
  CHECK(r.err[0] == 0, "unexpected stderr: %s", r.err);
  char where[3][PATH_MAX];
  snprintf(where[0], PATH_MAX, "%s/env", g_dir);
  snprintf(where[1], PATH_MAX, "%s/arg", g_dir);
  snprintf(where[2], PATH_MAX, "/tmp");
  const char *name[] = { "in_env", "in_arg", "in_tmp" };
  for (int i = 0; i < 3; i++) {
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s", dump_path(where[i], r.pid));
    CHECK(validate(p) == 0, "bad dump %s", p);
    load_dump(&jd, p);
    CHECK(jd.nload == 1 && !strcmp(jd_load_n(&jd, 0)->name, name[i]), "%s lacks %s", p, name[i]);
    jd_free(&jd);
  }
}

/* -- planted files: symlinks, foreign owner, stale file, directory -------- */

enum { P_SYMLINK_DANGLING, P_SYMLINK_EXISTING, P_FOREIGN, P_STALE, P_DIRECTORY };
typedef struct Plant { int kind, map; } Plant;

static void prog_plant(void *arg)
{
  Plant *pl = arg;
  const char *path = pl->map ? map_path(getpid()) : dump_path(g_dir, getpid());
  char p[PATH_MAX];
  snprintf(p, sizeof(p), "%s", path);
  const char *target = fmt("%s/target-%d", pl->map ? "/tmp" : g_dir, (int)getpid());
  int fd;
  switch (pl->kind) {
  case P_SYMLINK_DANGLING: CCHECK(symlink(target, p) == 0, 90); break;
  case P_SYMLINK_EXISTING:
    fd = open(target, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CCHECK(fd >= 0 && write(fd, "keep\n", 5) == 5, 90); close(fd);
    CCHECK(symlink(target, p) == 0, 90); break;
  case P_FOREIGN:
  case P_STALE:
    fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CCHECK(fd >= 0 && write(fd, "planted\n", 8) == 8, 90); close(fd);
    if (pl->kind == P_FOREIGN) CCHECK(chown(p, NOBODY, NOBODY) == 0, 91);
    break;
  case P_DIRECTORY: CCHECK(mkdir(p, 0755) == 0, 90); break;
  }
  unsigned want = pl->kind == P_STALE ? BOTH : (pl->map ? LJP_JITDUMP : LJP_MAP);
  CCHECK(ljp_emit_open(BOTH, g_dir) == want, 3);
  for (int i = 0; i < 3; i++) fake_load(0x1000 + i * 0x100, 64, fmt("plant_%d", i), i, 3);
  CCHECK(ljp_emit_begin(NULL) == want, 4);
  printf("alive\n");
  ljp_emit_close();
}

static void t_plant(int kind, int map)
{
  Plant pl = { kind, map };
  Run r;
  char buf[4096];
  struct stat st;
  static const char *why[] = { "refusing to follow a symlink", "refusing to follow a symlink",
			       "owned by another user", "", "not a regular file" };
  run(&r, prog_plant, &pl);
  const char *p = map ? map_path(r.pid) : dump_path(g_dir, r.pid);
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s", p);
  track(fmt("/tmp/target-%d", (int)r.pid));
  expect_exit0(&r);
  CHECK(strstr(r.out, "alive"), "program did not keep running");
  if (kind == P_STALE) {
    CHECK(r.err[0] == 0, "stale own file: unexpected stderr %s", r.err);
  } else {
    expect_one_line(&r, map ? "perf map disabled" : "jitdump disabled", path, why[kind]);
  }
  /* The planted object is untouched; a stale file of ours was replaced. */
  CHECK(lstat(path, &st) == 0, "%s vanished", path);
  switch (kind) {
  case P_SYMLINK_DANGLING:
    CHECK(S_ISLNK(st.st_mode), "symlink replaced");
    CHECK(!file_exists(fmt("%s/target-%d", map ? "/tmp" : g_dir, (int)r.pid)), "symlink target created");
    break;
  case P_SYMLINK_EXISTING:
    CHECK(S_ISLNK(st.st_mode), "symlink replaced");
    read_file(fmt("%s/target-%d", map ? "/tmp" : g_dir, (int)r.pid), buf, sizeof(buf));
    CHECK(!strcmp(buf, "keep\n"), "symlink target modified: %s", buf);
    break;
  case P_FOREIGN:
    read_file(path, buf, sizeof(buf));
    CHECK(S_ISREG(st.st_mode) && st.st_uid == NOBODY && !strcmp(buf, "planted\n"),
	  "foreign file modified (uid %u, content %.40s)", st.st_uid, buf);
    break;
  case P_STALE:
    CHECK(S_ISREG(st.st_mode) && st.st_uid == geteuid(), "stale file not ours");
    break;
  case P_DIRECTORY:
    CHECK(S_ISDIR(st.st_mode), "directory replaced");
    break;
  }
  /* The other output (or both, for the stale case) works. */
  if (!map || kind == P_STALE) {
    read_file(map_path(r.pid), buf, sizeof(buf));
    CHECK(count_lines(buf) == 3 && !strncmp(buf, "1000 40 plant_0\n", 16), "map content:\n%s", buf);
  }
  if (map || kind == P_STALE) {
    JD jd;
    const char *dp = dump_path(g_dir, r.pid);
    CHECK(validate(dp) == 0, "bad dump");
    load_dump(&jd, dp);
    CHECK(jd.nload == 3 && jd.nclose == 1, "dump has %zu loads %zu closes", jd.nload, jd.nclose);
    jd_free(&jd);
  }
}

static void t_symlink(void)
{
  t_plant(P_SYMLINK_DANGLING, 1);
  t_plant(P_SYMLINK_EXISTING, 1);
  t_plant(P_SYMLINK_DANGLING, 0);
  t_plant(P_SYMLINK_EXISTING, 0);
}
static void t_foreign(void) { t_plant(P_FOREIGN, 1); t_plant(P_FOREIGN, 0); }
static void t_stale(void) { t_plant(P_STALE, 1); t_plant(P_STALE, 0); t_plant(P_DIRECTORY, 1); t_plant(P_DIRECTORY, 0); }

/* -- unwritable directory (EACCES) ----------------------------------------- */

static void prog_eacces(void *arg)
{
  const char *dir = arg;
  if (geteuid() == 0) {  /* root ignores permissions: become nobody */
    CCHECK(setgroups(0, NULL) == 0 && setgid(NOBODY) == 0 && setuid(NOBODY) == 0, 90);
  }
  CCHECK(ljp_emit_open(BOTH, dir) == LJP_MAP, 3);
  for (int i = 0; i < 3; i++) fake_load(0x1000 + i * 0x100, 64, fmt("acc_%d", i), i, 3);
  CCHECK(ljp_emit_begin(NULL) == LJP_MAP, 4);
  printf("alive\n");
  ljp_emit_close();
}

static void t_eacces(void)
{
  Run r;
  char buf[4096], dir[PATH_MAX];
  snprintf(dir, sizeof(dir), "%s/locked", g_dir);
  CHECK(mkdir(dir, 0755) == 0, "mkdir");
  if (geteuid() != 0) CHECK(chmod(dir, 0555) == 0, "chmod");
  run(&r, prog_eacces, dir);
  expect_exit0(&r);
  CHECK(strstr(r.out, "alive"), "program did not keep running");
  expect_one_line(&r, "jitdump disabled", dump_path(dir, r.pid), strerror(EACCES));
  read_file(map_path(r.pid), buf, sizeof(buf));
  CHECK(count_lines(buf) == 3, "map has %d lines, want 3", count_lines(buf));
}

/* -- read-only file systems (EROFS) ---------------------------------------- */

static void prog_three(void *arg)
{
  const char **a = arg;  /* { dir, expected mask as "%u" } */
  unsigned want = (unsigned)atoi(a[1]);
  CCHECK(ljp_emit_open(BOTH, a[0]) == want, 3);
  for (int i = 0; i < 3; i++) fake_load(0x1000 + i * 0x100, 64, fmt("three_%d", i), i, 3);
  CCHECK(ljp_emit_begin(NULL) == want, 4);
  printf("alive\n");
  ljp_emit_close();
}

static void t_erofs(void)
{
  Run r;
  char buf[4096], ro[PATH_MAX];
  /* jitdump directory read-only, map fine. */
  snprintf(ro, sizeof(ro), "%s/ro", g_dir);
  CHECK(mkdir(ro, 0755) == 0, "mkdir");
  CHECK(mount("ljp-ro", ro, "tmpfs", 0, "size=1m") == 0, "mount: %s", strerror(errno));
  CHECK(mount(NULL, ro, NULL, MS_REMOUNT | MS_RDONLY, NULL) == 0, "remount ro: %s", strerror(errno));
  const char *a[] = { ro, fmt("%u", LJP_MAP) };
  run(&r, prog_three, a);
  expect_exit0(&r);
  CHECK(strstr(r.out, "alive"), "program did not keep running");
  expect_one_line(&r, "jitdump disabled", dump_path(ro, r.pid), strerror(EROFS));
  read_file(map_path(r.pid), buf, sizeof(buf));
  CHECK(count_lines(buf) == 3, "map has %d lines, want 3", count_lines(buf));
}

/* /tmp read-only: the map fails, the jitdump (on a writable mount) works.
** The child's output files move to that mount too. */
static void t_erofs_map(void)
{
  Run r;
  char rw[sizeof(g_dir) - 8], saved[sizeof(g_dir)];
  JD jd;
  CHECK(strlen(g_dir) + 4 <= sizeof(rw), "path");
  snprintf(rw, sizeof(rw), "%.240s/rw", g_dir);
  CHECK(mkdir(rw, 0755) == 0, "mkdir");
  CHECK(mount("ljp-rw", rw, "tmpfs", 0, "size=1m") == 0, "mount: %s", strerror(errno));
  CHECK(mount(NULL, "/tmp", NULL, MS_REMOUNT | MS_RDONLY, "size=64m,mode=1777") == 0,
	"remount /tmp ro: %s", strerror(errno));
  snprintf(saved, sizeof(saved), "%s", g_dir);
  snprintf(g_dir, sizeof(g_dir), "%s", rw);  /* child.out/err, validate.out go here */
  const char *a[] = { rw, fmt("%u", LJP_JITDUMP) };
  run(&r, prog_three, a);
  expect_exit0(&r);
  CHECK(strstr(r.out, "alive"), "program did not keep running");
  expect_one_line(&r, "perf map disabled", map_path(r.pid), strerror(EROFS));
  const char *dp = dump_path(rw, r.pid);
  CHECK(validate(dp) == 0, "bad dump");
  load_dump(&jd, dp);
  CHECK(jd.nload == 3, "dump has %zu loads", jd.nload);
  jd_free(&jd);
  snprintf(g_dir, sizeof(g_dir), "%s", saved);
  CHECK(mount(NULL, "/tmp", NULL, MS_REMOUNT, "size=64m,mode=1777") == 0, "remount /tmp rw");
}

static void t_erofs_all(void)
{
  CHECK(g_isolated, "EROFS tests need root (read-only mounts); CI runs as root");
  t_erofs();
  t_erofs_map();
}

/* -- full file system (ENOSPC) --------------------------------------------- */

static void prog_enospc(void *arg)
{
  (void)arg;
  int fail_at = -1;
  CCHECK(ljp_emit_open(BOTH, NULL) == BOTH, 3);  /* dir from $LUAJIT_PERF_DIR */
  for (int i = 0; i < 2000 && fail_at < 0; i++) {
    fake_load(0x10000000 + (uint64_t)i * 0x1000, 1000, fmt("full_%d", i), (uint32_t)i, 5);
    unsigned m = ljp_emit_begin(NULL);
    CCHECK(m & LJP_MAP, 4);
    if (!(m & LJP_JITDUMP)) fail_at = i;
  }
  for (int i = 0; i < 20; i++)  /* the map keeps working */
    fake_load(0x20000000 + (uint64_t)i * 0x1000, 1000, fmt("more_%d", i), (uint32_t)i, 5);
  ljp_emit_close();
  printf("fail_at %d\n", fail_at);
}

static void t_enospc(void)
{
  Run r;
  JD jd;
  static char m[1 << 20];
  char full[PATH_MAX];
  int fail_at = -1;
  CHECK(g_isolated, "ENOSPC test needs root (mounts a 64 KiB tmpfs); CI runs as root");
  snprintf(full, sizeof(full), "%s/full", g_dir);
  CHECK(mkdir(full, 0755) == 0, "mkdir");
  CHECK(mount("ljp-full", full, "tmpfs", 0, "size=64k") == 0, "mount: %s", strerror(errno));
  setenv("LUAJIT_PERF_DIR", full, 1);
  run(&r, prog_enospc, NULL);
  unsetenv("LUAJIT_PERF_DIR");
  expect_exit0(&r);
  CHECK(sscanf(r.out, "fail_at %d", &fail_at) == 1 && fail_at > 5, "output: %s", r.out);
  expect_one_line(&r, "jitdump disabled", dump_path(full, r.pid), strerror(ENOSPC));
  const char *dp = dump_path(full, r.pid);
  CHECK(validate(dp) == 0, "dump not valid after ENOSPC");
  load_dump(&jd, dp);  /* no partial record at the end */
  CHECK(jd.nload == (size_t)fail_at, "dump has %zu loads, want %d (all before the failure)",
	jd.nload, fail_at);
  CHECK(jd.nclose == 0 && jd.rec[jd.nrec - 1].id == 0, "dump must end with the last complete CODE_LOAD");
  CHECK(!strcmp(jd_load_n(&jd, (size_t)fail_at - 1)->name, fmt("full_%d", fail_at - 1)), "last load");
  jd_free(&jd);
  read_file(map_path(r.pid), m, sizeof(m));
  CHECK(count_lines(m) == fail_at + 1 + 20, "map has %d lines, want %d", count_lines(m), fail_at + 21);
  CHECK(strstr(m, " more_19\n"), "map stopped working");
}

/* The map's file system fills up: only complete lines stay, jitdump goes on. */
static void prog_enospc_map(void *arg)
{
  int fail_at = -1;
  char name[300];
  memset(name, 'n', sizeof(name) - 1);
  name[sizeof(name) - 1] = 0;
  CCHECK(ljp_emit_open(BOTH, arg) == BOTH, 3);
  for (int i = 0; i < 2000 && fail_at < 0; i++) {
    char tag[16];
    snprintf(tag, sizeof(tag), "long%06d_", i % 1000000);
    memcpy(name, tag, 11);  /* unique prefix, then the 'n' filler */
    fake_load(0x10000000 + (uint64_t)i * 0x1000, 64, name, (uint32_t)i, 2);
    unsigned m = ljp_emit_begin(NULL);
    CCHECK(m & LJP_JITDUMP, 4);
    if (!(m & LJP_MAP)) fail_at = i;
  }
  fake_load(0x20000000, 64, "after_full", 1, 2);
  ljp_emit_close();
  printf("fail_at %d\n", fail_at);
}

static void t_enospc_map(void)
{
  Run r;
  JD jd;
  static char m[1 << 20];
  char saved[sizeof(g_dir)], dp[PATH_MAX];
  int fail_at = -1;
  /* Stack a 16 KiB tmpfs on /tmp; the scratch dir under it stays reachable
  ** through a directory fd (/proc/PID/fd/N). */
  int dfd = open(g_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  CHECK(dfd >= 0, "open %s: %s", g_dir, strerror(errno));
  tmpfs_over_tmp("ljp-tiny", "size=16k,mode=1777");
  snprintf(saved, sizeof(saved), "%s", g_dir);
  snprintf(g_dir, sizeof(g_dir), "/proc/%d/fd/%d", (int)getpid(), dfd);
  run(&r, prog_enospc_map, g_dir);
  read_file(map_path(r.pid), m, sizeof(m));
  expect_exit0(&r);
  CHECK(sscanf(r.out, "fail_at %d", &fail_at) == 1 && fail_at > 5, "output: %s", r.out);
  expect_one_line(&r, "perf map disabled", map_path(r.pid), strerror(ENOSPC));
  CHECK(count_lines(m) == fail_at, "map has %d lines, want %d", count_lines(m), fail_at);
  CHECK(strlen(m) > 0 && m[strlen(m) - 1] == '\n', "map ends with a partial line");
  snprintf(dp, sizeof(dp), "%s", dump_path(g_dir, r.pid));
  CHECK(validate(dp) == 0, "bad dump");
  load_dump(&jd, dp);
  CHECK(jd.nload == (size_t)fail_at + 2, "dump has %zu loads, want %d", jd.nload, fail_at + 2);
  jd_free(&jd);
  CHECK(umount2("/tmp", MNT_DETACH) == 0, "umount tiny /tmp: %s", strerror(errno));
  snprintf(g_dir, sizeof(g_dir), "%s", saved);
  close(dfd);
}

static void t_enospc_all(void)
{
  t_enospc();
  t_enospc_map();
}

/* -- fork ------------------------------------------------------------------ */

static void prog_fork(void *arg)
{
  (void)arg;
  int fresh = -1, st;
  pid_t me = getpid();
  char pdump[PATH_MAX], pmap[PATH_MAX];
  snprintf(pdump, sizeof(pdump), "%s", dump_path(g_dir, me));
  snprintf(pmap, sizeof(pmap), "%s", map_path(me));
  CCHECK(ljp_emit_open(BOTH, g_dir) == BOTH, 3);
  fake_load(0x1000, 64, "p_one", 1, 3);
  fake_load(0x2000, 64, "p_two", 2, 3);
  pid_t c2 = fork();  /* child that only closes: must not write to our files
			 (nor create its own, unless we are root) */
  if (c2 == 0) { ljp_emit_close(); _exit(0); }
  waitpid(c2, &st, 0);
  CCHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, 4);
  pid_t c = fork();
  if (c == 0) {  /* child that describes its code again */
    unsigned m = ljp_emit_begin(&fresh);
    if (m != BOTH || fresh != 1) _exit(10);
    if (self_maps_has(pdump, NULL) || self_fd_has(pdump) || self_fd_has(pmap)) _exit(11);
    if (!self_maps_has(dump_path(g_dir, getpid()), "r-xp")) _exit(12);
    fake_load(0x3000, 64, "c_one", 3, 3);
    if (ljp_emit_begin(&fresh) != BOTH || fresh != 0) _exit(13);
    ljp_emit_close();
    _exit(0);
  }
  waitpid(c, &st, 0);
  CCHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, 5);
  pid_t c3 = fork();
  if (c3 == 0) {  /* child whose first call is a load */
    fake_load(0x4000, 64, "c3_one", 4, 3);
    if (ljp_emit_begin(&fresh) != BOTH || fresh != 1) _exit(14);
    ljp_emit_close();
    _exit(0);
  }
  waitpid(c3, &st, 0);
  CCHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, 6);
  fake_load(0x5000, 64, "p_three", 5, 3);
  CCHECK(ljp_emit_begin(&fresh) == BOTH && fresh == 0, 7);
  ljp_emit_close();
  printf("%d %d %d\n", (int)c2, (int)c, (int)c3);
}

static void expect_dump_names(const char *path, pid_t pid, const char *const *names, size_t n)
{
  JD jd;
  CHECK(validate(path) == 0, "bad dump %s", path);
  load_dump(&jd, path);
  CHECK(jd.pid == (uint32_t)pid, "%s header pid %u, want %d", path, jd.pid, (int)pid);
  CHECK(jd.nload == n, "%s: %zu loads, want %zu", path, jd.nload, n);
  for (size_t i = 0; i < n; i++) {
    const JDRec *l = jd_load_n(&jd, i);
    CHECK(!strcmp(l->name, names[i]) && l->index == i && l->pid == (uint32_t)pid,
	  "%s load %zu: %s index %llu pid %u", path, i, l->name, (unsigned long long)l->index, l->pid);
  }
  CHECK(jd.nclose == 1 && jd.rec[jd.nrec - 1].id == 3, "%s: want one CODE_CLOSE, last", path);
  jd_free(&jd);
}

static void expect_map_names(pid_t pid, const char *const *names, size_t n)
{
  char buf[8192];
  read_file(map_path(pid), buf, sizeof(buf));
  CHECK(count_lines(buf) == (int)n, "map of %d has %d lines, want %zu:\n%s", (int)pid, count_lines(buf), n, buf);
  for (size_t i = 0; i < n; i++) CHECK(strstr(buf, fmt(" %s\n", names[i])), "map of %d lacks %s", (int)pid, names[i]);
}

static void t_fork(void)
{
  Run r;
  int c2, c, c3;
  run(&r, prog_fork, NULL);
  expect_exit0(&r);
  CHECK(sscanf(r.out, "%d %d %d", &c2, &c, &c3) == 3, "output: %s", r.out);
  for (int i = 0; i < 3; i++) { int p = i == 0 ? c2 : i == 1 ? c : c3; track(map_path(p)); }
  CHECK(r.err[0] == 0, "unexpected stderr: %s", r.err);
  static const char *const pn[] = { "p_one", "p_two", "p_three" }, *const cn[] = { "c_one" },
			    *const c3n[] = { "c3_one" };
  expect_dump_names(dump_path(g_dir, r.pid), r.pid, pn, 3);
  expect_map_names(r.pid, pn, 3);
  expect_dump_names(dump_path(g_dir, c), c, cn, 1);
  expect_map_names(c, cn, 1);
  expect_dump_names(dump_path(g_dir, c3), c3, c3n, 1);
  expect_map_names(c3, c3n, 1);
  if (geteuid() == 0) {  /* a child of root gets its files at fork: empty */
    expect_dump_names(dump_path(g_dir, c2), c2, NULL, 0);
    expect_map_names(c2, NULL, 0);
  } else {
    CHECK(!file_exists(map_path(c2)) && !file_exists(dump_path(g_dir, c2)), "close-only child created files");
  }
}

/* -- threads ---------------------------------------------------------------- */

#define NTHREADS 4
#define PER_THREAD 2500

static void *thread_loads(void *arg)
{
  int t = (int)(intptr_t)arg;
  char name[32];  /* not fmt(): its buffers are shared between threads */
  for (int i = 0; i < PER_THREAD; i++) {
    snprintf(name, sizeof(name), "t%d_%d", t, i);
    fake_load(0x10000000ull * (uint64_t)(t + 1) + (uint64_t)i * 64, 48, name,
	      (uint32_t)(t * PER_THREAD + i), 4);
  }
  return NULL;
}

static void prog_threads(void *arg)
{
  (void)arg;
  pthread_t th[NTHREADS];
  CCHECK(ljp_emit_open(BOTH, g_dir) == BOTH, 3);
  for (int t = 0; t < NTHREADS; t++) pthread_create(&th[t], NULL, thread_loads, (void *)(intptr_t)t);
  for (int t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
  ljp_emit_close();
}

static void t_threads(void)
{
  Run r;
  JD jd;
  static char m[4 << 20];
  static int next[NTHREADS];
  run(&r, prog_threads, NULL);
  expect_exit0(&r);
  CHECK(r.err[0] == 0, "unexpected stderr: %s", r.err);
  const char *dp = dump_path(g_dir, r.pid);
  CHECK(validate(dp) == 0, "bad dump");
  load_dump(&jd, dp);
  CHECK(jd.nload == NTHREADS * PER_THREAD, "%zu loads, want %d", jd.nload, NTHREADS * PER_THREAD);
  int tids = 0;
  uint32_t seen_tid[NTHREADS] = { 0 };
  for (size_t i = 0; i < jd.nload; i++) {
    const JDRec *l = jd_load_n(&jd, i);
    int t, k;
    CHECK(l->index == i, "code_index %llu at position %zu", (unsigned long long)l->index, i);
    CHECK(sscanf(l->name, "t%d_%d", &t, &k) == 2 && t >= 0 && t < NTHREADS, "name %s", l->name);
    CHECK(k == next[t], "thread %d: load %d after %d (lost or reordered)", t, k, next[t] - 1);
    next[t]++;
    if (!seen_tid[t]) { seen_tid[t] = l->tid; tids++; }
    CHECK(seen_tid[t] == l->tid, "thread %d loads carry two tids", t);
    const JDRec *d = jd_debug_of(&jd, l);
    CHECK(d && d->nent == 5, "load %s: DEBUG_INFO missing or not 4+1 entries", l->name);
  }
  CHECK(tids == NTHREADS, "saw %d threads", tids);
  jd_free(&jd);
  read_file(map_path(r.pid), m, sizeof(m));
  CHECK(count_lines(m) == NTHREADS * PER_THREAD, "map has %d lines", count_lines(m));
}

/* -- fork while another thread emits (the lock must not be inherited held) - */

static int stop_spin;  /* __atomic accesses */

static void *spinner(void *arg)
{
  (void)arg;
  char name[32];
  for (uint32_t i = 0; !__atomic_load_n(&stop_spin, __ATOMIC_RELAXED); i++) {
    snprintf(name, sizeof(name), "spin_%u", i);
    fake_load(0x30000000 + (uint64_t)i * 64, 48, name, i, 3);
  }
  return NULL;
}

static void prog_fork_threads(void *arg)
{
  (void)arg;
  pthread_t th;
  int st, fresh;
  CCHECK(ljp_emit_open(BOTH, g_dir) == BOTH, 3);
  pthread_create(&th, NULL, spinner, NULL);
  for (int k = 0; k < 30; k++) {
    pid_t c = fork();
    if (c == 0) {
      alarm(10);  /* a deadlock ends as SIGALRM */
      if (ljp_emit_begin(&fresh) != BOTH || fresh != 1) _exit(20);
      fake_load(0x1000, 48, "forked", 1, 2);
      ljp_emit_close();
      _exit(0);
    }
    CCHECK(c > 0 && waitpid(c, &st, 0) == c, 4);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
      fprintf(stderr, "child %d: status 0x%x\n", (int)c, st);
      _exit(5);
    }
    printf("%d\n", (int)c);
  }
  __atomic_store_n(&stop_spin, 1, __ATOMIC_RELAXED);
  pthread_join(th, NULL);
  ljp_emit_close();
}

static void t_fork_threads(void)
{
  Run r;
  JD jd;
  run(&r, prog_fork_threads, NULL);
  for (char *l = strtok(r.out, "\n"); l; l = strtok(NULL, "\n")) track(map_path(atoi(l)));
  expect_exit0(&r);
  CHECK(r.err[0] == 0, "unexpected stderr: %s", r.err);
  const char *dp = dump_path(g_dir, r.pid);
  CHECK(validate(dp) == 0, "bad dump");
  load_dump(&jd, dp);
  CHECK(jd.nload > 0 && jd.nclose == 1, "parent dump: %zu loads, %zu closes", jd.nload, jd.nclose);
  for (size_t i = 0; i < jd.nload; i++) CHECK(!strncmp(jd_load_n(&jd, i)->name, "spin_", 5), "foreign record in parent dump");
  jd_free(&jd);
}

/* -- reopen in the same process, and the salt for identical bytes --------- */

static void prog_reopen(void *arg)
{
  (void)arg;
  CCHECK(ljp_emit_open(BOTH, g_dir) == BOTH, 3);
  fake_load(0x1000, 64, "r_one", 1, 3);
  ljp_emit_close();
  CCHECK(ljp_emit_open(LJP_MAP, g_dir) == LJP_MAP, 4);
  CCHECK(ljp_emit_open(LJP_JITDUMP, g_dir) == BOTH, 5);  /* adds the missing one */
  fake_load(0x2000, 64, "r_two", 2, 3);
  fake_load(0x1000, 64, "r_one", 1, 3);  /* map: already there */
  ljp_emit_close();
}

static void t_reopen(void)
{
  Run r;
  JD jd;
  run(&r, prog_reopen, NULL);
  expect_exit0(&r);
  CHECK(r.err[0] == 0, "unexpected stderr: %s", r.err);
  static const char *const mn[] = { "r_one", "r_two" };
  expect_map_names(r.pid, mn, 2);
  const char *dp = dump_path(g_dir, r.pid);
  CHECK(validate(dp) == 0, "bad dump");
  load_dump(&jd, dp);
  CHECK(jd.nload == 3 && jd.nclose == 2, "%zu loads %zu closes, want 3 and 2", jd.nload, jd.nclose);
  CHECK(jd_load_n(&jd, 2)->index == 2 && !strcmp(jd_load_n(&jd, 1)->name, "r_two"), "appended loads");
  jd_free(&jd);
}

static void prog_salt(void *arg)
{
  (void)arg;
  static const uint8_t x[32] = "0123456789abcdefghijklmnopqrstu", s[3] = { 1, 2, 3 };
  CCHECK(ljp_emit_open(LJP_JITDUMP, g_dir) == LJP_JITDUMP, 3);
  ljp_emit_load(0x1000, 32, "s_one", x, NULL, 0);
  ljp_emit_load(0x1000, 32, "s_two", x, NULL, 0);	/* same place, other name */
  ljp_emit_load(0x1000, 32, "s_one", x, NULL, 0);	/* described again */
  ljp_emit_load(0x9000, 32, "s_three", x, NULL, 0);	/* elsewhere */
  ljp_emit_load(0x5000, 3, "s_small", s, NULL, 0);
  ljp_emit_load(0x5000, 3, "s_small2", s, NULL, 0);
  ljp_emit_close();
}

static void t_salt(void)
{
  Run r;
  JD jd;
  static const uint8_t x[32] = "0123456789abcdefghijklmnopqrstu";
  run(&r, prog_salt, NULL);
  expect_exit0(&r);
  const char *dp = dump_path(g_dir, r.pid);
  CHECK(validate(dp) == 0, "identical bytes left in the dump");
  load_dump(&jd, dp);
  CHECK(jd.nload == 6, "%zu loads", jd.nload);
  CHECK(!memcmp(jd_load_n(&jd, 0)->code, x, 32), "first load must keep its bytes");
  for (size_t i = 1; i < 4; i++) {
    const JDRec *l = jd_load_n(&jd, i);
    CHECK(!memcmp(l->code, x, 28) && memcmp(l->code + 28, x + 28, 4), "load %zu: salt outside the last 4 bytes", i);
    for (size_t j = 0; j < i; j++) CHECK(memcmp(l->code, jd_load_n(&jd, j)->code, 32), "loads %zu and %zu equal", i, j);
  }
  CHECK(memcmp(jd_load_n(&jd, 4)->code, jd_load_n(&jd, 5)->code, 3), "small loads equal");
  jd_free(&jd);
}

/* -- allocation failure: disable, never crash ------------------------------ */

/* Linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc. */
static volatile int fail_alloc;
void *__real_malloc(size_t), *__real_calloc(size_t, size_t), *__real_realloc(void *, size_t);
void *__wrap_malloc(size_t n) { return fail_alloc ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t k) { return fail_alloc ? NULL : __real_calloc(n, k); }
void *__wrap_realloc(void *p, size_t n) { return fail_alloc ? NULL : __real_realloc(p, n); }

static void prog_nomem(void *arg)
{
  static char big[70000];  /* longer than the map's 64 KiB blocks */
  (void)arg;
  memset(big, 'n', sizeof(big) - 1);
  CCHECK(ljp_emit_open(BOTH, g_dir) == BOTH, 3);
  for (int i = 0; i < 3; i++) fake_load(0x1000 + i * 0x100, 64, fmt("mem_%d", i), i, 3);
  fail_alloc = 1;
  fake_load(0x9000, 64, big, 9, 200);  /* new map entry, bigger record */
  unsigned m = ljp_emit_begin(NULL);
  fake_load(0xa000, 64, "ignored", 10, 3);
  fail_alloc = 0;
  CCHECK(m == 0 && ljp_emit_begin(NULL) == 0, 4);
  printf("alive\n");
  ljp_emit_close();
}

static void t_nomem(void)
{
  Run r;
  JD jd;
  char buf[4096];
  run(&r, prog_nomem, NULL);
  expect_exit0(&r);
  CHECK(strstr(r.out, "alive"), "program did not keep running");
  CHECK(count_lines(r.err) == 2 && strstr(r.err, "perf map disabled") && strstr(r.err, "jitdump disabled")
	&& strstr(r.err, strerror(ENOMEM)), "stderr:\n%s", r.err);
  read_file(map_path(r.pid), buf, sizeof(buf));
  CHECK(count_lines(buf) == 3, "map has %d lines", count_lines(buf));
  const char *dp = dump_path(g_dir, r.pid);
  CHECK(validate(dp) == 0, "bad dump");
  load_dump(&jd, dp);
  CHECK(jd.nload == 3, "%zu loads", jd.nload);
  jd_free(&jd);
}

/* -- a load too large for a jitdump record: left out, told once, counted -- */

static void prog_toobig(void *arg)
{
  (void)arg;
  static const uint8_t b[16] = "never read";
  CCHECK(ljp_emit_open(BOTH, g_dir) == BOTH, 3);
  fake_load(0x1000, 64, "before", 1, 2);
  ljp_emit_load(0x100000, 1ull << 32, "huge", b, NULL, 0);	/* bytes never read */
  ljp_emit_load(0x200000, (1ull << 32) - 56 - 6, "huge2", b, NULL, 0);  /* 1 too many */
  fake_load(0x2000, 64, "after", 2, 2);
  CCHECK(ljp_emit_begin(NULL) == BOTH, 4);	/* a drop disables nothing */
  ljp_emit_close();
}

static void t_toobig(void)
{
  Run r;
  JD jd;
  char buf[4096];
  run(&r, prog_toobig, NULL);
  expect_exit0(&r);
  const char *nl = strchr(r.err, '\n');
  CHECK(count_lines(r.err) == 2 && !strncmp(r.err, "ljperf: ", 8) && nl && !strncmp(nl + 1, "ljperf: ", 8),
	"want two ljperf lines on stderr, got:\n%s", r.err);
  CHECK(strstr(r.err, "too large") && strstr(r.err, "reported once") < nl,
	"first line must tell the drop: %s", r.err);
  CHECK(strstr(nl, "too large") && strstr(nl, ": 2 times\n"), "second line must count 2 drops: %s", nl + 1);
  read_file(map_path(r.pid), buf, sizeof(buf));
  CHECK(!strcmp(buf, "1000 40 before\n100000 100000000 huge\n200000 ffffffc2 huge2\n2000 40 after\n"),
	"the map takes any size:\n%s", buf);
  const char *dp = dump_path(g_dir, r.pid);
  CHECK(validate(dp) == 0, "bad dump");
  load_dump(&jd, dp);
  CHECK(jd.nload == 2 && !strcmp(jd_load_n(&jd, 0)->name, "before") && !strcmp(jd_load_n(&jd, 1)->name, "after")
	&& jd_load_n(&jd, 1)->index == 1, "dump: %zu loads", jd.nload);
  jd_free(&jd);
}

/* -- the record structs are perf's wire layout ----------------------------- */

#define EXPECT_AT(type, field, at) \
  CHECK(offsetof(type, field) == (at), #type "." #field " at %zu, perf reads it at %d", \
	offsetof(type, field), (at))

static void t_layout(void)
{
  EXPECT_AT(LJPJdHeader, magic, 0); EXPECT_AT(LJPJdHeader, version, 4);
  EXPECT_AT(LJPJdHeader, total_size, 8); EXPECT_AT(LJPJdHeader, elf_mach, 12);
  EXPECT_AT(LJPJdHeader, pad1, 16); EXPECT_AT(LJPJdHeader, pid, 20);
  EXPECT_AT(LJPJdHeader, timestamp, 24); EXPECT_AT(LJPJdHeader, flags, 32);
  EXPECT_AT(LJPJdPrefix, id, 0); EXPECT_AT(LJPJdPrefix, total_size, 4);
  EXPECT_AT(LJPJdPrefix, timestamp, 8);
  EXPECT_AT(LJPJdLoad, pid, 16); EXPECT_AT(LJPJdLoad, tid, 20); EXPECT_AT(LJPJdLoad, vma, 24);
  EXPECT_AT(LJPJdLoad, code_addr, 32); EXPECT_AT(LJPJdLoad, code_size, 40);
  EXPECT_AT(LJPJdLoad, code_index, 48);
  EXPECT_AT(LJPJdDebug, code_addr, 16); EXPECT_AT(LJPJdDebug, nr_entry, 24);
  EXPECT_AT(LJPJdEntry, addr, 0); EXPECT_AT(LJPJdEntry, lineno, 8); EXPECT_AT(LJPJdEntry, discrim, 12);
  CHECK(sizeof(LJPJdHeader) == 40 && sizeof(LJPJdPrefix) == 16 && sizeof(LJPJdLoad) == 56 &&
	sizeof(LJPJdDebug) == 32 && sizeof(LJPJdEntry) == 16, "record sizes");
  CHECK(LJP_JD_MAGIC == 0x4A695444u && LJP_JD_VERSION == 1 && LJP_JD_CODE_LOAD == 0 &&
	LJP_JD_CODE_DEBUG_INFO == 2 && LJP_JD_CODE_CLOSE == 3, "magic, version or record ids");
}

/* -------------------------------------------------------------------------- */

static const struct { const char *name; void (*fn)(void); int root; } tests[] = {
  { "map", t_map, 0 },
  { "jitdump", t_jitdump, 0 },
  { "dirs", t_dirs, 0 },
  { "symlink", t_symlink, 0 },
  { "foreign", t_foreign, 1 },
  { "stale", t_stale, 0 },
  { "eacces", t_eacces, 0 },
  { "erofs", t_erofs_all, 1 },
  { "enospc", t_enospc_all, 1 },
  { "fork", t_fork, 0 },
  { "threads", t_threads, 0 },
  { "fork_threads", t_fork_threads, 0 },
  { "reopen", t_reopen, 0 },
  { "salt", t_salt, 0 },
  { "nomem", t_nomem, 0 },
  { "toobig", t_toobig, 0 },
  { "layout", t_layout, 0 },
};

int main(int argc, char **argv)
{
  for (size_t i = 0; argc == 2 && i < sizeof(tests) / sizeof(tests[0]); i++)
    if (!strcmp(argv[1], tests[i].name)) {
      setup(tests[i].root);
      tests[i].fn();
      printf("ok %s\n", tests[i].name);
      return 0;
    }
  fprintf(stderr, "usage: %s TEST   (", argv[0]);
  for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) fprintf(stderr, " %s", tests[i].name);
  fprintf(stderr, " )\n");
  return 2;
}
