/* fuzz_trace.c: libFuzzer target for the trace reader (checkers/trace.c)
 * and the trace comparison behind `vqcheck compare` (trace_compare.c).
 *
 * Each input is used twice:
 *   1. as one line for vqc_trace_parse_line (NUL-terminated copy);
 *   2. as a directory of two traces: the bytes before the first 0xFF byte
 *      are rank-0.trace.jsonl, the rest rank-1.trace.jsonl (no 0xFF: rank 1
 *      gets an empty file), compared with vqc_trace_set_compare while the
 *      valid lines are copied to a second directory.
 * Besides what the sanitizers catch (ASan, UBSan, leaks), one property is
 * checked: what the reader accepted, the writer re-writes, and the copy
 * reads back without error and gives the same number of findings and lines
 * (a writer whose output its own reader rejects would abort here).
 *
 * Built by tests/fuzz/run.sh with clang -fsanitize=fuzzer; gcc cannot. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace.h"
#include "trace_compare.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char in_dir[64], copy_dir[64];

/* Removes the two directories and the rank files in them at exit. */
static void cleanup(void) {
  const char *dirs[2] = {in_dir, copy_dir};
  for (int d = 0; d < 2; d++) {
    for (int r = 0; r < 2; r++) {
      char path[256];
      snprintf(path, sizeof path, "%s/rank-%d.trace.jsonl", dirs[d], r);
      unlink(path);
    }
    rmdir(dirs[d]);
  }
}

/* Files in memory (/dev/shm) where there is one: the target writes files
 * on every run, and a disk makes that the bottleneck. */
static const char *tmp_root(void) {
  return access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *tmp = tmp_root();
  snprintf(in_dir, sizeof in_dir, "%s/vqc-fuzz-trace-in-XXXXXX", tmp);
  snprintf(copy_dir, sizeof copy_dir, "%s/vqc-fuzz-trace-copy-XXXXXX", tmp);
  if (!mkdtemp(in_dir) || !mkdtemp(copy_dir)) abort();
  atexit(cleanup);
  return 0;
}

static void write_file(const char *dir, int rank, const uint8_t *p, size_t n) {
  char path[256];
  snprintf(path, sizeof path, "%s/rank-%d.trace.jsonl", dir, rank);
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (n && fwrite(p, 1, n, f) != n) abort();
  fclose(f);
}

/* Compares dir's traces; findings count and lines read into *nf, *nl.
 * Returns the status. */
static vqc_status compare(const char *dir, const char *copy, int *nf,
                          int64_t *nl) {
  vqc_trace_set_options o = {false, 0, false};
  vqc_trace_set *s = NULL;
  vqc_findings f;
  vqc_findings_init(&f);
  vqc_trace_compare_result res;
  memset(&res, 0, sizeof res);
  vqc_status st = vqc_trace_set_open(dir, &o, &s);
  if (st == VQC_OK) st = vqc_trace_set_compare(s, copy, &f, &res);
  *nf = f.count;
  *nl = res.lines_read;
  vqc_trace_set_close(s);
  vqc_trace_compare_result_free(&res);
  vqc_findings_free(&f);
  return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *line = malloc(size + 1);
  if (!line) return 0;
  memcpy(line, data, size);
  line[size] = '\0';
  vqc_trace_record r;
  vqc_trace_parse_line(line, "fuzz", 1, &r);
  free(line);

  const uint8_t *sep = memchr(data, 0xFF, size);
  size_t n0 = sep ? (size_t)(sep - data) : size;
  write_file(in_dir, 0, data, n0);
  write_file(in_dir, 1, sep ? sep + 1 : data, sep ? size - n0 - 1 : 0);

  int nf = 0, nf2 = 0;
  int64_t nl = 0, nl2 = 0;
  if (compare(in_dir, copy_dir, &nf, &nl) == VQC_OK) {
    /* The copies hold the accepted lines: they must compare the same. */
    if (compare(copy_dir, NULL, &nf2, &nl2) != VQC_OK) {
      fprintf(stderr, "the copy of accepted traces does not read back: %s\n",
              vqc_last_error());
      abort();
    }
    if (nf2 != nf || nl2 != nl) {
      fprintf(stderr, "copy: %d findings / %lld lines, original %d / %lld\n",
              nf2, (long long)nl2, nf, (long long)nl);
      abort();
    }
  }
  return 0;
}
