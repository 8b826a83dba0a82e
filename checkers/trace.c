/* trace.c: the vqcheck-trace/1 writer and reader (format in trace.h).
 *
 * Lines are produced and parsed with jansson, so tensor names with quotes or
 * non-ASCII bytes are escaped correctly in both directions. */
#include "trace.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vqc/fsutil.h"
#include "utf8.h"

struct vqc_trace_writer {
  FILE *f;
  char path[4096]; /* for error messages */
};

vqc_status vqc_trace_path(const char *run_dir, int rank, char *buf, size_t n) {
  if (run_dir == NULL || buf == NULL || rank < 0)
    return vqc_error(VQC_EINVAL, "trace path: NULL run_dir/buffer or rank %d",
                     rank);
  int len = snprintf(buf, n, "%s/rank-%d.trace.jsonl", run_dir, rank);
  if (len < 0 || (size_t)len >= n)
    return vqc_error(VQC_EINVAL, "trace path for rank %d under '%s' is longer "
                     "than %zu bytes", rank, run_dir, n);
  return VQC_OK;
}

vqc_status vqc_trace_writer_open(const char *path, vqc_trace_writer **out) {
  if (path == NULL || out == NULL)
    return vqc_error(VQC_EINVAL, "trace: NULL path or out");
  *out = NULL;
  vqc_trace_writer *w = calloc(1, sizeof *w);
  if (w == NULL) return vqc_error(VQC_ENOMEM, "trace: no memory for a writer");
  snprintf(w->path, sizeof w->path, "%s", path);
  /* Never through a link, nor into a file of other names (vqc/fsutil.h
   * "Links"): VQC_EINVAL naming it. Truncated only once that is known. */
  int fd = -1;
  vqc_status s = vqc_open_write(path, true, false, &fd);
  if (s != VQC_OK) {
    free(w);
    return s;
  }
  w->f = fdopen(fd, "w");
  if (w->f == NULL) {
    int err = errno;
    close(fd);
    free(w);
    return vqc_error(VQC_EIO, "cannot create trace '%s': %s", path,
                     strerror(err));
  }
  /* Line-buffered: each record reaches the file as a whole line, so a job
   * killed mid-step keeps every line written before. */
  setvbuf(w->f, NULL, _IOLBF, 0);
  *out = w;
  return VQC_OK;
}

/* Checks a record against the format before it is written, so the writer can
 * never produce a line its own reader rejects. */
static vqc_status check_record(const vqc_trace_record *r) {
  if (r->rank < 0) return vqc_error(VQC_EINVAL, "trace: rank %d < 0", r->rank);
  if (r->step < 0)
    return vqc_error(VQC_EINVAL, "trace: step %" PRId64 " < 0", r->step);
  if (r->tensor[0] == '\0' ||
      strnlen(r->tensor, VQC_TRACE_NAME_MAX) >= VQC_TRACE_NAME_MAX)
    return vqc_error(VQC_EINVAL, "trace: tensor name empty or too long");
  if (strnlen(r->program, VQC_TRACE_NAME_MAX) >= VQC_TRACE_NAME_MAX)
    return vqc_error(VQC_EINVAL, "trace: program of '%s' too long",
                     r->tensor);
  if (r->not_digested[0]) /* no digest to check */
    return strnlen(r->not_digested, VQC_TRACE_WHY_MAX) < VQC_TRACE_WHY_MAX
               ? VQC_OK
               : vqc_error(VQC_EINVAL, "trace: why '%s' was not digested is "
                           "too long", r->tensor);
  if (r->dtype[0] == '\0' ||
      strnlen(r->dtype, VQC_TRACE_DTYPE_MAX) >= VQC_TRACE_DTYPE_MAX)
    return vqc_error(VQC_EINVAL, "trace: dtype of '%s' empty or too long",
                     r->tensor);
  if (r->digest_algo[0] == '\0' ||
      strnlen(r->digest_algo, VQC_TRACE_ALGO_MAX) >= VQC_TRACE_ALGO_MAX)
    return vqc_error(VQC_EINVAL, "trace: digest_algo of '%s' empty or too long",
                     r->tensor);
  if (r->ndim < 0 || r->ndim > VQC_TRACE_MAX_DIMS)
    return vqc_error(VQC_EINVAL, "trace: '%s' has %d dims (0..%d)", r->tensor,
                     r->ndim, VQC_TRACE_MAX_DIMS);
  for (int d = 0; d < r->ndim; d++)
    if (r->shape[d] < 0)
      return vqc_error(VQC_EINVAL, "trace: '%s' dim %d is %" PRId64, r->tensor,
                       d, r->shape[d]);
  return VQC_OK;
}

