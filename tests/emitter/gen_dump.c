/*
** Writes a jitdump with known content for the Python tests (jitdump-only, no
** perf map). Prints the dump's path.
**   gen_dump DIR [crash]     crash: die by SIGKILL instead of ljp_emit_close()
** Content: gen_0..gen_4 at 0x400000 + i*0x100, 64 bytes each, byte k = i*3+k;
** all but gen_2 have lines at +0,+16,+32,+48 (line 10*i+1+j, file gen_I.lua)
** plus the closing entry; then gen_again: gen_0's bytes and address again.
*/
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ljperf_emit.h"

int main(int argc, char **argv)
{
  if (argc < 2) { fprintf(stderr, "usage: %s DIR [crash]\n", argv[0]); return 2; }
  if (ljp_emit_open(LJP_JITDUMP, argv[1]) != LJP_JITDUMP) return 1;
  uint8_t code[5][64];
  char name[16], file[5][16];
  for (int i = 0; i < 5; i++) {
    uint64_t a = 0x400000 + (uint64_t)i * 0x100;
    LJPLine l[4];
    for (int k = 0; k < 64; k++) code[i][k] = (uint8_t)(i * 3 + k);
    snprintf(file[i], sizeof(file[i]), "gen_%d.lua", i);
    for (int j = 0; j < 4; j++) {
      l[j].addr = a + 16 * (uint64_t)j; l[j].line = (uint32_t)(10 * i + 1 + j); l[j].file = file[i];
    }
    snprintf(name, sizeof(name), "gen_%d", i);
    ljp_emit_load(a, 64, name, code[i], i == 2 ? NULL : l, i == 2 ? 0 : 4);
  }
  ljp_emit_load(0x400000, 64, "gen_again", code[0], NULL, 0);
  printf("%s/jit-%d.dump\n", argv[1], (int)getpid());
  fflush(stdout);
  if (argc > 2 && !strcmp(argv[2], "crash")) raise(SIGKILL);
  ljp_emit_close();
  return 0;
}
