/*
** fakevm: a stand-in for the ljperf-patched LuaJIT, used only to capture
** perf fixtures for lj_merge before the real VM exists. It shows perf
** exactly what the VM contract promises:
**   - Lua frames as 16-byte heap records {next, ret} linked into rbp; RET is
**     an address inside a "prototype's bytecode" (a heap buffer) described
**     by a jitdump CODE_LOAD named NAME@CHUNK:LINE / CHUNK:LINE with a
**     DEBUG_INFO line table (4 bytes per instruction);
**   - interpreter samples: ip in lj_BC_FORL (no frame of its own, rbp = the
**     running function's record, rbx = bytecode PC);
**   - a JIT trace: machine code in anonymous RWX memory, named
**     TRACE_1::fake.lua:12::inner@fake.lua:10 in jit-PID.dump and perf-PID.map;
**   - builtins (lj_ff_string_byte) and a plain C function called from Lua;
**   - VM plumbing (lj_vm_pcall, lj_vm_fakecall) between host and Lua frames;
**   - address reuse: a later CODE_LOAD at the inner prototype's address
**     names it other@fake.lua:20; trace 2 reuses trace 1's machine code;
**   - a forked child with its own jit-PID.dump (same addresses, other
**     names) and a thread that runs Lua code.
** Phases run in a fixed order, ~SECS seconds each (argv[1], default 0.3).
** Build: cc -O1 -g -fno-omit-frame-pointer -pthread -o fakevm fakevm.c
** Usage: fakevm [SECS [DUMPDIR]]
*/
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct Rec { struct Rec *next; uint64_t ret; } Rec;

/* Plumbing and the interpreter handler, in assembly so that the handler has
** no frame of its own (like the real interpreter). */
__asm__(
  ".text\n"
  ".globl lj_vm_fakecall\n"          /* (fn, arg, rec, pc): fn(arg) with rbp=rec, rbx=pc */
  ".type lj_vm_fakecall,@function\n"
  "lj_vm_fakecall:\n"
  "  push %rbp\n"
  "  push %rbx\n"
  "  sub $8, %rsp\n"
  "  mov %rdi, %rax\n"
  "  mov %rsi, %rdi\n"
  "  mov %rdx, %rbp\n"
  "  mov %rcx, %rbx\n"
  "  call *%rax\n"
  "  add $8, %rsp\n"
  "  pop %rbx\n"
  "  pop %rbp\n"
  "  ret\n"
  ".size lj_vm_fakecall, .-lj_vm_fakecall\n"
  ".globl lj_BC_FORL\n"              /* spin(n) */
  ".type lj_BC_FORL,@function\n"
  "lj_BC_FORL:\n"
  "1: dec %rdi\n"
  "  jnz 1b\n"
  "  ret\n"
  ".size lj_BC_FORL, .-lj_BC_FORL\n"
);
void lj_vm_fakecall(void *fn, uint64_t arg, Rec *rec, uint64_t pc);
void lj_BC_FORL(uint64_t n);

static double now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static uint64_t now_ns(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + t.tv_nsec;
}

static volatile uint64_t sink;

/* A builtin and a C function called from Lua. */
__attribute__((noinline)) void lj_ff_string_byte(uint64_t n)
{
  for (uint64_t i = 0; i < n; i++) sink += i;
}
__attribute__((noinline)) void my_c_func(uint64_t n)
{
  for (uint64_t i = 0; i < n; i++) sink ^= i;
}

/* ---- jitdump + perf map writers ---------------------------------------- */
static int dumpfd = -1;
static FILE *mapf;
static uint64_t code_index;
static pthread_mutex_t lk = PTHREAD_MUTEX_INITIALIZER;

static void dump_open(const char *dir)
{
  char path[512];
  snprintf(path, sizeof path, "%s/jit-%d.dump", dir, (int)getpid());
  dumpfd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
  if (dumpfd < 0) { perror(path); exit(1); }
  struct { uint32_t magic, version, total_size, elf_mach, pad1, pid;
	   uint64_t timestamp, flags; } h = {
    0x4A695444, 1, 40, 62, 0, (uint32_t)getpid(), now_ns(), 0 };
  if (write(dumpfd, &h, sizeof h) != sizeof h) exit(1);
  /* The marker mmap perf looks for. */
  void *m = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, dumpfd, 0);
  if (m == MAP_FAILED) { perror("mmap"); exit(1); }
  snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
  mapf = fopen(path, "w");
  code_index = 0;
}

