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

/* VQC_OK when st (lstat of path) is a regular file; else VQC_EINVAL naming
 * path and what it is ("Links" in vqc/fsutil.h). */
static vqc_status regular_or_refuse(const char *path, const struct stat *st) {
  if (S_ISLNK(st->st_mode))
    return vqc_error(VQC_EINVAL, "refusing to write through the link %s: "
                     "remove it (vqcheck never follows links in a run "
                     "directory)", path);
  if (!S_ISREG(st->st_mode))
    return vqc_error(VQC_EINVAL, "refusing to write %s: it is %s, not a "
                     "regular file; move it away and run again", path,
                     S_ISDIR(st->st_mode) ? "a directory" : "a special file");
  return VQC_OK;
}

/* VQC_OK unless path is a symbolic link (then the refusal of
 * regular_or_refuse). A directory there is left to the rename, which fails
 * with the system's reason (VQC_EIO), as a path that cannot be looked at
 * is. */
static vqc_status target_ok(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode)) return VQC_OK;
  return regular_or_refuse(path, &st);
}

/* Steps 1 and 2 of the atomic write (vqc/fsutil.h): fn's content, flushed
 * and fsync'ed, in "<path>.tmp.<pid>", whose name goes to *tmp (malloc'd;
 * the caller frees it and, on failure, nothing is left to remove). */
static vqc_status write_temp(const char *path, vqc_write_fn fn, void *user,
                             char **tmp_out) {
  *tmp_out = NULL;
  /* "<path>.tmp.<pid>": 32 bytes hold ".tmp." and any pid. */
  const size_t tmp_n = strlen(path) + 32;
  char *tmp = malloc(tmp_n);
  if (!tmp) return vqc_error(VQC_ENOMEM, "no memory to write %s", path);
  snprintf(tmp, tmp_n, "%s.tmp.%ld", path, (long)getpid());

  /* A file of the temporary's name can only be the leftover of a crashed
   * process that had this pid: take its place. Created exclusively, so a
   * link planted at the name is never followed. */
  unlink(tmp);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                0666);
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
  if (s != VQC_OK) {
    unlink(tmp);
    free(tmp);
    return s;
  }
  *tmp_out = tmp;
  return VQC_OK;
}

vqc_status vqc_write_atomic(const char *path, vqc_write_fn fn, void *user) {
  if (!path || !path[0] || !fn)
    return vqc_error(VQC_EINVAL, "vqc_write_atomic: no path or no writer");
  /* A link (or a directory) at path is refused before anything is
   * written, and again just before the rename (which would replace the
   * link, not follow it: the refusal is the rule, not the safety). */
  VQC_TRY(target_ok(path));
  char *tmp = NULL;
  VQC_TRY(write_temp(path, fn, user, &tmp));
  vqc_status s = target_ok(path);
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

vqc_status vqc_write_file_new(const char *path, const void *data, size_t n,
                              bool *made) {
  *made = false;
  if (!path || !path[0] || (n > 0 && !data))
    return vqc_error(VQC_EINVAL, "vqc_write_file_new: no path or no data");
  struct stat st;
  if (lstat(path, &st) == 0) return VQC_OK; /* there already: left alone */
  byte_span b = {data, n};
  char *tmp = NULL;
  VQC_TRY(write_temp(path, write_span, &b, &tmp));
  /* link() never replaces: of several processes, one makes path, whole. */
  vqc_status s = VQC_OK;
  if (link(tmp, path) == 0)
    *made = true;
  else if (errno != EEXIST)
    s = vqc_error(VQC_EIO, "cannot create %s: %s", path, strerror(errno));
  unlink(tmp);
  free(tmp);
  return s;
}

vqc_status vqc_open_write(const char *path, bool truncate, bool append,
                          int *fd) {
  *fd = -1;
  if (!path || !path[0])
    return vqc_error(VQC_EINVAL, "vqc_open_write: no path");
  /* O_NONBLOCK: opening a FIFO planted at the name must not wait for a
   * reader (it is refused below); it is cleared again for the writes. */
  const int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK |
                    (append ? O_APPEND : 0);
  int d = open(path, flags, 0644);
  if (d < 0) {
    const int err = errno;
    struct stat st;
    /* ELOOP: the name is a link. (A directory: EISDIR, an I/O error.) */
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
      return regular_or_refuse(path, &st);
    return vqc_error(err == ELOOP ? VQC_EINVAL : VQC_EIO,
                     "cannot create %s: %s%s", path, strerror(err),
                     err == ENOENT ? " (does the directory exist?)" : "");
  }
  struct stat st;
  vqc_status s = VQC_OK;
  if (fstat(d, &st) != 0)
    s = vqc_error(VQC_EIO, "cannot open %s: %s", path, strerror(errno));
  if (s == VQC_OK) s = regular_or_refuse(path, &st);
  if (s == VQC_OK && st.st_nlink > 1)
    s = vqc_error(VQC_EINVAL, "refusing to write %s: it is a hard link (%lu "
                  "names), so another file would be written through it; "
                  "remove it (vqcheck writes only files of its own in a run "
                  "directory)", path, (unsigned long)st.st_nlink);
  /* F_SETFL keeps O_APPEND and drops O_NONBLOCK. */
  if (s == VQC_OK && (fcntl(d, F_SETFL, append ? O_APPEND : 0) != 0 ||
                      (truncate && ftruncate(d, 0) != 0)))
    s = vqc_error(VQC_EIO, "cannot open %s: %s", path, strerror(errno));
  if (s != VQC_OK) {
    close(d);
    return s;
  }
  *fd = d;
  return VQC_OK;
}
