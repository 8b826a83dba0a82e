/* test_paths.h: where tests find the repository and the shared fixtures. */
#ifndef VQC_TEST_PATHS_H
#define VQC_TEST_PATHS_H

/* The repository root (compile-time VQC_SOURCE_DIR). */
const char *vqc_test_source_dir(void);
/* The shared/ directory beside the checkout: $VQC_SHARED_DIR if set, else
 * the compile-time VQC_SHARED_DIR (<repo>/../shared). */
const char *vqc_test_shared_dir(void);

#endif