/* A record's line into w: o (consumed), compact, in insertion order. */
static vqc_status put_line(vqc_trace_writer *w, json_t *o) {
  char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(o);
  if (line == NULL) return vqc_error(VQC_ENOMEM, "trace: no memory for a line");
  int rc = fprintf(w->f, "%s\n", line);
  free(line);
  if (rc < 0)
    return vqc_error(VQC_EIO, "cannot write trace '%s': %s", w->path,
                     strerror(errno));
  return VQC_OK;
}

/* A not_digested line (trace.h): schema, rank, step, tensor, not_digested,
 * unchecked, then program when the record names one. */
static vqc_status write_not_digested(vqc_trace_writer *w,
                                     const vqc_trace_record *r) {
  json_t *o = json_object();
  json_t *tensor = json_string(r->tensor);
  json_t *why = json_string(r->not_digested);
  json_t *program = r->program[0] ? json_string(r->program) : NULL;
  if (o == NULL || tensor == NULL || why == NULL ||
      (r->program[0] && program == NULL)) {
    json_decref(o);
    json_decref(tensor);
    json_decref(why);
    json_decref(program);
    return vqc_error(VQC_EINVAL, "trace: name, reason or program of '%s' "
                     "is not valid UTF-8 (or no memory)", r->tensor);
  }
  int bad = 0;
  bad |= json_object_set_new(o, "schema", json_string(VQC_TRACE_SCHEMA));
  bad |= json_object_set_new(o, "rank", json_integer(r->rank));
  bad |= json_object_set_new(o, "step", json_integer(r->step));
  bad |= json_object_set_new(o, "tensor", tensor);
  bad |= json_object_set_new(o, "not_digested", why);
  bad |= json_object_set_new(o, "unchecked", json_boolean(r->unchecked));
  if (program) bad |= json_object_set_new(o, "program", program);
  if (bad) {
    json_decref(o);
    return vqc_error(VQC_ENOMEM, "trace: no memory for a line");
  }
  return put_line(w, o);
}