typedef struct Line { uint64_t addr; uint32_t line; } Line;

static void emit_load(uint64_t addr, uint64_t size, const char *name,
		      const Line *ln, int nln, const char *file, int tomap)
{
  char buf[65536];
  size_t o = 0, fl = strlen(file) + 1, nl = strlen(name) + 1;
  pthread_mutex_lock(&lk);
  uint64_t ts = now_ns();
  if (nln) {          /* DEBUG_INFO before its CODE_LOAD, + closing entry */
    struct { uint32_t id, size; uint64_t ts, code_addr, nr; } d = {
      2, 0, ts, addr, (uint64_t)nln + 1 };
    o = sizeof d;
    for (int i = 0; i <= nln; i++) {
      struct { uint64_t a; uint32_t l, disc; } e = {
	i < nln ? ln[i].addr : addr + size, i < nln ? ln[i].line : ln[nln-1].line, 0 };
      memcpy(buf + o, &e, sizeof e); o += sizeof e;
      memcpy(buf + o, file, fl); o += fl;
    }
    d.size = (uint32_t)o;
    memcpy(buf, &d, sizeof d);
    if (write(dumpfd, buf, o) != (ssize_t)o) exit(1);
  }
  struct { uint32_t id, size; uint64_t ts; uint32_t pid, tid;
	   uint64_t vma, code_addr, code_size, code_index; } c = {
    0, 0, ts, (uint32_t)getpid(), (uint32_t)syscall(SYS_gettid),
    addr, addr, size, code_index++ };
  o = sizeof c;
  memcpy(buf + o, name, nl); o += nl;
  memcpy(buf + o, (void *)addr, size); o += size;
  c.size = (uint32_t)o;
  memcpy(buf, &c, sizeof c);
  if (write(dumpfd, buf, o) != (ssize_t)o) exit(1);
  if (tomap && mapf) {
    fprintf(mapf, "%lx %lx %s\n", (unsigned long)addr, (unsigned long)size, name);
    fflush(mapf);
  }
  pthread_mutex_unlock(&lk);
}

/* A prototype: NI 4-byte instructions, instruction k at line LINE0 + k.
** The line table is "shifted" like the VM's: address bc+4k (a PC, i.e. the
** instruction after the one executing, or a return address) maps to the
** line of instruction k-1; bc+0 maps to LINE0. */
typedef struct Proto { uint8_t *bc; int ni; } Proto;

static Proto proto_new(int ni, const char *name, uint32_t line0, uint32_t salt)
{
  Proto p = { malloc(ni * 4), ni };
  for (int i = 0; i < ni * 4; i++) p.bc[i] = (uint8_t)(salt * 31 + i * 7 + getpid());
  Line ln[64];
  for (int k = 0; k < ni; k++) { ln[k].addr = (uint64_t)(p.bc + 4 * k); ln[k].line = line0 + (k ? k - 1 : 0); }
  emit_load((uint64_t)p.bc, ni * 4, name, ln, ni, "fake.lua", 0);
  return p;
}

static void proto_reload(Proto *p, const char *name, uint32_t line0, uint32_t salt)
{
  for (int i = 0; i < p->ni * 4; i++) p->bc[i] = (uint8_t)(salt * 17 + i * 3);
  Line ln[64];
  for (int k = 0; k < p->ni; k++) { ln[k].addr = (uint64_t)(p->bc + 4 * k); ln[k].line = line0 + (k ? k - 1 : 0); }
  emit_load((uint64_t)p->bc, p->ni * 4, name, ln, p->ni, "fake.lua", 0);
}

/* PC of instruction K (the VM's PC register: the next instruction). */
#define PC(p, k) ((uint64_t)((p).bc + 4 * (k)))

static uint8_t *trace_mcode;
static double secs = 0.3;

/* Spin for SECS in FN with rbp = REC, rbx = PC. */
static void run(void *fn, Rec *rec, uint64_t pc)
{
  double e = now() + secs;
  while (now() < e) lj_vm_fakecall(fn, 200000, rec, pc);
}

static Proto P_outer, P_inner, P_thr;

