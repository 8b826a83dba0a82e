/* tensor.h: dense tensors of up to 4 dims over reference-counted storage.
 *
 * A vqc_tensor is a small value (pass it by pointer, copy it only through the
 * functions here): a view (offset, shape, strides, in ELEMENTS) onto a
 * vqc_storage that it holds one reference to. Views (transpose, slice,
 * reshape) share storage; vqc_tensor_free drops the view's reference and the
 * storage is freed with its last reference.
 *
 * A contiguous copy of a strided tensor remembers the view it was copied from
 * (`origin`): the lost-in-place checker uses that link to see whether a
 * collective's result ever reached the tensor the user meant to reduce
 * (vector-quantize-pytorch #101: all_reduce(embed_sum.contiguous())).
 *
 * Storage lives on the CPU, or on a CUDA device when the build has CUDA
 * (VQC_WITH_CUDA) and a device is present; otherwise asking for device
 * storage returns VQC_ENODEVICE. */
#ifndef VQC_TENSOR_H
#define VQC_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vqc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VQC_MAX_DIMS 4

/* X(NAME, C type, element size, digest code, name string). The digest code is
 * part of the tensor digest definition (README): never renumber. */
#define VQC_DTYPE_LIST(X)                    \
  X(F32, float,   4, 1, "float32")           \
  X(F64, double,  8, 2, "float64")           \
  X(I32, int32_t, 4, 3, "int32")             \
  X(I64, int64_t, 8, 4, "int64")             \
  X(U8,  uint8_t, 1, 5, "uint8")

typedef enum {
#define VQC_DTYPE_ENUM(name, ctype, size, code, str) VQC_##name,
  VQC_DTYPE_LIST(VQC_DTYPE_ENUM)
#undef VQC_DTYPE_ENUM
  VQC_DTYPE_COUNT
} vqc_dtype;

size_t vqc_dtype_size(vqc_dtype dt);          /* bytes per element; 0 if bad */
const char *vqc_dtype_name(vqc_dtype dt);     /* "float32", ...; "?" if bad */
uint8_t vqc_dtype_digest_code(vqc_dtype dt);  /* stable code; 0 if bad */
/* Parses "float32" etc. Returns VQC_EINVAL for an unknown name. */
vqc_status vqc_dtype_from_name(const char *name, vqc_dtype *out);

typedef enum { VQC_DEVICE_CPU = 0, VQC_DEVICE_CUDA = 1 } vqc_device;

/* Shared, reference-counted bytes. `owned` storage is freed with its last
 * reference; borrowed storage (vqc_tensor_wrap) never is. */
typedef struct vqc_storage {
  void *data;
  size_t nbytes;
  vqc_device device;
  bool owned;
  long refs;   /* changed only with __atomic builtins */
  uint64_t id; /* unique per process, for ledgers and reports */
  /* How many times an accessor handed out or read these bytes (see "access
   * tracking" below); relaxed __atomic adds, read with
   * vqc_tensor_access_count. */
  uint64_t accesses;
} vqc_storage;

/* Where a contiguous copy came from: the source view, with a reference held on
 * its storage so the link stays valid as long as the copy lives. */
typedef struct vqc_tensor_origin {
  vqc_storage *storage; /* NULL: not a copy of a strided tensor */
  size_t offset;
  int ndim;
  int64_t shape[VQC_MAX_DIMS];
  int64_t strides[VQC_MAX_DIMS];
} vqc_tensor_origin;

typedef struct vqc_tensor {
  vqc_storage *storage; /* NULL for an empty (freed or zeroed) tensor */
  size_t offset;        /* elements from storage->data to element [0,..,0] */
  vqc_dtype dtype;
  int ndim;             /* 0..VQC_MAX_DIMS; 0 is a scalar of one element */
  int64_t shape[VQC_MAX_DIMS];
  int64_t strides[VQC_MAX_DIMS]; /* in elements; may be 0 for broadcast */
  vqc_tensor_origin origin;
} vqc_tensor;

/* ---- creation and lifetime (each out tensor must be freed by the caller) */

/* New uninitialised storage of shape (ndim, shape) on `device`, row-major
 * contiguous. */
vqc_status vqc_tensor_empty(vqc_tensor *out, vqc_dtype dt, int ndim,
                            const int64_t *shape, vqc_device device);
/* Same, filled with zero bytes. */
vqc_status vqc_tensor_zeros(vqc_tensor *out, vqc_dtype dt, int ndim,
                            const int64_t *shape, vqc_device device);
/* A contiguous tensor over caller-owned memory (CPU); the caller keeps the
 * memory alive and frees it after vqc_tensor_free. */
vqc_status vqc_tensor_wrap(vqc_tensor *out, void *data, vqc_dtype dt, int ndim,
                           const int64_t *shape);
