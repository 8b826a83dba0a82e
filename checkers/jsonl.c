/* jsonl.c: the bounded JSON Lines reader (jsonl.h). */
#include "jsonl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h" /* vqc_json_loadb_mended */

vqc_status vqc_jsonl_read_line(FILE *f, const char *path, long lineno,
                               char **buf, size_t *cap, size_t *len) {
  if (f == NULL || buf == NULL || cap == NULL || len == NULL)
    return vqc_error(VQC_EINVAL, "trace: NULL file or line buffer");
  if (path == NULL) path = "(trace)";
  *len = 0;
  size_t n = 0;
  vqc_status s = VQC_OK;
  /* Byte by byte (getc_unlocked is a macro over stdio's buffer): fgets
   * cannot tell a NUL inside a line from its end, and getline has no
   * bound. */
  flockfile(f);
  for (;;) {
    int c = getc_unlocked(f);
    if (c == '\0') {
      /* Zeros are no data: a writer through a shared mapping leaves them
       * past its last line when it is killed (interpose/vqc_mpi_record.c
       * allocates its file's blocks ahead), or inside a line it was
       * copying; a crash leaves them in a file whose length was written
       * before its blocks; a supervisor may append after them. A run of
       * zeros ends the line before it (a torn line, without its newline)
       * and, when it lasts to the end of the file, the data. */
      int d;
      while ((d = getc_unlocked(f)) == '\0') {
      }
      if (d == EOF && !ferror(f)) break;
      if (d != EOF) ungetc(d, f);
      if (n > 0) break;
      continue;
    }
    if (c == EOF) {
      if (ferror(f))
        s = vqc_error(VQC_EIO, "cannot read %s after line %ld: %s", path,
                      lineno - 1, strerror(errno));
      break;
    }
    if (c != '\n' && n == VQC_JSONL_LINE_MAX) {
      s = vqc_error(VQC_EPARSE, "%s:%ld: the line is longer than %zu bytes "
                    "(VQC_TRACE_LINE_MAX, 1 MiB): a line of a per-rank file "
                    "(a trace's tensor digest, a ledger record) is a few "
                    "hundred bytes; is this file one of vqcheck's?", path,
                    lineno, (size_t)VQC_JSONL_LINE_MAX);
      break;
    }
    if (n + 2 > *cap) {
      size_t ncap = *cap ? 2 * *cap : 256;
      if (ncap > VQC_JSONL_LINE_MAX + 2) ncap = VQC_JSONL_LINE_MAX + 2;
      char *g = realloc(*buf, ncap);
      if (g == NULL) {
        s = vqc_error(VQC_ENOMEM, "%s:%ld: no memory for a line of %zu "
                      "bytes", path, lineno, ncap);
        break;
      }
      *buf = g;
      *cap = ncap;
    }
    (*buf)[n++] = (char)c;
    if (c == '\n') break;
  }
  funlockfile(f);
  if (*buf) (*buf)[n] = '\0';
  if (s == VQC_OK) *len = n;
  return s;
}

/* Whether s[0..n) holds only whitespace. */
static bool blank(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
      return false;
  return true;
}

vqc_status vqc_jsonl_read_stream(FILE *f, const char *path,
                                 const vqc_jsonl_opts *opts, vqc_jsonl_fn fn,
                                 void *user) {
  static const vqc_jsonl_opts none = {0, 0, NULL, NULL};
  if (opts == NULL) opts = &none;
  if (f == NULL || fn == NULL)
    return vqc_error(VQC_EINVAL, "jsonl: NULL file or callback");
  char *buf = NULL; /* vqc_jsonl_read_line's, freed here */
  size_t cap = 0, len = 0;
  vqc_status s = VQC_OK;
  for (long lineno = 1; s == VQC_OK; lineno++) {
    s = vqc_jsonl_read_line(f, path, lineno, &buf, &cap, &len);
    if (s != VQC_OK || len == 0) break; /* an error, or the end */
    vqc_jsonl_line line = {path ? path : "(trace)", lineno, buf, len, false,
                           NULL, NULL};
    line.torn = buf[len - 1] != '\n';
    if (blank(buf, len)) continue;
    if (opts->needle && strstr(buf, opts->needle) == NULL) {
      if (opts->passed_over) (*opts->passed_over)++;
      continue;
    }
    json_error_t err;
    memset(&err, 0, sizeof err);
    /* with its newline: an error's column is the line's */
    line.json = vqc_json_loadb_mended(buf, len, opts->json_flags, &err, NULL);
    while (line.len > 0 && (buf[line.len - 1] == '\n' ||
                            buf[line.len - 1] == '\r'))
      buf[--line.len] = '\0';
    line.err = &err;
    if (line.json == NULL &&
        ((opts->flags & VQC_JSONL_SKIP_BAD) ||
         (line.torn && (opts->flags & VQC_JSONL_SKIP_TORN))))
      continue;
    s = fn(&line, user);
    json_decref(line.json);
  }
  free(buf);
  return s;
}

vqc_status vqc_jsonl_read(const char *path, const vqc_jsonl_opts *opts,
                          vqc_jsonl_fn fn, void *user, bool *present) {
  if (present) *present = false;
  if (path == NULL) return vqc_error(VQC_EINVAL, "jsonl: NULL path");
  FILE *f = fopen(path, "r");
  if (!f) {
    if (errno == ENOENT) return VQC_OK;
    return vqc_error(VQC_EIO, "cannot read %s: %s", path, strerror(errno));
  }
  if (present) *present = true;
  vqc_status s = vqc_jsonl_read_stream(f, path, opts, fn, user);
  fclose(f);
  return s;
}
