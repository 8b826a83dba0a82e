/* fixture.c: reads one golden case directory (case.json + raw .bin arrays)
 * and checks every array against its header before anyone uses it: dtype,
 * shape, file size and BLAKE2b-128 digest (see fixture.h for the contract).
 *
 * Error messages name the file and the JSON field ("arrays.z.shape") and say
 * what was expected; a fixture that is wrong in any way is an error, never a
 * crash or a silently truncated array. */
#include "fixture.h"

#include <blake2.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The only format this reader understands (fixtures/vqpt/README.md). */
#define FIXTURE_FORMAT "vq-oracle-fixture/1"
/* Refuse absurd headers before multiplying: no fixture array comes near
 * 2^40 bytes, and the bound keeps prod(shape) * 8 far from overflow. */
#define FIXTURE_MAX_ELEMS ((int64_t)1 << 37)

struct vqc_fixture {
  char *dir;       /* case directory as given */
  char *json_path; /* dir/case.json */
  char *name;      /* "case" field, else the directory's last component */
  char *kind;
  json_t *root;    /* owned */
  json_t *params;  /* borrowed from root; NULL when absent */
  json_t *scalars; /* borrowed from root; NULL when absent */
  int narrays;
  vqc_fixture_array *arrays; /* (narrays,) each with owned name/path/data */
};

/* malloc'd "a/b" (a without trailing '/'). NULL when out of memory. */
static char *join_path(const char *a, const char *b) {
  size_t la = strlen(a);
  while (la > 1 && a[la - 1] == '/') la--;
  const size_t lb = strlen(b);
  char *p = malloc(la + 1 + lb + 1);
  if (!p) return NULL;
  memcpy(p, a, la);
  p[la] = '/';
  memcpy(p + la + 1, b, lb + 1);
  return p;
}

