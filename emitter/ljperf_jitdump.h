/*
** ljperf emitter: the jitdump records it writes, as perf reads them (perf's
** tools/perf/util/jitdump.h, format version 1). Fields in wire order, host
** byte order, no padding: the sizes are asserted below. Variable parts
** (names, entries, code bytes) follow each fixed part.
*/
#ifndef LJPERF_JITDUMP_H
#define LJPERF_JITDUMP_H

#include <stdint.h>

#define LJP_JD_MAGIC		0x4A695444u	/* "JiTD" in host order */
#define LJP_JD_VERSION		1u

/* Record ids (LJPJdPrefix.id). ljperf writes no MOVE or UNWINDING_INFO. */
#define LJP_JD_CODE_LOAD	0u
#define LJP_JD_CODE_DEBUG_INFO	2u
#define LJP_JD_CODE_CLOSE	3u

/* The file header. flags 0: timestamps are CLOCK_MONOTONIC, not TSC. */
typedef struct LJPJdHeader {
  uint32_t magic, version;
  uint32_t total_size;		/* of this header */
  uint32_t elf_mach;
  uint32_t pad1;
  uint32_t pid;
  uint64_t timestamp;
  uint64_t flags;
} LJPJdHeader;

/* Starts every record; total_size covers the whole record. A CODE_CLOSE
** is this alone. */
typedef struct LJPJdPrefix {
  uint32_t id, total_size;
  uint64_t timestamp;
} LJPJdPrefix;

/* CODE_LOAD; then the NUL-terminated name and code_size code bytes. */
typedef struct LJPJdLoad {
  LJPJdPrefix p;
  uint32_t pid, tid;
  uint64_t vma, code_addr, code_size, code_index;
} LJPJdLoad;

/* DEBUG_INFO (before the CODE_LOAD of code_addr); then nr_entry entries. */
typedef struct LJPJdDebug {
  LJPJdPrefix p;
  uint64_t code_addr, nr_entry;
} LJPJdDebug;

/* One DEBUG_INFO entry; then the NUL-terminated file name. */
typedef struct LJPJdEntry {
  uint64_t addr;
  int32_t lineno, discrim;
} LJPJdEntry;

_Static_assert(sizeof(LJPJdHeader) == 40, "jitdump header is 40 bytes");
_Static_assert(sizeof(LJPJdPrefix) == 16, "jitdump record prefix is 16 bytes");
_Static_assert(sizeof(LJPJdLoad) == 56, "CODE_LOAD fixed part is 56 bytes");
_Static_assert(sizeof(LJPJdDebug) == 32, "DEBUG_INFO fixed part is 32 bytes");
_Static_assert(sizeof(LJPJdEntry) == 16, "DEBUG_INFO entry is 16 bytes");

#endif
