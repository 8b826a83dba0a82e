/* test_paths.c: see test_paths.h. */
#include "test_paths.h"

#include <stdlib.h>

const char *vqc_test_source_dir(void) { return VQC_SOURCE_DIR; }

const char *vqc_test_shared_dir(void) {
  const char *env = getenv("VQC_SHARED_DIR");
  return env && *env ? env : VQC_SHARED_DIR;
}