/* Drops t's references and zeroes *t. Accepts NULL and zeroed tensors. */
void vqc_tensor_free(vqc_tensor *t);

/* ---- queries */

int64_t vqc_tensor_numel(const vqc_tensor *t);
size_t vqc_tensor_nbytes(const vqc_tensor *t); /* numel * element size */
/* Row-major contiguous (size-1 dims may have any stride). */
bool vqc_tensor_is_contiguous(const vqc_tensor *t);
/* Address of element [0,..,0] (a device address for device storage). */
void *vqc_tensor_data(const vqc_tensor *t);
bool vqc_tensor_same_storage(const vqc_tensor *a, const vqc_tensor *b);
/* True when t is a copy of a strided tensor (origin is set). */
bool vqc_tensor_has_origin(const vqc_tensor *t);
/* Writes "(2, 3)" into buf. */
void vqc_tensor_shape_str(const vqc_tensor *t, char *buf, size_t n);

/* ---- views (share storage; out holds its own reference) */

vqc_status vqc_tensor_view(const vqc_tensor *t, vqc_tensor *out); /* alias */
vqc_status vqc_tensor_transpose(const vqc_tensor *t, int dim0, int dim1,
                                vqc_tensor *out);
/* Elements start, start+step, ... < stop along dim; step >= 1;
 * 0 <= start <= stop <= shape[dim]. */
vqc_status vqc_tensor_slice(const vqc_tensor *t, int dim, int64_t start,
                            int64_t stop, int64_t step, vqc_tensor *out);
/* A view of a new shape with the same numel; one entry may be -1. Valid when
 * the strides allow it without a copy (always for contiguous tensors);
 * otherwise VQC_ESHAPE (use vqc_tensor_contiguous first). */
vqc_status vqc_tensor_reshape(const vqc_tensor *t, int ndim,
                              const int64_t *shape, vqc_tensor *out);

/* ---- copies */

/* Like torch's .contiguous(): if t is contiguous, out is a view of t (no copy,
 * no origin); otherwise out is a fresh contiguous copy on the same device
 * whose origin names t's view. */
vqc_status vqc_tensor_contiguous(const vqc_tensor *t, vqc_tensor *out);
/* Element-wise copy src -> dst, same dtype and shape, any strides (CPU). */
vqc_status vqc_tensor_copy(vqc_tensor *dst, const vqc_tensor *src);
/* A contiguous copy of t on `device` (no origin link). */
vqc_status vqc_tensor_to(const vqc_tensor *t, vqc_device device,
                         vqc_tensor *out);
/* Writes the copy's contents back into its origin view (the fix for #101). */
vqc_status vqc_tensor_copy_to_origin(const vqc_tensor *copy);
/* A view of the origin of `copy` (fails with VQC_EINVAL if it has none). */
vqc_status vqc_tensor_origin_view(const vqc_tensor *copy, vqc_dtype dt,
                                  vqc_tensor *out);

/* ---- element access (CPU, for tests and small code; not for hot loops) */

/* idx has t->ndim entries. Values convert through double. */
double vqc_tensor_get(const vqc_tensor *t, const int64_t *idx);
void vqc_tensor_set(vqc_tensor *t, const int64_t *idx, double v);

/* ---- access tracking (for the lost-in-place checker)
 *
 * C cannot see raw reads, so the tensor API counts them: every accessor that
 * hands out a tensor's data or reads it adds one to its storage's access
 * count (a relaxed atomic add, a few ns): vqc_tensor_data, vqc_tensor_get,
 * the source of vqc_tensor_copy, vqc_tensor_contiguous (when it copies),
 * vqc_tensor_to and vqc_tensor_copy_to_origin, and vqc_digest_tensor. Views,
 * writes (vqc_tensor_set, the destination of a copy) and queries do not
 * count. A checker notes the count after a collective; if it has not moved
 * by the end of the step, nobody used the result through the API. */

/* The access count of t's storage (0 for an empty tensor). */
uint64_t vqc_tensor_access_count(const vqc_tensor *t);
/* Adds one to t's access count: for code outside tensor.c that reads a
 * tensor's bytes without vqc_tensor_data (e.g. a strided digest walk). */
void vqc_tensor_note_access(const vqc_tensor *t);
/* The address vqc_tensor_data returns, without counting an access: for
 * library code that moves the bytes on the caller's behalf (a collective's
 * own send/recv) or inspects them for a checker, which must not look like a
 * use of the result. */
void *vqc_tensor_data_untracked(const vqc_tensor *t);

/* ---- device support */

/* True when the build has CUDA and a device answered. Never fails. */
bool vqc_cuda_available(void);

#ifdef __cplusplus
}
#endif
#endif /* VQC_TENSOR_H */