/* Lua stack: outer@fake.lua:1 called inner@fake.lua:10 from its line 3. */
__attribute__((noinline)) void lj_vm_pcall(int phase)
{
  Rec entry = { __builtin_frame_address(0), (uint64_t)&lj_vm_pcall + 8 };
  Rec outer = { &entry, PC(P_outer, 3) };      /* return PC after the CALL: line 3 */
  Rec inner = { &outer, PC(P_inner, 1) };      /* innermost: its entry PC, line 10 */
  switch (phase) {
  case 0:   /* interpreter, inner running instruction 5: BX = PC 6, line 15 */
    run((void *)lj_BC_FORL, &inner, PC(P_inner, 6));
    break;
  case 1:   /* trace entered in inner */
    run(trace_mcode, &inner, 0);
    break;
  case 2:   /* builtin called from outer (line 3) */
    run((void *)lj_ff_string_byte, &outer, 0);
    break;
  case 3:   /* C function called from inner */
    run((void *)my_c_func, &inner, 0);
    break;
  case 4:   /* interpreter, BX outside inner (e.g. just before its header) */
    run((void *)lj_BC_FORL, &inner, PC(P_outer, 5));
    break;
  case 5:   /* trace 2 (same mcode address as trace 1) entered in outer */
    run(trace_mcode, &outer, 0);
    break;
  }
}

__attribute__((noinline)) int lua_pcall(int phase)
{
  lj_vm_pcall(phase);
  sink++;
  return 0;
}

static void *thread_main(void *arg)
{
  (void)arg;
  P_thr = proto_new(8, "thr@fake.lua:50", 50, 99);
  Rec entry = { __builtin_frame_address(0), (uint64_t)&lj_vm_pcall + 8 };
  Rec thr = { &entry, PC(P_thr, 1) };
  run((void *)lj_BC_FORL, &thr, PC(P_thr, 3));   /* BX line 52, record line 50 */
  return NULL;
}

int main(int argc, char **argv)
{
  if (argc > 1) secs = atof(argv[1]);
  const char *dir = argc > 2 ? argv[2] : "/tmp";
  dump_open(dir);
  P_outer = proto_new(8, "outer@fake.lua:1", 1, 1);
  P_inner = proto_new(8, "inner@fake.lua:10", 10, 2);
  /* trace: "dec rdi; jnz -5; ret" + salt */
  trace_mcode = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  static const uint8_t spin[] = { 0x48, 0xff, 0xcf, 0x75, 0xfb, 0xc3 };
  memcpy(trace_mcode, spin, sizeof spin);
  for (int i = sizeof spin; i < 64; i++) trace_mcode[i] = (uint8_t)(0x90 ^ i ^ getpid());
  Line tl[2] = { { (uint64_t)trace_mcode, 12 }, { (uint64_t)trace_mcode + 3, 13 } };
  emit_load((uint64_t)trace_mcode, 64, "TRACE_1::fake.lua:12::inner@fake.lua:10",
	    tl, 2, "fake.lua", 1);

  lua_pcall(0);                 /* A: interpreter */
  lua_pcall(1);                 /* B: trace */
  lua_pcall(2);                 /* C: builtin */
  lua_pcall(3);                 /* D: C function */
  lua_pcall(4);                 /* E: BX outside the running function */
  proto_reload(&P_inner, "other@fake.lua:20", 20, 3);
  lua_pcall(0);                 /* F: same address, new name */
  /* G: the trace is flushed and its mcode reused by trace 2 */
  for (int i = 6; i < 64; i++) trace_mcode[i] = (uint8_t)(0x5a ^ i ^ getpid());
  Line tl2[1] = { { (uint64_t)trace_mcode, 5 } };
  emit_load((uint64_t)trace_mcode, 64, "TRACE_2::fake.lua:5::outer@fake.lua:1",
	    tl2, 1, "fake.lua", 1);
  lua_pcall(5);

  pthread_t t;                  /* H: a thread (own tid) */
  pthread_create(&t, NULL, thread_main, NULL);
  pthread_join(t, NULL);

  fflush(mapf);
  pid_t pid = fork();           /* I: child, own dump, same addresses */
  if (pid == 0) {
    close(dumpfd);
    fclose(mapf);
    dump_open(dir);
    proto_reload(&P_outer, "child_outer@fake.lua:30", 30, 4);
    proto_reload(&P_inner, "fake.lua:40", 40, 5);    /* anonymous */
    lua_pcall(0);
    _exit(0);
  }
  waitpid(pid, NULL, 0);
  return 0;
}
