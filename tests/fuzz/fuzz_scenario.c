/* fuzz_scenario.c: libFuzzer target for the scenario loader
 * (harness/scenario/scenario.c, vqc_scenario_load). The loader only reads
 * files, so each input is written to one temporary file and loaded; a scenario
 * that loads is also turned into JSON and its expectation string, the other
 * readers of the loaded struct. Sanitizers (ASan, UBSan, leaks) do the
 * checking: any input must give VQC_OK or an error, never a crash.
 *
 * Built by tests/fuzz/run.sh with clang -fsanitize=fuzzer; gcc cannot. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char path[64];

static void cleanup(void) { unlink(path); }

/* Files in memory (/dev/shm) where there is one: the target writes files
 * on every run, and a disk makes that the bottleneck. */
static const char *tmp_root(void) {
  return access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  snprintf(path, sizeof path, "%s/vqc-fuzz-scenario-XXXXXX", tmp_root());
  int fd = mkstemp(path);
  if (fd < 0) abort();
  close(fd);
  atexit(cleanup);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (size && fwrite(data, 1, size, f) != size) abort();
  fclose(f);
  vqc_scenario *sc = malloc(sizeof *sc); /* large: keep it off the stack */
  if (!sc) return 0;
  if (vqc_scenario_load(path, sc) == VQC_OK) {
    json_t *j = vqc_scenario_to_json(sc);
    char *text = json_dumps(j, JSON_COMPACT);
    free(text);
    json_decref(j);
    char expect[2048];
    vqc_scenario_expect_string(sc, expect, sizeof expect);
  }
  free(sc);
  return 0;
}
