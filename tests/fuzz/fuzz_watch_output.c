/* fuzz_watch_output.c: libFuzzer target for "vqcheck's own output is
 * always valid" (issue 23): random bytes as a rank's stderr tail, a
 * finding's message, tensor, site and detail, a command argument, and the
 * files the Python bridge leaves (a findings line, a live record, a hang
 * marker, a stack dump).
 *
 * The input is split by woc_split (tests/fuzz/watch_output_check.h: each
 * part a 2-byte little-endian length, then its bytes), and woc_check builds
 * run.json as `vqcheck watch` and `vqcheck analyze` do (vqc_finding_to_json,
 * the bridge and live-record readers, watch's rank_failure and deadlock and
 * its "job" section, vqc_run_json_new), writes it, and checks that it
 * parses back, passes vqcheck's own validation (the reports' validator,
 * which every reader of run.json goes through), lost no finding, and that
 * report.md, report.html and junit.xml are written and valid UTF-8. A
 * failure prints what failed and aborts (the input is saved as a crash).
 * tests/unit/test_output_valid.c runs the same check on fixed inputs.
 *
 * Built by tests/fuzz/run.sh with clang -fsanitize=fuzzer; gcc cannot. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "watch_output_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char dir[64];

static void cleanup(void) { rmdir(dir); } /* woc_check leaves it empty */

/* Files in memory (/dev/shm) where there is one: every run writes run.json
 * and three reports, and a disk makes that the bottleneck. */
static const char *tmp_root(void) {
  return access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  snprintf(dir, sizeof dir, "%s/vqc-fuzz-watch-output-XXXXXX", tmp_root());
  if (!mkdtemp(dir)) abort();
  atexit(cleanup);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  woc_input in;
  woc_split(data, size, &in);
  const char *why = woc_check(dir, &in);
  if (why) {
    fprintf(stderr, "fuzz_watch_output: %s\n", why);
    abort();
  }
  return 0;
}
