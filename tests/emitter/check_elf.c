/*
** Checks the jitted-PID-N.so files `perf inject --jit` made from a jitdump,
** with libelf and libdw:
**   check_elf JITDUMP SODIR
** For every CODE_LOAD: the .so exists, its .symtab has one STT_FUNC named
** like the load, at .text's address with size code_size, .text holds the
** load's bytes, and its DWARF line table maps every DEBUG_INFO range
** (start and last byte) to the entry's file and line.
*/
#define _GNU_SOURCE
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "jd_read.h"

static int failures;
#define EXPECT(cond, ...) do { if (!(cond)) { failures++; \
  fprintf(stderr, "FAIL %s: ", so); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* Line of ADDR in the CU; 0 if none. *file gets the source name. */
static int line_at(Dwarf_Die *cu, Dwarf_Addr addr, const char **file)
{
  Dwarf_Line *l = dwarf_getsrc_die(cu, addr);
  int line = 0;
  if (!l || dwarf_lineno(l, &line) != 0) return 0;
  *file = dwarf_linesrc(l, NULL, NULL);
  return line;
}

static void check_one(const char *so, const JD *jd, const JDRec *load)
{
  int fd = open(so, O_RDONLY);
  EXPECT(fd >= 0, "cannot open");
  if (fd < 0) return;
  Elf *e = elf_begin(fd, ELF_C_READ, NULL);
  size_t shstr;
  Elf_Scn *scn = NULL;
  GElf_Shdr text = { 0 };
  Elf_Data *tdata = NULL;
  int nsym = 0, found = 0;
  EXPECT(e && elf_kind(e) == ELF_K_ELF && elf_getshdrstrndx(e, &shstr) == 0, "not an ELF file");
  while (e && (scn = elf_nextscn(e, scn))) {
    GElf_Shdr sh;
    gelf_getshdr(scn, &sh);
    const char *sn = elf_strptr(e, shstr, sh.sh_name);
    if (sn && !strcmp(sn, ".text")) { text = sh; tdata = elf_getdata(scn, NULL); }
  }
  EXPECT(tdata && tdata->d_size == load->csize && !memcmp(tdata->d_buf, load->code, load->csize),
	 ".text does not hold the CODE_LOAD bytes");
  scn = NULL;
  while (e && (scn = elf_nextscn(e, scn))) {
    GElf_Shdr sh;
    gelf_getshdr(scn, &sh);
    if (sh.sh_type != SHT_SYMTAB) continue;
    Elf_Data *d = elf_getdata(scn, NULL);
    for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
      GElf_Sym s;
      gelf_getsym(d, (int)i, &s);
      if (GELF_ST_TYPE(s.st_info) != STT_FUNC) continue;
      nsym++;
      const char *n = elf_strptr(e, sh.sh_link, s.st_name);
      if (n && !strcmp(n, load->name) && s.st_value == text.sh_addr && s.st_size == load->csize) found = 1;
    }
  }
  EXPECT(nsym == 1 && found, "want one function symbol %s at .text (0x%llx) size %llu", load->name,
	 (unsigned long long)text.sh_addr, (unsigned long long)load->csize);
  const JDRec *dbg = jd_debug_of(jd, load);
  if (dbg) {
    Dwarf *dw = dwarf_begin_elf(e, DWARF_C_READ, NULL);
    Dwarf_Off off = 0, next;
    size_t hsize;
    Dwarf_Die cu;
    int have_cu = dw && dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0 &&
		  dwarf_offdie(dw, off + hsize, &cu) != NULL;
    EXPECT(have_cu, "no DWARF compile unit: %s", dwarf_errmsg(-1));
    for (size_t i = 0; have_cu && i + 1 < dbg->nent; i++) {
      uint64_t lo = dbg->ent[i].addr, hi = dbg->ent[i + 1].addr;
      if (hi <= lo) continue;  /* an empty range: a later entry owns the address */
      Dwarf_Addr at[2] = { text.sh_addr + (lo - load->addr), text.sh_addr + (hi - 1 - load->addr) };
      for (int k = 0; k < 2; k++) {
	const char *f = NULL;
	int line = line_at(&cu, at[k], &f);
	EXPECT(line == (int)dbg->ent[i].line && f && !strcmp(f, dbg->ent[i].file),
	       "0x%llx: %s:%d, want %s:%u", (unsigned long long)at[k], f ? f : "?", line,
	       dbg->ent[i].file, dbg->ent[i].line);
      }
    }
    if (dw) dwarf_end(dw);
  }
  if (e) elf_end(e);
  close(fd);
}

int main(int argc, char **argv)
{
  JD jd;
  const char *so = argv[argc > 1 ? 1 : 0];
  if (argc != 3) { fprintf(stderr, "usage: %s JITDUMP SODIR\n", argv[0]); return 2; }
  elf_version(EV_CURRENT);
  if (jd_load(&jd, argv[1]) != 0) { fprintf(stderr, "cannot read %s\n", argv[1]); return 1; }
  EXPECT(jd.nload > 0, "no CODE_LOAD in the dump");
  for (size_t i = 0; i < jd.nload; i++) {
    const JDRec *l = jd_load_n(&jd, i);
    char path[4096];
    snprintf(path, sizeof(path), "%s/jitted-%u-%llu.so", argv[2], l->pid, (unsigned long long)l->index);
    check_one(path, &jd, l);
  }
  printf("%s: %zu jitted DSOs checked, %d failures\n", argv[1], jd.nload, failures);
  jd_free(&jd);
  return failures ? 1 : 0;
}
