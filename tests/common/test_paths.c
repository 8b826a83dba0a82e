/* test_paths.c: see test_paths.h. */
#include "test_paths.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *vqc_test_source_dir(void) { return VQC_SOURCE_DIR; }

const char *vqc_test_shared_dir(void) {
  const char *env = getenv("VQC_SHARED_DIR");
  return env && *env ? env : VQC_SHARED_DIR;
}

char *vqc_test_temp_dir(char *buf, size_t n, const char *templ) {
  if ((size_t)snprintf(buf, n, "%s", templ) >= n) {
    errno = ENAMETOOLONG;
    return NULL;
  }
  return mkdtemp(buf);
}

void vqc_test_remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}
