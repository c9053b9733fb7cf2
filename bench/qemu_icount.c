/* A qemu TCG plugin that counts the guest instructions a qemu-user run
** executes: bench/icount.py's counter for the arm64 VM (valgrind does not
** run aarch64 code here). Each translation block, when translated, gets an
** inline add of its instruction count to one counter; at exit the total is
** written to the file named by the plugin's argument out=PATH as
** "I refs: N", the line valgrind prints, so icount.py reads both alike.
**
** Invariants: one counter, not atomic: exact for a single-threaded guest
** (LuaJIT's benchmarks), a lower bound otherwise. A block left early (a
** fault, a signal) still counts whole: rare and the same in every run.
**
** Built by icount.py with the host compiler, against qemu's plugin API
** version 1 (qemu 5.2 up to 8.x); the few declarations it needs are below,
** so no qemu source is needed.
*/
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef uint64_t qp_id;
struct qemu_plugin_tb;
struct qemu_info_t;
enum { QP_INLINE_ADD_U64 = 0 };

void qemu_plugin_register_vcpu_tb_trans_cb(qp_id id,
    void (*cb)(qp_id id, struct qemu_plugin_tb *tb));
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb,
    int op, void *ptr, uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_atexit_cb(qp_id id,
    void (*cb)(qp_id id, void *userdata), void *userdata);

EXPORT int qemu_plugin_version = 1;

static uint64_t insns;
static const char *out;

static void on_translate(qp_id id, struct qemu_plugin_tb *tb)
{
  (void)id;
  qemu_plugin_register_vcpu_tb_exec_inline(tb, QP_INLINE_ADD_U64, &insns,
                                           qemu_plugin_tb_n_insns(tb));
}

static void write_count(qp_id id, void *userdata)
{
  FILE *f = fopen(out, "w");
  (void)id; (void)userdata;
  if (f) {
    fprintf(f, "I refs: %llu\n", (unsigned long long)insns);
    fclose(f);
  }
}

EXPORT int qemu_plugin_install(qp_id id, const struct qemu_info_t *info,
                               int argc, char **argv)
{
  (void)info;
  if (argc != 1 || strncmp(argv[0], "out=", 4) != 0) {
    fprintf(stderr, "qemu_icount: usage: -plugin qemu_icount.so,out=PATH\n");
    return 1;
  }
  out = argv[0] + 4;
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_atexit_cb(id, write_count, NULL);
  return 0;
}