vqc_status vqc_trace_write(vqc_trace_writer *w, const vqc_trace_record *r) {
  if (w == NULL || r == NULL)
    return vqc_error(VQC_EINVAL, "trace: NULL writer or record");
  VQC_TRY(check_record(r));
  if (r->not_digested[0]) return write_not_digested(w, r);

  char digest[17];
  snprintf(digest, sizeof digest, "%016" PRIx64, r->digest);
  /* json_string refuses bytes that are not UTF-8: say so rather than
   * writing a line no JSON reader accepts. */
  json_t *tensor = json_string(r->tensor);
  json_t *dtype = json_string(r->dtype);
  json_t *algo = json_string(r->digest_algo);
  /* The optional program: only written when the record names one. */
  json_t *program = r->program[0] ? json_string(r->program) : NULL;
  if (tensor == NULL || dtype == NULL || algo == NULL ||
      (r->program[0] && program == NULL)) {
    json_decref(tensor);
    json_decref(dtype);
    json_decref(algo);
    json_decref(program);
    return vqc_error(VQC_EINVAL, "trace: name, dtype, digest_algo or program "
                     "of '%s' is not valid UTF-8", r->tensor);
  }
  json_t *shape = json_array();
  json_t *o = json_object();
  if (shape == NULL || o == NULL) goto nomem;
  for (int d = 0; d < r->ndim; d++)
    if (json_array_append_new(shape, json_integer(r->shape[d])) != 0)
      goto nomem;
  /* jansson keeps insertion order, which is the order trace.h documents. */
  int bad = 0;
  bad |= json_object_set_new(o, "schema", json_string(VQC_TRACE_SCHEMA));
  bad |= json_object_set_new(o, "rank", json_integer(r->rank));
  bad |= json_object_set_new(o, "step", json_integer(r->step));
  bad |= json_object_set(o, "tensor", tensor);
  bad |= json_object_set(o, "dtype", dtype);
  bad |= json_object_set(o, "shape", shape);
  bad |= json_object_set(o, "digest_algo", algo);
  bad |= json_object_set_new(o, "digest", json_string(digest));
  if (program) bad |= json_object_set(o, "program", program);
  if (r->group[0]) {
    int *ranks = malloc(VQC_TRACE_GROUP_MAX_RANKS * sizeof *ranks);
    const int k = ranks ? vqc_trace_group_ranks(r->group, ranks,
                                                VQC_TRACE_GROUP_MAX_RANKS)
                        : -1;
    json_t *g = json_array();
    for (int i = 0; i < k && i < VQC_TRACE_GROUP_MAX_RANKS && g; i++)
      bad |= json_array_append_new(g, json_integer(ranks[i]));
    free(ranks);
    if (k < 1 || !g) {
      json_decref(g);
      bad = 1;
    } else {
      bad |= json_object_set_new(o, "group", g);
    }
  }
  if (r->shard[0]) {
    json_t *sh = json_string(r->shard);
    bad |= sh ? json_object_set_new(o, "shard", sh) : -1;
  }
  if (r->nvalues > 0) {
    json_t *vs = json_array();
    for (int i = 0; i < r->nvalues && i < VQC_TRACE_MAX_VALUES && vs; i++)
      bad |= json_array_append_new(vs, json_real(r->values[i]));
    bad |= vs ? json_object_set_new(o, "values", vs) : -1;
  }
  if (bad) goto nomem;
  json_decref(tensor);
  json_decref(dtype);
  json_decref(algo);
  json_decref(program);
  json_decref(shape);
  return put_line(w, o);

nomem:
  json_decref(tensor);
  json_decref(dtype);
  json_decref(algo);
  json_decref(program);
  json_decref(shape);
  json_decref(o);
  return vqc_error(VQC_ENOMEM, "trace: no memory for a line");
}

vqc_status vqc_trace_flush(vqc_trace_writer *w) {
  if (w == NULL) return vqc_error(VQC_EINVAL, "trace: NULL writer");
  if (fflush(w->f) != 0)
    return vqc_error(VQC_EIO, "cannot flush trace '%s': %s", w->path,
                     strerror(errno));
  return VQC_OK;
}

void vqc_trace_writer_close(vqc_trace_writer *w) {
  if (w == NULL) return;
  fclose(w->f);
  free(w);
}

/* ---- reader */

/* A required string member of at most max-1 bytes, copied into dst. */
static vqc_status get_string(const json_t *o, const char *key, char *dst,
                             size_t max, const char *path, long lineno) {
  const json_t *v = json_object_get(o, key);
  if (v == NULL)
    return vqc_error(VQC_EPARSE, "%s:%ld: field '%s' is missing", path, lineno,
                     key);
  if (!json_is_string(v))
    return vqc_error(VQC_EPARSE, "%s:%ld: field '%s' must be a string", path,
                     lineno, key);
  const char *s = json_string_value(v);
  size_t len = json_string_length(v);
  if (len == 0 || len >= max || strlen(s) != len)
    return vqc_error(VQC_EPARSE,
                     "%s:%ld: field '%s' must be a non-empty string of less "
                     "than %zu bytes without NUL", path, lineno, key, max);
  memcpy(dst, s, len + 1);
  return VQC_OK;
}

