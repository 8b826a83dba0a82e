/* test_paths.c: see test_paths.h. */
#include "test_paths.h"

#include <dirent.h>
#include <sys/stat.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *vqc_test_source_dir(void) {
  /* $VQC_SOURCE_DIR: the test binaries run from a copy of the tree at
   * another path (scripts/device-kit.sh, on a lent GPU machine). */
  const char *env = getenv("VQC_SOURCE_DIR");
  return env && *env ? env : VQC_SOURCE_DIR;
}

const char *vqc_test_fixtures_dir(void) {
  const char *env = getenv("VQC_FIXTURES_DIR");
  return env && *env ? env : VQC_FIXTURES_DIR;
}

char *vqc_test_temp_dir(char *buf, size_t n, const char *templ) {
  if ((size_t)snprintf(buf, n, "%s", templ) >= n) {
    errno = ENAMETOOLONG;
    return NULL;
  }
  return mkdtemp(buf);
}

void vqc_test_remove_dir(const char *path) {
  /* Recursive; links are removed, never followed. */
  struct stat st;
  if (lstat(path, &st) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    unlink(path);
    return;
  }
  DIR *d = opendir(path);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
        continue;
      char child[8192];
      snprintf(child, sizeof child, "%s/%s", path, e->d_name);
      vqc_test_remove_dir(child);
    }
    closedir(d);
  }
  rmdir(path);
}

static int compare_names(const void *a, const void *b) {
  return strcmp(a, b); /* each element is a char[256] holding a string */
}

int vqc_test_dir_listing(const char *dir, char *buf, size_t n) {
  char names[64][256];
  int count = 0;
  buf[0] = '\0';
  DIR *d = opendir(dir);
  if (!d) return -1;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (count == 64) {
      closedir(d);
      errno = E2BIG;
      return -1;
    }
    snprintf(names[count++], sizeof names[0], "%s", e->d_name);
  }
  closedir(d);
  qsort(names, (size_t)count, sizeof names[0], compare_names);
  for (int i = 0; i < count; i++) {
    if (i > 0) strncat(buf, ",", n - strlen(buf) - 1);
    strncat(buf, names[i], n - strlen(buf) - 1);
  }
  return 0;
}

const char *vqc_test_cli(void) {
  const char *e = getenv("VQC_TEST_CLI");
  return e && e[0] ? e : VQC_CLI_PATH;
}
