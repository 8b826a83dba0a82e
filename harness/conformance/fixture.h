/* fixture.h: reader for the golden cases in tests/fixtures/vqpt/
 * (format "vq-oracle-fixture/1", see that folder's README.md).
 *
 * A case is a directory with case.json (kind, params, scalars, arrays) and one
 * raw little-endian .bin per array. vqc_fixture_open reads and checks all of
 * it up front: dtype (float32 | int64), shape, file size == prod(shape) *
 * element size, and the BLAKE2b-128 digest. Every error is returned as a
 * status with a message naming the file and the field and saying what was
 * expected, so a bad fixture is reported, never a crash.
 *
 * Ownership: vqc_fixture_open allocates the fixture and every array it holds;
 * vqc_fixture_close frees them (NULL is fine). Pointers returned by the
 * accessors stay valid until close. */
#ifndef VQC_FIXTURE_H
#define VQC_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vqc/status.h"

#define VQC_FIXTURE_MAX_DIMS 8

typedef enum vqc_fixture_dtype {
  VQC_FIXTURE_F32, /* "float32", <f4 */
  VQC_FIXTURE_I64  /* "int64",   <i8 */
} vqc_fixture_dtype;

typedef struct vqc_fixture_array {
  const char *name;  /* key in case.json "arrays" */
  const char *path;  /* the .bin path as opened */
  vqc_fixture_dtype dtype;
  int ndim;
  int64_t shape[VQC_FIXTURE_MAX_DIMS];
  int64_t numel;     /* prod(shape); 0 for a [0] array */
  /* (numel,) elements: float * for F32, int64_t * for I64; never NULL (a
   * zero-length array points at a valid empty allocation). */
  void *data;
} vqc_fixture_array;

typedef struct vqc_fixture vqc_fixture;

/* Reads `case_dir`/case.json and all its arrays into *out. */
vqc_status vqc_fixture_open(const char *case_dir, vqc_fixture **out);
void vqc_fixture_close(vqc_fixture *fx);
/* Reads only case.json's "kind" (no arrays): for filtering by kind without
 * verifying every file. kind gets at most cap-1 characters. */
vqc_status vqc_fixture_read_kind(const char *case_dir, char *kind, size_t cap);

/* The "case" name (directory name when absent), "kind", and the case.json
 * path used in messages. */
const char *vqc_fixture_name(const vqc_fixture *fx);
const char *vqc_fixture_kind(const vqc_fixture *fx);
const char *vqc_fixture_json_path(const vqc_fixture *fx);

/* ---- arrays */
/* NULL when the case has no array `name` (no error recorded). */
const vqc_fixture_array *vqc_fixture_find(const vqc_fixture *fx,
                                          const char *name);
/* The array `name`, which must exist with the given dtype. */
vqc_status vqc_fixture_array_get(const vqc_fixture *fx, const char *name,
                                 vqc_fixture_dtype dtype,
                                 const vqc_fixture_array **out);
/* Checks a->shape against `shape` (ndim entries; an entry < 0 matches any
 * extent). Error message: "<case.json>: array 'x': shape [2,3] but expected
 * [*,4]". */
vqc_status vqc_fixture_check_shape(const vqc_fixture *fx,
                                   const vqc_fixture_array *a, int ndim,
                                   const int64_t *shape);
/* Shorthands: get + dtype + shape check (shape may be NULL: any shape). */
vqc_status vqc_fixture_f32(const vqc_fixture *fx, const char *name, int ndim,
                           const int64_t *shape, const vqc_fixture_array **out);
vqc_status vqc_fixture_i64(const vqc_fixture *fx, const char *name, int ndim,
                           const int64_t *shape, const vqc_fixture_array **out);

/* ---- scalars ("scalars" object): JSON numbers */
bool vqc_fixture_has_scalar(const vqc_fixture *fx, const char *name);
vqc_status vqc_fixture_scalar(const vqc_fixture *fx, const char *name,
                              double *out);
/* Integer scalar (a JSON integer, or a real with an integral value). */
vqc_status vqc_fixture_scalar_int(const vqc_fixture *fx, const char *name,
                                  int64_t *out);
/* A list of integers, e.g. expired_codes_1. *out is malloc'd (caller
 * frees; non-NULL even for an empty list), *n its length. */
vqc_status vqc_fixture_scalar_int_list(const vqc_fixture *fx,
                                       const char *name, int64_t **out,
                                       int64_t *n);

/* ---- params ("params" object). has_param is false for absent or null. */
bool vqc_fixture_has_param(const vqc_fixture *fx, const char *name);
vqc_status vqc_fixture_param_int(const vqc_fixture *fx, const char *name,
                                 int64_t *out);
vqc_status vqc_fixture_param_double(const vqc_fixture *fx, const char *name,
                                    double *out);
vqc_status vqc_fixture_param_bool(const vqc_fixture *fx, const char *name,
                                  bool *out);
/* Like the above, but *out = dflt when the param is absent or null. */
vqc_status vqc_fixture_param_int_or(const vqc_fixture *fx, const char *name,
                                    int64_t dflt, int64_t *out);
vqc_status vqc_fixture_param_double_or(const vqc_fixture *fx,
                                       const char *name, double dflt,
                                       double *out);
vqc_status vqc_fixture_param_bool_or(const vqc_fixture *fx, const char *name,
                                     bool dflt, bool *out);
/* List of integers (e.g. levels); *out malloc'd, caller frees. */
vqc_status vqc_fixture_param_int_list(const vqc_fixture *fx, const char *name,
                                      int64_t **out, int64_t *n);

/* Escape hatch: the parsed case.json as a jansson json_t * (borrowed). */
const void *vqc_fixture_json(const vqc_fixture *fx);

#endif