/* A required integer member in [lo, hi]. */
static vqc_status get_int(const json_t *o, const char *key, int64_t lo,
                          int64_t hi, int64_t *out, const char *path,
                          long lineno) {
  const json_t *v = json_object_get(o, key);
  if (v == NULL)
    return vqc_error(VQC_EPARSE, "%s:%ld: field '%s' is missing", path, lineno,
                     key);
  if (!json_is_integer(v))
    return vqc_error(VQC_EPARSE, "%s:%ld: field '%s' must be an integer",
                     path, lineno, key);
  json_int_t x = json_integer_value(v);
  if (x < lo || x > hi)
    return vqc_error(VQC_EPARSE,
                     "%s:%ld: field '%s' is %" JSON_INTEGER_FORMAT
                     ", outside [%" PRId64 ", %" PRId64 "]",
                     path, lineno, key, x, lo, hi);
  *out = (int64_t)x;
  return VQC_OK;
}

/* The optional "program" member into dst (max bytes): "" when absent or
 * empty; an error when it is not a string, is max bytes or longer, or holds
 * a NUL. */
static vqc_status get_program(const json_t *o, char *dst, size_t max,
                              const char *path, long lineno) {
  dst[0] = '\0';
  const json_t *v = json_object_get(o, "program");
  if (v == NULL) return VQC_OK;
  if (!json_is_string(v))
    return vqc_error(VQC_EPARSE, "%s:%ld: field 'program' must be a string "
                     "(the name of the program that wrote the trace, e.g. "
                     "\"train.py\"), or be left out", path, lineno);
  const char *s = json_string_value(v);
  size_t len = json_string_length(v);
  if (len >= max || strlen(s) != len)
    return vqc_error(VQC_EPARSE,
                     "%s:%ld: field 'program' must be a string of less than "
                     "%zu bytes without NUL", path, lineno, max);
  memcpy(dst, s, len + 1);
  return VQC_OK;
}

/* The optional "shard" member into dst (max bytes): "" when absent. */
static vqc_status get_shard(const json_t *o, char *dst, size_t max,
                            const char *path, long lineno) {
  dst[0] = '\0';
  const json_t *v = json_object_get(o, "shard");
  if (v == NULL) return VQC_OK;
  const char *s = json_string_value(v);
  if (!s || json_string_length(v) >= max || strlen(s) != json_string_length(v))
    return vqc_error(VQC_EPARSE, "%s:%ld: field 'shard' must be a string of "
                     "less than %zu bytes without NUL (which part of the "
                     "tensor this rank holds), or be left out", path, lineno,
                     max);
  memcpy(dst, s, strlen(s) + 1);
  return VQC_OK;
}

/* The optional "values" member into r->values: 1 to VQC_TRACE_MAX_VALUES
 * finite numbers; nvalues 0 when absent. */
static vqc_status get_values(const json_t *o, vqc_trace_record *r,
                             const char *path, long lineno) {
  r->nvalues = 0;
  const json_t *v = json_object_get(o, "values");
  if (v == NULL) return VQC_OK;
  const size_t n = json_array_size(v);
  bool ok = json_is_array(v) && n >= 1 && n <= VQC_TRACE_MAX_VALUES;
  for (size_t i = 0; ok && i < n; i++) {
    const json_t *x = json_array_get(v, i);
    ok = json_is_number(x);
    if (ok) r->values[i] = json_number_value(x);
  }
  if (!ok)
    return vqc_error(VQC_EPARSE, "%s:%ld: field 'values' must be an array "
                     "of 1 to %d numbers (the elements of a small tensor, "
                     "told in findings), or be left out", path, lineno,
                     VQC_TRACE_MAX_VALUES);
  r->nvalues = (int)n;
  return VQC_OK;
}

