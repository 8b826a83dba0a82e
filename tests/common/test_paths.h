/* test_paths.h: where tests find the repository and the golden fixtures,
 * and the temporary directories they make and remove. */
#ifndef VQC_TEST_PATHS_H
#define VQC_TEST_PATHS_H

#include <stddef.h>

/* The repository root: $VQC_SOURCE_DIR if set, else the compile-time
 * VQC_SOURCE_DIR. */
const char *vqc_test_source_dir(void);
/* The golden fixtures (vqpt/: cases produced by vector-quantize-pytorch
 * itself, tests/fixtures/README.md): $VQC_FIXTURES_DIR if set (a newer set
 * of cases), else the compile-time VQC_FIXTURES_DIR (<repo>/tests/fixtures,
 * in the repository so that a fresh clone tests them). */
const char *vqc_test_fixtures_dir(void);

/* The vqcheck a test runs as a child process: $VQC_TEST_CLI when set (to
 * show a case failing on another build, e.g. one from before a fix), else
 * this build's (compile-time VQC_CLI_PATH). */
const char *vqc_test_cli(void);

/* Makes a fresh directory from `templ` (a mkdtemp template ending in
 * XXXXXX, e.g. "/tmp/vqc-test-runner-XXXXXX"), its name written into buf
 * (n bytes). Returns buf, or NULL when the name does not fit or mkdtemp
 * fails (errno says why). */
char *vqc_test_temp_dir(char *buf, size_t n, const char *templ);

/* Removes path and, when it is a directory, everything under it (links are
 * removed, never followed). Nothing happens when path does not exist. */
void vqc_test_remove_dir(const char *path);

/* The names in dir (not "." and ".."), sorted and joined with ',' into buf
 * (n bytes), so one string comparison says both what is there and what is
 * not. Returns 0, or -1 (errno set) when dir cannot be read or holds more
 * than 64 entries. */
int vqc_test_dir_listing(const char *dir, char *buf, size_t n);

#endif