static char *dup_string(const char *s) {
  const size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

/* Last non-empty path component of dir, malloc'd. */
static char *base_name(const char *dir) {
  size_t end = strlen(dir);
  while (end > 1 && dir[end - 1] == '/') end--;
  size_t start = end;
  while (start > 0 && dir[start - 1] != '/') start--;
  char *p = malloc(end - start + 1);
  if (!p) return NULL;
  memcpy(p, dir + start, end - start);
  p[end - start] = '\0';
  return p;
}

/* Loads and parses dir/case.json into *root (owned by the caller). */
static vqc_status load_json(const char *json_path, json_t **root) {
  json_error_t err;
  *root = json_load_file(json_path, JSON_REJECT_DUPLICATES, &err);
  if (!*root) {
    if (err.line < 1)
      return vqc_error(VQC_EPARSE, "%s: cannot read: %s", json_path,
                       err.text);
    return vqc_error(VQC_EPARSE, "%s:%d:%d: not valid JSON: %s", json_path,
                     err.line, err.column, err.text);
  }
  if (!json_is_object(*root)) {
    json_decref(*root);
    *root = NULL;
    return vqc_error(VQC_EPARSE, "%s: expected a JSON object at the top",
                     json_path);
  }
  return VQC_OK;
}

/* The string member `key` of obj, or an error naming the field. */
static vqc_status get_string(const char *json_path, const json_t *obj,
                             const char *prefix, const char *key,
                             const char **out) {
  const json_t *v = json_object_get(obj, key);
  if (!v)
    return vqc_error(VQC_EPARSE, "%s: %s%s: missing, expected a string",
                     json_path, prefix, key);
  if (!json_is_string(v))
    return vqc_error(VQC_EPARSE, "%s: %s%s: expected a string", json_path,
                     prefix, key);
  *out = json_string_value(v);
  return VQC_OK;
}

vqc_status vqc_fixture_read_kind(const char *case_dir, char *kind,
                                 size_t cap) {
  if (!case_dir || !kind || cap == 0)
    return vqc_error(VQC_EINVAL, "fixture: NULL argument");
  kind[0] = '\0';
  char *json_path = join_path(case_dir, "case.json");
  if (!json_path) return vqc_error(VQC_ENOMEM, "fixture: out of memory");
  json_t *root = NULL;
  vqc_status s = load_json(json_path, &root);
  const char *k = NULL;
  if (s == VQC_OK) s = get_string(json_path, root, "", "kind", &k);
  if (s == VQC_OK) snprintf(kind, cap, "%s", k);
  json_decref(root);
  free(json_path);
  return s;
}

static bool is_little_endian(void) {
  const uint16_t one = 1;
  unsigned char first;
  memcpy(&first, &one, 1);
  return first == 1;
}

/* The files are little-endian; swap each element on a big-endian host. */
static void to_host_order(void *data, int64_t numel, size_t elsize) {
  if (is_little_endian()) return;
  unsigned char *p = data;
  for (int64_t e = 0; e < numel; e++, p += elsize)
    for (size_t a = 0, b = elsize - 1; a < b; a++, b--) {
      const unsigned char t = p[a];
      p[a] = p[b];
      p[b] = t;
    }
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Parses the 32 hex digits of a 16-byte digest. */
static bool parse_digest(const char *hex, uint8_t out[16]) {
  if (strlen(hex) != 32) return false;
  for (int i = 0; i < 16; i++) {
    const int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = (uint8_t)(hi * 16 + lo);
  }
  return true;
}

static void format_digest(const uint8_t d[16], char hex[33]) {
  for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

/* "[4,16,4]" into buf. */
static void format_shape(char *buf, size_t cap, int ndim,
                         const int64_t *shape) {
  size_t n = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < ndim && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%" PRId64, i ? "," : "",
                          shape[i]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* Reads the whole file `path` (expected `want` bytes) into a new buffer. */
static vqc_status read_bin(const char *json_path, const char *field,
                           const char *path, size_t want, const char *what,
                           void **out) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f)
    return vqc_error(VQC_EPARSE, "%s: %s: cannot open '%s': %s", json_path,
                     field, path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    fclose(f);
    return vqc_error(VQC_EPARSE, "%s: %s: '%s' is not a regular file",
                     json_path, field, path);
  }
  if ((uint64_t)st.st_size != (uint64_t)want) {
    fclose(f);
    return vqc_error(VQC_EPARSE,
                     "%s: %s: '%s' has %lld bytes, but %s needs %zu",
                     json_path, field, path, (long long)st.st_size, what,
                     want);
  }
  /* +1 so that an empty array still gets a valid, non-NULL buffer. */
  void *buf = malloc(want + 1);
  if (!buf) {
    fclose(f);
    return vqc_error(VQC_ENOMEM, "%s: %s: cannot allocate %zu bytes",
                     json_path, field, want);
  }
  const size_t got = want ? fread(buf, 1, want, f) : 0;
  fclose(f);
  if (got != want) {
    free(buf);
    return vqc_error(VQC_EIO, "%s: %s: short read of '%s' (%zu of %zu bytes)",
                     json_path, field, path, got, want);
  }
  *out = buf;
  return VQC_OK;
}

/* Fills *a from the header `spec` of arrays.<name> and reads its file. */
static vqc_status load_array(const vqc_fixture *fx, const char *name,
                             const json_t *spec, vqc_fixture_array *a) {
  const char *jp = fx->json_path;
  char field[160];
  snprintf(field, sizeof field, "arrays.%s.", name);
  if (!json_is_object(spec))
    return vqc_error(VQC_EPARSE, "%s: arrays.%s: expected an object", jp,
                     name);
  a->name = dup_string(name);
  if (!a->name) return vqc_error(VQC_ENOMEM, "fixture: out of memory");

  const char *file, *dtype, *hex;
  VQC_TRY(get_string(jp, spec, field, "file", &file));
  VQC_TRY(get_string(jp, spec, field, "dtype", &dtype));
  VQC_TRY(get_string(jp, spec, field, "blake2b", &hex));
  /* Array files live inside the case directory: no absolute paths and no
   * way out of it. */
  if (file[0] == '\0' || strchr(file, '/') || strcmp(file, ".") == 0 ||
      strcmp(file, "..") == 0)
    return vqc_error(VQC_EPARSE,
                     "%s: %sfile: '%s' is not a file name inside the case "
                     "directory",
                     jp, field, file);

  size_t elsize;
  if (strcmp(dtype, "float32") == 0) {
    a->dtype = VQC_FIXTURE_F32;
    elsize = sizeof(float);
  } else if (strcmp(dtype, "int64") == 0) {
    a->dtype = VQC_FIXTURE_I64;
    elsize = sizeof(int64_t);
  } else {
    return vqc_error(VQC_EPARSE,
                     "%s: %sdtype: '%s' is not supported, expected "
                     "\"float32\" or \"int64\"",
                     jp, field, dtype);
  }

  const json_t *shape = json_object_get(spec, "shape");
  if (!json_is_array(shape))
    return vqc_error(VQC_EPARSE, "%s: %sshape: %s, expected a list of "
                     "non-negative integers",
                     jp, field, shape ? "not a list" : "missing");
  if (json_array_size(shape) > VQC_FIXTURE_MAX_DIMS)
    return vqc_error(VQC_EPARSE, "%s: %sshape: %zu dimensions, expected at "
                     "most %d",
                     jp, field, json_array_size(shape), VQC_FIXTURE_MAX_DIMS);
  a->ndim = (int)json_array_size(shape);
  a->numel = 1;
  for (int i = 0; i < a->ndim; i++) {
    const json_t *e = json_array_get(shape, (size_t)i);
    if (!json_is_integer(e) || json_integer_value(e) < 0)
      return vqc_error(VQC_EPARSE, "%s: %sshape[%d]: expected a non-negative "
                       "integer",
                       jp, field, i);
    a->shape[i] = (int64_t)json_integer_value(e);
    if (a->shape[i] > FIXTURE_MAX_ELEMS ||
        (a->shape[i] > 0 && a->numel > FIXTURE_MAX_ELEMS / a->shape[i]))
      return vqc_error(VQC_EPARSE, "%s: %sshape: more than 2^37 elements",
                       jp, field);
    a->numel *= a->shape[i];
  }

  uint8_t want_digest[16];
  if (!parse_digest(hex, want_digest))
    return vqc_error(VQC_EPARSE, "%s: %sblake2b: '%s' is not 32 hex digits "
                     "(a 16-byte BLAKE2b digest)",
                     jp, field, hex);

  char *path = join_path(fx->dir, file);
  if (!path) return vqc_error(VQC_ENOMEM, "fixture: out of memory");
  a->path = path;
  char shape_text[160], what[200];
  format_shape(shape_text, sizeof shape_text, a->ndim, a->shape);
  snprintf(what, sizeof what, "shape %s of %s", shape_text, dtype);
  char file_field[180];
  snprintf(file_field, sizeof file_field, "arrays.%s", name);
  const size_t nbytes = (size_t)a->numel * elsize;
  VQC_TRY(read_bin(jp, file_field, path, nbytes, what, &a->data));

  uint8_t got_digest[16];
  if (blake2b(got_digest, a->data, NULL, sizeof got_digest, nbytes, 0) != 0)
    return vqc_error(VQC_EINTERNAL, "%s: %s: BLAKE2b of '%s' failed", jp,
                     file_field, path);
  if (memcmp(got_digest, want_digest, sizeof got_digest) != 0) {
    char got_hex[33];
    format_digest(got_digest, got_hex);
    return vqc_error(VQC_EPARSE,
                     "%s: %sblake2b: '%s' has digest %s, expected %s (the "
                     "file is corrupt or does not belong to this header)",
                     jp, field, path, got_hex, hex);
  }
  to_host_order(a->data, a->numel, elsize);
  return VQC_OK;
}

void vqc_fixture_close(vqc_fixture *fx) {
  if (!fx) return;
  for (int i = 0; i < fx->narrays; i++) {
    free((char *)fx->arrays[i].name);
    free((char *)fx->arrays[i].path);
    free(fx->arrays[i].data);
  }
  free(fx->arrays);
  json_decref(fx->root);
  free(fx->dir);
  free(fx->json_path);
  free(fx->name);
  free(fx->kind);
  free(fx);
}

/* An optional member that must be an object when present. */
static vqc_status optional_object(const vqc_fixture *fx, const char *key,
                                  json_t **out) {
  json_t *v = json_object_get(fx->root, key);
  *out = NULL;
  if (!v || json_is_null(v)) return VQC_OK;
  if (!json_is_object(v))
    return vqc_error(VQC_EPARSE, "%s: %s: expected an object", fx->json_path,
                     key);
  *out = v;
  return VQC_OK;
}

vqc_status vqc_fixture_open(const char *case_dir, vqc_fixture **out) {
  if (!case_dir || !out)
    return vqc_error(VQC_EINVAL, "fixture: NULL argument");
  *out = NULL;
  vqc_status s = VQC_OK;
  vqc_fixture *fx = calloc(1, sizeof *fx);
  if (!fx) return vqc_error(VQC_ENOMEM, "fixture: out of memory");
  fx->dir = dup_string(case_dir);
  fx->json_path = join_path(case_dir, "case.json");
  if (!fx->dir || !fx->json_path) {
    s = vqc_error(VQC_ENOMEM, "fixture: out of memory");
    goto fail;
  }
  s = load_json(fx->json_path, &fx->root);
  if (s != VQC_OK) goto fail;

  const char *format, *kind;
  s = get_string(fx->json_path, fx->root, "", "format", &format);
  if (s != VQC_OK) goto fail;
  if (strcmp(format, FIXTURE_FORMAT) != 0) {
    s = vqc_error(VQC_EPARSE, "%s: format: '%s', expected \"%s\"",
                  fx->json_path, format, FIXTURE_FORMAT);
    goto fail;
  }
  s = get_string(fx->json_path, fx->root, "", "kind", &kind);
  if (s != VQC_OK) goto fail;
  fx->kind = dup_string(kind);
  const json_t *case_name = json_object_get(fx->root, "case");
  fx->name = json_is_string(case_name)
                 ? dup_string(json_string_value(case_name))
                 : base_name(case_dir);
  if (!fx->kind || !fx->name) {
    s = vqc_error(VQC_ENOMEM, "fixture: out of memory");
    goto fail;
  }
  s = optional_object(fx, "params", &fx->params);
  if (s != VQC_OK) goto fail;
  s = optional_object(fx, "scalars", &fx->scalars);
  if (s != VQC_OK) goto fail;

  json_t *arrays = json_object_get(fx->root, "arrays");
  if (!json_is_object(arrays)) {
    s = vqc_error(VQC_EPARSE, "%s: arrays: %s, expected an object of array "
                  "headers",
                  fx->json_path, arrays ? "not an object" : "missing");
    goto fail;
  }
  const size_t n = json_object_size(arrays);
  fx->arrays = calloc(n ? n : 1, sizeof *fx->arrays);
  if (!fx->arrays) {
    s = vqc_error(VQC_ENOMEM, "fixture: out of memory");
    goto fail;
  }
  const char *key;
  json_t *spec;
  json_object_foreach(arrays, key, spec) {
    /* Count the array before loading so close() frees a partial one. */
    vqc_fixture_array *a = &fx->arrays[fx->narrays++];
    s = load_array(fx, key, spec, a);
    if (s != VQC_OK) goto fail;
  }
  *out = fx;
  return VQC_OK;
fail:
  vqc_fixture_close(fx);
  return s;
}

const char *vqc_fixture_name(const vqc_fixture *fx) { return fx->name; }
const char *vqc_fixture_kind(const vqc_fixture *fx) { return fx->kind; }
const char *vqc_fixture_json_path(const vqc_fixture *fx) {
  return fx->json_path;
}
const void *vqc_fixture_json(const vqc_fixture *fx) { return fx->root; }

/* ---- arrays */

const vqc_fixture_array *vqc_fixture_find(const vqc_fixture *fx,
                                          const char *name) {
  for (int i = 0; i < fx->narrays; i++)
    if (strcmp(fx->arrays[i].name, name) == 0) return &fx->arrays[i];
  return NULL;
}

static const char *dtype_text(vqc_fixture_dtype dt) {
  return dt == VQC_FIXTURE_F32 ? "float32" : "int64";
}

vqc_status vqc_fixture_array_get(const vqc_fixture *fx, const char *name,
                                 vqc_fixture_dtype dtype,
                                 const vqc_fixture_array **out) {
  const vqc_fixture_array *a = vqc_fixture_find(fx, name);
  *out = NULL;
  if (!a)
    return vqc_error(VQC_EPARSE, "%s: arrays.%s: missing, expected a %s "
                     "array",
                     fx->json_path, name, dtype_text(dtype));
  if (a->dtype != dtype)
    return vqc_error(VQC_EPARSE, "%s: arrays.%s.dtype: %s, expected %s",
                     fx->json_path, name, dtype_text(a->dtype),
                     dtype_text(dtype));
  *out = a;
  return VQC_OK;
}

vqc_status vqc_fixture_check_shape(const vqc_fixture *fx,
                                   const vqc_fixture_array *a, int ndim,
                                   const int64_t *shape) {
  bool ok = a->ndim == ndim;
  for (int i = 0; ok && i < ndim; i++)
    if (shape[i] >= 0 && shape[i] != a->shape[i]) ok = false;
  if (ok) return VQC_OK;
  char got[160], want[160];
  format_shape(got, sizeof got, a->ndim, a->shape);
  size_t n = (size_t)snprintf(want, sizeof want, "[");
  for (int i = 0; i < ndim && n < sizeof want; i++) {
    if (shape[i] < 0)
      n += (size_t)snprintf(want + n, sizeof want - n, "%s*", i ? "," : "");
    else
      n += (size_t)snprintf(want + n, sizeof want - n, "%s%" PRId64,
                            i ? "," : "", shape[i]);
  }
  if (n < sizeof want) snprintf(want + n, sizeof want - n, "]");
  return vqc_error(VQC_ESHAPE, "%s: arrays.%s.shape: %s, expected %s",
                   fx->json_path, a->name, got, want);
}

static vqc_status get_typed(const vqc_fixture *fx, const char *name,
                            vqc_fixture_dtype dt, int ndim,
                            const int64_t *shape,
                            const vqc_fixture_array **out) {
  const vqc_fixture_array *a;
  VQC_TRY(vqc_fixture_array_get(fx, name, dt, &a));
  if (shape) VQC_TRY(vqc_fixture_check_shape(fx, a, ndim, shape));
  *out = a;
  return VQC_OK;
}

vqc_status vqc_fixture_f32(const vqc_fixture *fx, const char *name, int ndim,
                           const int64_t *shape,
                           const vqc_fixture_array **out) {
  return get_typed(fx, name, VQC_FIXTURE_F32, ndim, shape, out);
}

vqc_status vqc_fixture_i64(const vqc_fixture *fx, const char *name, int ndim,
                           const int64_t *shape,
                           const vqc_fixture_array **out) {
  return get_typed(fx, name, VQC_FIXTURE_I64, ndim, shape, out);
}

/* ---- scalars and params: values in a JSON object */

/* The member `name` of `obj` (section "scalars" or "params"), NULL if absent
 * or null. */
static const json_t *member(const json_t *obj, const char *name) {
  const json_t *v = obj ? json_object_get(obj, name) : NULL;
  return (v && !json_is_null(v)) ? v : NULL;
}

static vqc_status need(const vqc_fixture *fx, const json_t *obj,
                       const char *section, const char *name,
                       const char *expected, const json_t **out) {
  *out = member(obj, name);
  if (!*out)
    return vqc_error(VQC_EPARSE, "%s: %s.%s: missing, expected %s",
                     fx->json_path, section, name, expected);
  return VQC_OK;
}

/* A JSON integer, or a real whose value is an integer (Python writes 2.0
 * for float counts). */
static bool as_integer(const json_t *v, int64_t *out) {
  if (json_is_integer(v)) {
    *out = (int64_t)json_integer_value(v);
    return true;
  }
  if (json_is_real(v)) {
    const double d = json_real_value(v);
    if (d >= -9.007199254740992e15 && d <= 9.007199254740992e15 &&
        d == (double)(int64_t)d) {
      *out = (int64_t)d;
      return true;
    }
  }
  return false;
}

static vqc_status get_number(const vqc_fixture *fx, const json_t *obj,
                             const char *section, const char *name,
                             double *out) {
  const json_t *v;
  VQC_TRY(need(fx, obj, section, name, "a number", &v));
  if (!json_is_number(v))
    return vqc_error(VQC_EPARSE, "%s: %s.%s: expected a number",
                     fx->json_path, section, name);
  *out = json_number_value(v);
  return VQC_OK;
}

static vqc_status get_int(const vqc_fixture *fx, const json_t *obj,
                          const char *section, const char *name,
                          int64_t *out) {
  const json_t *v;
  VQC_TRY(need(fx, obj, section, name, "an integer", &v));
  if (!as_integer(v, out))
    return vqc_error(VQC_EPARSE, "%s: %s.%s: expected an integer",
                     fx->json_path, section, name);
  return VQC_OK;
}

static vqc_status get_int_list(const vqc_fixture *fx, const json_t *obj,
                               const char *section, const char *name,
                               int64_t **out, int64_t *n) {
  const json_t *v;
  *out = NULL;
  *n = 0;
  VQC_TRY(need(fx, obj, section, name, "a list of integers", &v));
  if (!json_is_array(v))
    return vqc_error(VQC_EPARSE, "%s: %s.%s: expected a list of integers",
                     fx->json_path, section, name);
  const size_t len = json_array_size(v);
  int64_t *buf = malloc((len ? len : 1) * sizeof *buf);
  if (!buf) return vqc_error(VQC_ENOMEM, "fixture: out of memory");
  for (size_t i = 0; i < len; i++) {
    if (!as_integer(json_array_get(v, i), &buf[i])) {
      free(buf);
      return vqc_error(VQC_EPARSE, "%s: %s.%s[%zu]: expected an integer",
                       fx->json_path, section, name, i);
    }
  }
  *out = buf;
  *n = (int64_t)len;
  return VQC_OK;
}

bool vqc_fixture_has_scalar(const vqc_fixture *fx, const char *name) {
  return member(fx->scalars, name) != NULL;
}

vqc_status vqc_fixture_scalar(const vqc_fixture *fx, const char *name,
                              double *out) {
  return get_number(fx, fx->scalars, "scalars", name, out);
}

vqc_status vqc_fixture_scalar_int(const vqc_fixture *fx, const char *name,
                                  int64_t *out) {
  return get_int(fx, fx->scalars, "scalars", name, out);
}

vqc_status vqc_fixture_scalar_int_list(const vqc_fixture *fx,
                                       const char *name, int64_t **out,
                                       int64_t *n) {
  return get_int_list(fx, fx->scalars, "scalars", name, out, n);
}

bool vqc_fixture_has_param(const vqc_fixture *fx, const char *name) {
  return member(fx->params, name) != NULL;
}

vqc_status vqc_fixture_param_int(const vqc_fixture *fx, const char *name,
                                 int64_t *out) {
  return get_int(fx, fx->params, "params", name, out);
}

vqc_status vqc_fixture_param_double(const vqc_fixture *fx, const char *name,
                                    double *out) {
  return get_number(fx, fx->params, "params", name, out);
}

vqc_status vqc_fixture_param_bool(const vqc_fixture *fx, const char *name,
                                  bool *out) {
  const json_t *v;
  VQC_TRY(need(fx, fx->params, "params", name, "true or false", &v));
  if (!json_is_boolean(v))
    return vqc_error(VQC_EPARSE, "%s: params.%s: expected true or false",
                     fx->json_path, name);
  *out = json_is_true(v);
  return VQC_OK;
}

vqc_status vqc_fixture_param_int_or(const vqc_fixture *fx, const char *name,
                                    int64_t dflt, int64_t *out) {
  if (!vqc_fixture_has_param(fx, name)) {
    *out = dflt;
    return VQC_OK;
  }
  return vqc_fixture_param_int(fx, name, out);
}

vqc_status vqc_fixture_param_double_or(const vqc_fixture *fx,
                                       const char *name, double dflt,
                                       double *out) {
  if (!vqc_fixture_has_param(fx, name)) {
    *out = dflt;
    return VQC_OK;
  }
  return vqc_fixture_param_double(fx, name, out);
}

vqc_status vqc_fixture_param_bool_or(const vqc_fixture *fx, const char *name,
                                     bool dflt, bool *out) {
  if (!vqc_fixture_has_param(fx, name)) {
    *out = dflt;
    return VQC_OK;
  }
  return vqc_fixture_param_bool(fx, name, out);
}

vqc_status vqc_fixture_param_int_list(const vqc_fixture *fx, const char *name,
                                      int64_t **out, int64_t *n) {
  return get_int_list(fx, fx->params, "params", name, out, n);
}