static int cmp_int(const void *a, const void *b) {
  const int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* The optional "group" member into r->group (canonical text) and
 * r->group_size: an array of distinct ranks that holds r->rank. */
static vqc_status get_group(const json_t *o, vqc_trace_record *r,
                            const char *path, long lineno) {
  r->group[0] = '\0';
  r->group_size = 0;
  const json_t *v = json_object_get(o, "group");
  if (v == NULL) return VQC_OK;
  const size_t n = json_array_size(v);
  if (!json_is_array(v) || n == 0 || n > VQC_TRACE_GROUP_MAX_RANKS)
    return vqc_error(VQC_EPARSE, "%s:%ld: field 'group' must be an array of "
                     "1 to %d ranks (the ranks that must hold equal bits of "
                     "this tensor), or be left out", path, lineno,
                     VQC_TRACE_GROUP_MAX_RANKS);
  int *ranks = malloc(n * sizeof *ranks);
  if (!ranks) return vqc_error(VQC_ENOMEM, "trace: no memory for a group");
  bool self = false;
  vqc_status s = VQC_OK;
  for (size_t i = 0; i < n && s == VQC_OK; i++) {
    const json_t *x = json_array_get(v, i);
    if (!json_is_integer(x) || json_integer_value(x) < 0 ||
        json_integer_value(x) > INT_MAX) {
      s = vqc_error(VQC_EPARSE, "%s:%ld: field 'group': entry %zu must be a "
                    "rank (an integer >= 0)", path, lineno, i);
      break;
    }
    ranks[i] = (int)json_integer_value(x);
    self = self || ranks[i] == r->rank;
  }
  if (s == VQC_OK && !self)
    s = vqc_error(VQC_EPARSE, "%s:%ld: field 'group' does not hold the "
                  "line's own rank %d (a rank's replica group holds the "
                  "rank)", path, lineno, r->rank);
  if (s == VQC_OK &&
      vqc_trace_group_text(ranks, (int)n, r->group, sizeof r->group) !=
          VQC_OK) {
    char why[512]; /* vqc_error overwrites the message it would quote */
    snprintf(why, sizeof why, "%s", vqc_last_error());
    s = vqc_error(VQC_EPARSE, "%s:%ld: field 'group': %s", path, lineno, why);
  }
  if (s == VQC_OK) r->group_size = (int)n;
  else r->group[0] = '\0';
  free(ranks);
  return s;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* The rest of a not_digested line (trace.h), its schema, rank, step and
 * tensor read: the reason, "unchecked" (true when absent), the optional
 * program, group and shard; a digest's members are an error. */
static vqc_status parse_not_digested(const json_t *o, const char *path,
                                     long lineno, vqc_trace_record *r) {
  VQC_TRY(get_string(o, "not_digested", r->not_digested,
                     sizeof r->not_digested, path, lineno));
  static const char *const digest_keys[] = {"dtype", "shape", "digest_algo",
                                            "digest", "values"};
  for (size_t i = 0; i < sizeof digest_keys / sizeof *digest_keys; i++)
    if (json_object_get(o, digest_keys[i]) != NULL)
      return vqc_error(VQC_EPARSE, "%s:%ld: field '%s': a not_digested line "
                       "names a tensor left out of the digests and has no "
                       "'%s' (leave it out)", path, lineno, digest_keys[i],
                       digest_keys[i]);
  const json_t *u = json_object_get(o, "unchecked");
  if (u != NULL && !json_is_boolean(u))
    return vqc_error(VQC_EPARSE, "%s:%ld: field 'unchecked' must be true or "
                     "false (false: the tensor held nothing to compare), or "
                     "be left out", path, lineno);
  r->unchecked = u == NULL || json_is_true(u);
  VQC_TRY(get_program(o, r->program, sizeof r->program, path, lineno));
  VQC_TRY(get_group(o, r, path, lineno));
  return get_shard(o, r->shard, sizeof r->shard, path, lineno);
}

/* Parses an already-loaded object; separate so that every return path of
 * vqc_trace_parse_line frees the JSON once. */
static vqc_status parse_object(const json_t *o, const char *path, long lineno,
                               vqc_trace_record *r) {
  if (!json_is_object(o))
    return vqc_error(VQC_EPARSE, "%s:%ld: a line must be a JSON object", path,
                     lineno);
  char schema[32];
  VQC_TRY(get_string(o, "schema", schema, sizeof schema, path, lineno));
  if (strcmp(schema, VQC_TRACE_SCHEMA) != 0)
    return vqc_error(VQC_EPARSE,
                     "%s:%ld: field 'schema' is '%s', expected '%s'", path,
                     lineno, schema, VQC_TRACE_SCHEMA);
  int64_t rank = 0;
  VQC_TRY(get_int(o, "rank", 0, INT_MAX, &rank, path, lineno));
  r->rank = (int)rank;
  VQC_TRY(get_int(o, "step", 0, INT64_MAX, &r->step, path, lineno));
  VQC_TRY(get_string(o, "tensor", r->tensor, sizeof r->tensor, path, lineno));
  if (json_object_get(o, "not_digested") != NULL)
    return parse_not_digested(o, path, lineno, r);
  VQC_TRY(get_string(o, "dtype", r->dtype, sizeof r->dtype, path, lineno));
  VQC_TRY(get_string(o, "digest_algo", r->digest_algo, sizeof r->digest_algo,
                     path, lineno));

  const json_t *shape = json_object_get(o, "shape");
  if (shape == NULL)
    return vqc_error(VQC_EPARSE, "%s:%ld: field 'shape' is missing", path,
                     lineno);
  if (!json_is_array(shape) || json_array_size(shape) > VQC_TRACE_MAX_DIMS)
    return vqc_error(VQC_EPARSE,
                     "%s:%ld: field 'shape' must be an array of at most %d "
                     "integers", path, lineno, VQC_TRACE_MAX_DIMS);
  r->ndim = (int)json_array_size(shape);
  for (int d = 0; d < r->ndim; d++) {
    const json_t *v = json_array_get(shape, (size_t)d);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
      return vqc_error(VQC_EPARSE,
                       "%s:%ld: field 'shape': entry %d must be an integer "
                       ">= 0", path, lineno, d);
    r->shape[d] = (int64_t)json_integer_value(v);
  }

  char digest[32];
  VQC_TRY(get_string(o, "digest", digest, sizeof digest, path, lineno));
  uint64_t x = 0;
  bool ok = strlen(digest) == 16;
  for (int i = 0; ok && i < 16; i++) {
    int h = hex_value(digest[i]);
    if (h < 0) ok = false;
    x = (x << 4) | (uint64_t)(h < 0 ? 0 : h);
  }
  if (!ok)
    return vqc_error(VQC_EPARSE,
                     "%s:%ld: field 'digest' is '%s', expected 16 lowercase "
                     "hex digits", path, lineno, digest);
  r->digest = x;
  VQC_TRY(get_program(o, r->program, sizeof r->program, path, lineno));
  VQC_TRY(get_group(o, r, path, lineno));
  VQC_TRY(get_values(o, r, path, lineno));
  return get_shard(o, r->shard, sizeof r->shard, path, lineno);
}

vqc_status vqc_trace_parse_line(const char *line, const char *path,
                                long lineno, vqc_trace_record *out) {
  if (line == NULL || out == NULL)
    return vqc_error(VQC_EINVAL, "trace: NULL line or record");
  if (path == NULL) path = "(trace)";
  memset(out, 0, sizeof *out);
  json_error_t err;
  json_t *o = vqc_json_loadb_mended(line, strlen(line), JSON_REJECT_DUPLICATES,
                                    &err, NULL);
  if (o == NULL)
    return vqc_error(VQC_EPARSE, "%s:%ld: not JSON (column %d): %s", path,
                     lineno, err.column, err.text);
  vqc_status s = parse_object(o, path, lineno, out);
  json_decref(o);
  return s;
}

vqc_status vqc_trace_read_line(FILE *f, const char *path, long lineno,
                               char **buf, size_t *cap, size_t *len) {
  return vqc_jsonl_read_line(f, path, lineno, buf, cap, len);
}

vqc_status vqc_trace_parse_json(const json_t *o, const char *path,
                                long lineno, vqc_trace_record *out) {
  if (o == NULL || out == NULL)
    return vqc_error(VQC_EINVAL, "trace: NULL line or record");
  if (path == NULL) path = "(trace)";
  memset(out, 0, sizeof *out);
  return parse_object(o, path, lineno, out);
}

/* One line of vqc_trace_read into the vqc_trace at user. */
static vqc_status take_line(const vqc_jsonl_line *l, void *user) {
  vqc_trace *out = user;
  if (l->json == NULL)
    return vqc_error(VQC_EPARSE, "%s:%ld: not JSON (column %d): %s", l->path,
                     l->lineno, l->err->column, l->err->text);
  if (out->count == out->capacity) {
    size_t ncap = out->capacity ? 2 * out->capacity : 64;
    vqc_trace_record *items = realloc(out->items, ncap * sizeof *items);
    if (items == NULL)
      return vqc_error(VQC_ENOMEM, "trace '%s': no memory for %zu records",
                       l->path, ncap);
    out->items = items;
    out->capacity = ncap;
  }
  VQC_TRY(vqc_trace_parse_json(l->json, l->path, l->lineno,
                               &out->items[out->count]));
  out->count++;
  return VQC_OK;
}

vqc_status vqc_trace_read(const char *path, vqc_trace *out) {
  if (path == NULL || out == NULL)
    return vqc_error(VQC_EINVAL, "trace: NULL path or out");
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return vqc_error(VQC_EIO, "cannot open trace '%s': %s", path,
                     strerror(errno));

  const vqc_jsonl_opts opts = {0, JSON_REJECT_DUPLICATES, NULL, NULL};
  vqc_status s = vqc_jsonl_read_stream(f, path, &opts, take_line, out);
  fclose(f);
  return s;
}

void vqc_trace_free(vqc_trace *t) {
  if (t == NULL) return;
  free(t->items);
  memset(t, 0, sizeof *t);
}

/* ---- replica groups */

vqc_status vqc_trace_group_text(const int *ranks, int n, char *buf,
                                size_t cap) {
  if (cap == 0) return vqc_error(VQC_EINVAL, "group text: no room");
  buf[0] = '\0';
  if (n < 1) return vqc_error(VQC_EINVAL, "a group needs at least one rank");
  int *r = malloc((size_t)n * sizeof *r);
  if (!r) return vqc_error(VQC_ENOMEM, "group text: no memory");
  memcpy(r, ranks, (size_t)n * sizeof *r);
  qsort(r, (size_t)n, sizeof *r, cmp_int);
  vqc_status s = VQC_OK;
  size_t k = 0;
  for (int i = 0; i < n && s == VQC_OK;) {
    if (r[i] < 0 || (i > 0 && r[i] == r[i - 1])) {
      s = vqc_error(VQC_EINVAL, "rank %d %s", r[i],
                    r[i] < 0 ? "is negative" : "is named twice");
      break;
    }
    /* The longest run from i with one stride (3 ranks or more). */
    int j = i;
    if (i + 2 < n && r[i + 1] - r[i] > 0 &&
        r[i + 2] - r[i + 1] == r[i + 1] - r[i]) {
      const int stride = r[i + 1] - r[i];
      j = i + 2;
      while (j + 1 < n && r[j + 1] - r[j] == stride) j++;
    }
    int w = j > i ? snprintf(buf + k, cap - k, "%s%d-%d:%d", k ? "," : "",
                             r[i], r[j], r[i + 1] - r[i])
                  : snprintf(buf + k, cap - k, "%s%d", k ? "," : "", r[i]);
    if (w < 0 || (size_t)w >= cap - k) {
      s = vqc_error(VQC_EINVAL, "a group of %d ranks too irregular to hold "
                    "(its runs of one stride take more than %zu bytes)", n,
                    cap - 1);
      break;
    }
    k += (size_t)w;
    i = j + 1;
  }
  free(r);
  if (s != VQC_OK) buf[0] = '\0';
  return s;
}

int vqc_trace_group_ranks(const char *text, int *out, int max) {
  int count = 0;
  const char *p = text;
  if (!p || !*p) return -1;
  for (;;) {
    char *end;
    long a = strtol(p, &end, 10);
    if (end == p || a < 0 || a > INT_MAX) return -1;
    long b = a, stride = 1;
    if (*end == '-') {
      p = end + 1;
      b = strtol(p, &end, 10);
      if (end == p || *end != ':' || b <= a) return -1;
      p = end + 1;
      stride = strtol(p, &end, 10);
      if (end == p || stride < 1 || (b - a) % stride != 0) return -1;
    }
    for (long x = a; x <= b; x += stride) {
      if (count < max) out[count] = (int)x;
      count++;
    }
    if (*end == '\0') return count;
    if (*end != ',') return -1;
    p = end + 1;
  }
}
