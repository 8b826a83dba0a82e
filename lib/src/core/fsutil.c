/* fsutil.c: mkdir -p and the atomic file write (see vqc/fsutil.h). */
#include "vqc/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The longest path vqc_mkdir_p accepts (PATH_MAX on Linux). */
#define MAX_DIR_PATH 4096

vqc_status vqc_mkdir_p(const char *path) {
  char buf[MAX_DIR_PATH];
  int n = snprintf(buf, sizeof buf, "%s", path ? path : "");
  if (n <= 0 || (size_t)n >= sizeof buf)
    return vqc_error(VQC_EINVAL, "directory path empty or too long: %.200s",
                     path ? path : "(null)");
  /* Each parent in turn ("a", "a/b", ...), then the directory itself; one
   * that exists already (made by a peer rank, say) is fine. */
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
      return vqc_error(VQC_EIO, "cannot create %s: %s", buf, strerror(errno));
    *p = '/';
  }
  if (mkdir(buf, 0777) != 0 && errno != EEXIST)
    return vqc_error(VQC_EIO, "cannot create %s: %s", buf, strerror(errno));
  /* EEXIST also means "a file of that name": only a directory will do. */
  struct stat st;
  if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
    return vqc_error(VQC_EIO, "%s exists and is not a directory", buf);
  return VQC_OK;
}

vqc_status vqc_write_atomic(const char *path, vqc_write_fn fn, void *user) {
  if (!path || !path[0] || !fn)
    return vqc_error(VQC_EINVAL, "vqc_write_atomic: no path or no writer");
  /* "<path>.tmp.<pid>": 32 bytes hold ".tmp." and any pid. */
  const size_t tmp_n = strlen(path) + 32;
  char *tmp = malloc(tmp_n);
  if (!tmp) return vqc_error(VQC_ENOMEM, "no memory to write %s", path);
  snprintf(tmp, tmp_n, "%s.tmp.%ld", path, (long)getpid());

  /* A file of the temporary's name can only be the leftover of a crashed
   * process that had this pid: take its place. Created exclusively, so a
   * link planted at the name is never followed. */
  unlink(tmp);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f) {
    const int err = errno;
    vqc_status s = vqc_error(VQC_EIO, "cannot create %s: %s%s", tmp,
                             strerror(err),
                             err == ENOENT ? " (does the directory exist?)"
                                           : "");
    if (fd >= 0) {
      close(fd);
      unlink(tmp);
    }
    free(tmp);
    return s;
  }

  vqc_status s = fn(f, user);
  /* The writer's own error keeps its message; otherwise the stream's. */
  if (s == VQC_OK && (fflush(f) != 0 || ferror(f)))
    s = vqc_error(VQC_EIO, "cannot write %s: %s", tmp, strerror(errno));
  /* On disk before the rename, so the name never points at a file a power
   * loss could leave empty. */
  if (s == VQC_OK && fsync(fileno(f)) != 0)
    s = vqc_error(VQC_EIO, "cannot write %s: %s", tmp, strerror(errno));
  if (fclose(f) != 0 && s == VQC_OK)
    s = vqc_error(VQC_EIO, "cannot write %s: %s", tmp, strerror(errno));
  if (s == VQC_OK && rename(tmp, path) != 0)
    s = vqc_error(VQC_EIO, "cannot rename %s to %s: %s", tmp, path,
                  strerror(errno));
  if (s != VQC_OK) unlink(tmp);
  free(tmp);
  return s;
}

/* The bytes of vqc_write_file_atomic, for the stream writer. */
typedef struct byte_span {
  const void *data;
  size_t n;
} byte_span;

static vqc_status write_span(FILE *f, void *user) {
  const byte_span *b = user;
  /* A short write sets the stream's error flag, which the caller checks. */
  if (b->n > 0) fwrite(b->data, 1, b->n, f);
  return VQC_OK;
}

vqc_status vqc_write_file_atomic(const char *path, const void *data,
                                 size_t n) {
  if (n > 0 && !data)
    return vqc_error(VQC_EINVAL, "vqc_write_file_atomic(%s): NULL data",
                     path ? path : "(null)");
  byte_span b = {data, n};
  return vqc_write_atomic(path, write_span, &b);
}
