/* tensor.c: dense tensors (vqc/tensor.h): reference-counted storage, views
 * (transpose, slice, reshape), strided copies, the `origin` link of a
 * contiguous copy, and element access for tests.
 *
 * Layout rules used throughout: offset, shape and strides are in ELEMENTS;
 * element [i0,..,i(n-1)] lives at storage->data + (offset + sum(ik * strides[k]))
 * * element size. Entries of shape/strides past ndim are kept at zero.
 *
 * Device memory goes through device.h; in a build without CUDA the stand-ins
 * at the end of this file answer VQC_ENODEVICE. Every public function checks
 * its arguments (NULL, ndim range, negative sizes, dims out of range, views
 * reaching outside their storage) and records a message with vqc_error. */
#include "vqc/tensor.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "vqc/version.h"

/* ======================================================================
 * dtypes (generated from VQC_DTYPE_LIST)
 * ====================================================================== */

static bool dtype_valid(vqc_dtype dt) {
  return (unsigned)dt < (unsigned)VQC_DTYPE_COUNT;
}

size_t vqc_dtype_size(vqc_dtype dt) {
  switch (dt) {
#define X(name, ctype, size, code, str) case VQC_##name: return size;
    VQC_DTYPE_LIST(X)
#undef X
    default: return 0;
  }
}

const char *vqc_dtype_name(vqc_dtype dt) {
  switch (dt) {
#define X(name, ctype, size, code, str) case VQC_##name: return str;
    VQC_DTYPE_LIST(X)
#undef X
    default: return "?";
  }
}

uint8_t vqc_dtype_digest_code(vqc_dtype dt) {
  switch (dt) {
#define X(name, ctype, size, code, str) case VQC_##name: return code;
    VQC_DTYPE_LIST(X)
#undef X
    default: return 0;
  }
}

vqc_status vqc_dtype_from_name(const char *name, vqc_dtype *out) {
  if (name == NULL || out == NULL)
    return vqc_error(VQC_EINVAL, "vqc_dtype_from_name: name or out is NULL");
  for (int i = 0; i < VQC_DTYPE_COUNT; i++) {
    if (strcmp(name, vqc_dtype_name((vqc_dtype)i)) == 0) {
      *out = (vqc_dtype)i;
      return VQC_OK;
    }
  }
  return vqc_error(VQC_EINVAL,
                   "unknown dtype \"%s\" (expected float32, float64, int32, "
                   "int64 or uint8)",
                   name);
}

/* ======================================================================
 * storage: reference-counted bytes
 * ====================================================================== */

/* Process-wide id source; ids start at 1 so 0 can mean "no storage". */
static uint64_t next_storage_id;

static uint64_t new_storage_id(void) {
  return __atomic_add_fetch(&next_storage_id, 1, __ATOMIC_RELAXED);
}

/* New owned storage of nbytes on `device` with one reference (the caller's).
 * Zero-byte requests still get a one-byte block, so every live storage has a
 * non-NULL address and device requests still report a missing device. */
static vqc_status storage_alloc(vqc_storage **out, size_t nbytes,
                                vqc_device device, bool zero) {
  *out = NULL;
  vqc_status st = VQC_OK;
  vqc_storage *s = calloc(1, sizeof *s);
  if (s == NULL)
    return vqc_error(VQC_ENOMEM, "out of memory for a tensor storage header");
  size_t alloc = nbytes > 0 ? nbytes : 1;
  if (device == VQC_DEVICE_CPU) {
    s->data = zero ? calloc(1, alloc) : malloc(alloc);
    if (s->data == NULL) {
      st = vqc_error(VQC_ENOMEM, "could not allocate %zu bytes of tensor storage",
                     nbytes);
      goto fail;
    }
  } else {
    st = vqc_device_alloc(&s->data, alloc);
    if (st != VQC_OK) goto fail;
    if (zero) {
      st = vqc_device_memset_zero(s->data, alloc);
      if (st != VQC_OK) goto fail;
    }
  }
  s->nbytes = nbytes;
  s->device = device;
  s->owned = true;
  s->refs = 1;
  s->id = new_storage_id();
  *out = s;
  return VQC_OK;

fail:
  if (device == VQC_DEVICE_CPU)
    free(s->data);
  else
    vqc_device_free(s->data);
  free(s);
  return st;
}

/* Storage over caller memory (CPU); never frees `data`. */
static vqc_status storage_borrow(vqc_storage **out, void *data, size_t nbytes) {
  *out = NULL;
  vqc_storage *s = calloc(1, sizeof *s);
  if (s == NULL)
    return vqc_error(VQC_ENOMEM, "out of memory for a tensor storage header");
  s->data = data;
  s->nbytes = nbytes;
  s->device = VQC_DEVICE_CPU;
  s->owned = false;
  s->refs = 1;
  s->id = new_storage_id();
  *out = s;
  return VQC_OK;
}

static void storage_retain(vqc_storage *s) {
  if (s != NULL) __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
}

/* Drops one reference; the last one frees owned data and the header.
 * ACQ_REL so that the thread freeing sees every other thread's writes. */
static void storage_release(vqc_storage *s) {
  if (s == NULL) return;
  if (__atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
  if (s->owned) {
    if (s->device == VQC_DEVICE_CUDA)
      vqc_device_free(s->data);
    else
      free(s->data);
  }
  free(s);
}

/* ======================================================================
 * validation helpers (each records a message naming the function)
 * ====================================================================== */

/* Writes "(a, b, c)" for n entries of v; "()" for none. */
static void format_dims(char *buf, size_t n, int ndim, const int64_t *v) {
  if (buf == NULL || n == 0) return;
  size_t pos = 0;
  buf[0] = '\0';
  int w = snprintf(buf, n, "(");
  if (w > 0) pos = (size_t)w;
  for (int d = 0; d < ndim && pos < n; d++) {
    w = snprintf(buf + pos, n - pos, "%s%" PRId64, d > 0 ? ", " : "", v[d]);
    if (w < 0) return;
    pos += (size_t)w;
  }
  if (pos < n) snprintf(buf + pos, n - pos, ")");
}

/* Checks (ndim, shape) for a new tensor and returns its element count. */
static vqc_status check_shape(const char *fn, int ndim, const int64_t *shape,
                              int64_t *numel) {
  if (ndim < 0 || ndim > VQC_MAX_DIMS)
    return vqc_error(VQC_EINVAL, "%s: ndim %d is outside 0..%d", fn, ndim,
                     VQC_MAX_DIMS);
  if (ndim > 0 && shape == NULL)
    return vqc_error(VQC_EINVAL, "%s: shape is NULL for ndim %d", fn, ndim);
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < 0)
      return vqc_error(VQC_ESHAPE, "%s: dim %d has negative size %" PRId64, fn,
                       d, shape[d]);
    if (__builtin_mul_overflow(n, shape[d], &n))
      return vqc_error(VQC_ESHAPE, "%s: element count overflows int64", fn);
  }
  *numel = n;
  return VQC_OK;
}

/* Bytes for numel elements of dt, failing on size_t overflow. */
static vqc_status bytes_for(const char *fn, int64_t numel, vqc_dtype dt,
                            size_t *nbytes) {
  if ((uint64_t)numel > SIZE_MAX ||
      __builtin_mul_overflow((size_t)numel, vqc_dtype_size(dt), nbytes))
    return vqc_error(VQC_ESHAPE, "%s: %" PRId64 " elements of %s do not fit in "
                     "memory", fn, numel, vqc_dtype_name(dt));
  return VQC_OK;
}

static int64_t numel_of(const vqc_tensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

/* Checks that a live tensor is well formed and that every element it names
 * lies inside its storage. The public struct can be filled by hand, so this
 * guards every operation that reads or writes through a tensor. */
static vqc_status check_tensor(const char *fn, const char *name,
                               const vqc_tensor *t) {
  if (t == NULL) return vqc_error(VQC_EINVAL, "%s: %s is NULL", fn, name);
  if (t->storage == NULL)
    return vqc_error(VQC_EINVAL, "%s: %s is an empty tensor (freed, zeroed or "
                     "never created)", fn, name);
  if (!dtype_valid(t->dtype))
    return vqc_error(VQC_EDTYPE, "%s: %s has unknown dtype %d", fn, name,
                     (int)t->dtype);
  if (t->ndim < 0 || t->ndim > VQC_MAX_DIMS)
    return vqc_error(VQC_EINVAL, "%s: %s has ndim %d outside 0..%d", fn, name,
                     t->ndim, VQC_MAX_DIMS);
  int64_t numel;
  VQC_TRY(check_shape(fn, t->ndim, t->shape, &numel));
  if (numel == 0) return VQC_OK; /* names no element: any offset is fine */

  /* Smallest and largest element offsets reached (strides may be negative in
   * a hand-built tensor; ours never are). */
  if (t->offset > (size_t)INT64_MAX)
    return vqc_error(VQC_ESHAPE, "%s: %s has offset %zu out of range", fn,
                     name, t->offset);
  int64_t lo = (int64_t)t->offset, hi = lo;
  for (int d = 0; d < t->ndim; d++) {
    int64_t span; /* distance from index 0 to the last index along d */
    bool overflow = __builtin_mul_overflow(t->shape[d] - 1, t->strides[d], &span);
    if (!overflow && span < 0) overflow = __builtin_add_overflow(lo, span, &lo);
    if (!overflow && span > 0) overflow = __builtin_add_overflow(hi, span, &hi);
    if (overflow)
      return vqc_error(VQC_ESHAPE, "%s: %s has strides that overflow", fn,
                       name);
  }
  size_t capacity = t->storage->nbytes / vqc_dtype_size(t->dtype);
  if (lo < 0 || (uint64_t)hi >= capacity) {
    char shp[96], str[96];
    format_dims(shp, sizeof shp, t->ndim, t->shape);
    format_dims(str, sizeof str, t->ndim, t->strides);
    return vqc_error(VQC_ESHAPE,
                     "%s: %s (shape %s, strides %s, offset %zu) reaches "
                     "elements %" PRId64 "..%" PRId64
                     " outside its storage of %zu elements",
                     fn, name, shp, str, t->offset, lo, hi, capacity);
  }
  return VQC_OK;
}

/* Common start of every function with an out tensor: out must be a distinct,
 * writable tensor; it is zeroed so that it is safe to free on any failure. */
static vqc_status begin_out(const char *fn, const vqc_tensor *in,
                            vqc_tensor *out) {
  if (out == NULL) return vqc_error(VQC_EINVAL, "%s: out is NULL", fn);
  if (out == in)
    return vqc_error(VQC_EINVAL, "%s: out must be a different tensor from the "
                     "input (each holds its own reference)", fn);
  memset(out, 0, sizeof *out);
  return VQC_OK;
}

/* Row-major contiguous strides for (ndim, shape) into strides. */
static void contiguous_strides(int ndim, const int64_t *shape,
                               int64_t *strides) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    strides[d] = s;
    s *= shape[d];
  }
}

/* ======================================================================
 * creation and lifetime
 * ====================================================================== */

static vqc_status new_tensor(const char *fn, vqc_tensor *out, vqc_dtype dt,
                             int ndim, const int64_t *shape,
                             vqc_device device, bool zero) {
  VQC_TRY(begin_out(fn, NULL, out));
  if (!dtype_valid(dt))
    return vqc_error(VQC_EDTYPE, "%s: unknown dtype %d", fn, (int)dt);
  if (device != VQC_DEVICE_CPU && device != VQC_DEVICE_CUDA)
    return vqc_error(VQC_EINVAL, "%s: unknown device %d", fn, (int)device);
  int64_t numel;
  size_t nbytes;
  VQC_TRY(check_shape(fn, ndim, shape, &numel));
  VQC_TRY(bytes_for(fn, numel, dt, &nbytes));
  vqc_storage *s;
  VQC_TRY(storage_alloc(&s, nbytes, device, zero));
  out->storage = s;
  out->offset = 0;
  out->dtype = dt;
  out->ndim = ndim;
  for (int d = 0; d < ndim; d++) out->shape[d] = shape[d];
  contiguous_strides(ndim, out->shape, out->strides);
  return VQC_OK;
}

vqc_status vqc_tensor_empty(vqc_tensor *out, vqc_dtype dt, int ndim,
                            const int64_t *shape, vqc_device device) {
  return new_tensor(__func__, out, dt, ndim, shape, device, false);
}

vqc_status vqc_tensor_zeros(vqc_tensor *out, vqc_dtype dt, int ndim,
                            const int64_t *shape, vqc_device device) {
  return new_tensor(__func__, out, dt, ndim, shape, device, true);
}

vqc_status vqc_tensor_wrap(vqc_tensor *out, void *data, vqc_dtype dt, int ndim,
                           const int64_t *shape) {
  VQC_TRY(begin_out(__func__, NULL, out));
  if (!dtype_valid(dt))
    return vqc_error(VQC_EDTYPE, "%s: unknown dtype %d", __func__, (int)dt);
  int64_t numel;
  size_t nbytes;
  VQC_TRY(check_shape(__func__, ndim, shape, &numel));
  VQC_TRY(bytes_for(__func__, numel, dt, &nbytes));
  if (data == NULL && nbytes > 0)
    return vqc_error(VQC_EINVAL, "%s: data is NULL for %zu bytes", __func__,
                     nbytes);
  vqc_storage *s;
  VQC_TRY(storage_borrow(&s, data, nbytes));
  out->storage = s;
  out->dtype = dt;
  out->ndim = ndim;
  for (int d = 0; d < ndim; d++) out->shape[d] = shape[d];
  contiguous_strides(ndim, out->shape, out->strides);
  return VQC_OK;
}

void vqc_tensor_free(vqc_tensor *t) {
  if (t == NULL) return;
  storage_release(t->storage);
  storage_release(t->origin.storage);
  memset(t, 0, sizeof *t);
}

/* ======================================================================
 * queries
 * ====================================================================== */

int64_t vqc_tensor_numel(const vqc_tensor *t) {
  if (t == NULL || t->storage == NULL || t->ndim < 0 || t->ndim > VQC_MAX_DIMS)
    return 0;
  return numel_of(t);
}

size_t vqc_tensor_nbytes(const vqc_tensor *t) {
  if (t == NULL || !dtype_valid(t->dtype)) return 0;
  return (size_t)vqc_tensor_numel(t) * vqc_dtype_size(t->dtype);
}

/* Size-1 dims may carry any stride: they never move the address. A tensor
 * with no elements is trivially contiguous. */
static bool layout_is_contiguous(const vqc_tensor *t) {
  if (numel_of(t) == 0) return true;
  int64_t expected = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    if (t->shape[d] != 1 && t->strides[d] != expected) return false;
    expected *= t->shape[d];
  }
  return true;
}

bool vqc_tensor_is_contiguous(const vqc_tensor *t) {
  if (t == NULL || t->storage == NULL || t->ndim < 0 || t->ndim > VQC_MAX_DIMS)
    return false;
  return layout_is_contiguous(t);
}

void *vqc_tensor_data_untracked(const vqc_tensor *t) {
  if (t == NULL || t->storage == NULL || t->storage->data == NULL) return NULL;
  return (char *)t->storage->data + t->offset * vqc_dtype_size(t->dtype);
}

void *vqc_tensor_data(const vqc_tensor *t) {
  vqc_tensor_note_access(t);
  return vqc_tensor_data_untracked(t);
}

/* Relaxed: the count is a "has it moved" signal read by the same rank's
 * checker after the fact, not a synchronisation point. */
void vqc_tensor_note_access(const vqc_tensor *t) {
  if (t != NULL && t->storage != NULL)
    __atomic_add_fetch(&t->storage->accesses, 1, __ATOMIC_RELAXED);
}

uint64_t vqc_tensor_access_count(const vqc_tensor *t) {
  if (t == NULL || t->storage == NULL) return 0;
  return __atomic_load_n(&t->storage->accesses, __ATOMIC_RELAXED);
}

bool vqc_tensor_same_storage(const vqc_tensor *a, const vqc_tensor *b) {
  return a != NULL && b != NULL && a->storage != NULL &&
         a->storage == b->storage;
}

bool vqc_tensor_has_origin(const vqc_tensor *t) {
  return t != NULL && t->origin.storage != NULL;
}

void vqc_tensor_shape_str(const vqc_tensor *t, char *buf, size_t n) {
  if (buf == NULL || n == 0) return;
  if (t == NULL || t->storage == NULL || t->ndim < 0 ||
      t->ndim > VQC_MAX_DIMS) {
    snprintf(buf, n, "(empty)");
    return;
  }
  format_dims(buf, n, t->ndim, t->shape);
}

/* ======================================================================
 * views
 * ====================================================================== */

/* Starts a view of t in *v: same storage, offset, dtype and layout, no origin
 * (origin belongs to the copy itself, not to views of it). The caller adjusts
 * the layout and then publishes it with finish_view. */
static vqc_status begin_view(const char *fn, const vqc_tensor *t,
                             vqc_tensor *out, vqc_tensor *v) {
  VQC_TRY(begin_out(fn, t, out));
  VQC_TRY(check_tensor(fn, "t", t));
  memset(v, 0, sizeof *v);
  v->storage = t->storage;
  v->offset = t->offset;
  v->dtype = t->dtype;
  v->ndim = t->ndim;
  for (int d = 0; d < t->ndim; d++) {
    v->shape[d] = t->shape[d];
    v->strides[d] = t->strides[d];
  }
  return VQC_OK;
}

static vqc_status finish_view(vqc_tensor *v, vqc_tensor *out) {
  storage_retain(v->storage);
  *out = *v;
  return VQC_OK;
}

vqc_status vqc_tensor_view(const vqc_tensor *t, vqc_tensor *out) {
  vqc_tensor v;
  VQC_TRY(begin_view(__func__, t, out, &v));
  return finish_view(&v, out);
}

vqc_status vqc_tensor_transpose(const vqc_tensor *t, int dim0, int dim1,
                                vqc_tensor *out) {
  vqc_tensor v;
  VQC_TRY(begin_view(__func__, t, out, &v));
  if (dim0 < 0 || dim0 >= t->ndim || dim1 < 0 || dim1 >= t->ndim)
    return vqc_error(VQC_EINVAL,
                     "%s: dims (%d, %d) out of range for a %d-dim tensor "
                     "(valid: 0..%d)",
                     __func__, dim0, dim1, t->ndim, t->ndim - 1);
  int64_t s = v.shape[dim0], st = v.strides[dim0];
  v.shape[dim0] = v.shape[dim1];
  v.strides[dim0] = v.strides[dim1];
  v.shape[dim1] = s;
  v.strides[dim1] = st;
  return finish_view(&v, out);
}

vqc_status vqc_tensor_slice(const vqc_tensor *t, int dim, int64_t start,
                            int64_t stop, int64_t step, vqc_tensor *out) {
  vqc_tensor v;
  VQC_TRY(begin_view(__func__, t, out, &v));
  if (dim < 0 || dim >= t->ndim)
    return vqc_error(VQC_EINVAL, "%s: dim %d out of range for a %d-dim tensor",
                     __func__, dim, t->ndim);
  if (step < 1)
    return vqc_error(VQC_EINVAL, "%s: step %" PRId64 " must be >= 1", __func__,
                     step);
  if (start < 0 || start > stop || stop > t->shape[dim])
    return vqc_error(VQC_EINVAL,
                     "%s: [%" PRId64 ", %" PRId64 ") is not a valid range of "
                     "dim %d of size %" PRId64 " (need 0 <= start <= stop <= "
                     "size)",
                     __func__, start, stop, dim, t->shape[dim]);
  int64_t len = (stop - start + step - 1) / step;
  if (len > 0) {
    /* start * stride stays inside the checked storage because start < size */
    int64_t off = (int64_t)v.offset + start * v.strides[dim];
    v.offset = (size_t)off;
  }
  v.shape[dim] = len;
  v.strides[dim] *= step;
  return finish_view(&v, out);
}

/* Strides that let (new_ndim, new_shape) view the same elements as t in the
 * same row-major order, or false when no such strides exist.
 *
 * Idea: ignoring size-1 dims, t's dims fall into "blocks" of consecutive dims
 * that step through memory like one dim (dim d and the next non-1 dim e merge
 * when strides[d] == strides[e] * shape[e]). A block of n elements with
 * innermost stride s is a plain run with stride s. The new shape is a view
 * exactly when its non-1 dims split into consecutive groups, one per block,
 * whose sizes multiply to the block's n; inside a group, strides are s times
 * the product of the group's later dims. Size-1 new dims take any stride. */
static bool view_strides(const vqc_tensor *t, int new_ndim,
                         const int64_t *new_shape, int64_t *new_strides) {
  int64_t block_n[VQC_MAX_DIMS], block_s[VQC_MAX_DIMS];
  int nblocks = 0;
  int64_t prev_stride = 0;
  for (int d = 0; d < t->ndim; d++) {
    if (t->shape[d] == 1) continue;
    if (nblocks > 0 && prev_stride == t->strides[d] * t->shape[d]) {
      block_n[nblocks - 1] *= t->shape[d];
      block_s[nblocks - 1] = t->strides[d];
    } else {
      block_n[nblocks] = t->shape[d];
      block_s[nblocks] = t->strides[d];
      nblocks++;
    }
    prev_stride = t->strides[d];
  }

  /* Walk the new dims from the innermost, filling the last block first. */
  int b = nblocks - 1;
  int64_t inner = 1; /* product of new dims already placed in block b */
  for (int d = new_ndim - 1; d >= 0; d--) {
    if (new_shape[d] == 1) {
      new_strides[d] = d + 1 < new_ndim ? new_strides[d + 1] * new_shape[d + 1]
                                        : 1;
      continue;
    }
    if (b < 0) return false;
    new_strides[d] = block_s[b] * inner;
    inner *= new_shape[d];
    if (inner == block_n[b]) {
      b--;
      inner = 1;
    } else if (inner > block_n[b]) {
      return false; /* this dim would straddle two blocks */
    }
  }
  return b < 0 && inner == 1;
}

vqc_status vqc_tensor_reshape(const vqc_tensor *t, int ndim,
                              const int64_t *shape, vqc_tensor *out) {
  vqc_tensor v;
  VQC_TRY(begin_view(__func__, t, out, &v));
  if (ndim < 0 || ndim > VQC_MAX_DIMS)
    return vqc_error(VQC_EINVAL, "%s: ndim %d is outside 0..%d", __func__, ndim,
                     VQC_MAX_DIMS);
  if (ndim > 0 && shape == NULL)
    return vqc_error(VQC_EINVAL, "%s: shape is NULL for ndim %d", __func__,
                     ndim);

  /* Resolve the one allowed -1 from the element count. */
  int64_t new_shape[VQC_MAX_DIMS] = {0};
  int infer = -1;
  int64_t known = 1;
  for (int d = 0; d < ndim; d++) {
    new_shape[d] = shape[d];
    if (shape[d] == -1) {
      if (infer >= 0)
        return vqc_error(VQC_ESHAPE, "%s: only one dim may be -1 (dims %d and "
                         "%d are)", __func__, infer, d);
      infer = d;
    } else if (shape[d] < 0) {
      return vqc_error(VQC_ESHAPE, "%s: dim %d has negative size %" PRId64,
                       __func__, d, shape[d]);
    } else if (__builtin_mul_overflow(known, shape[d], &known)) {
      return vqc_error(VQC_ESHAPE, "%s: element count overflows int64",
                       __func__);
    }
  }
  int64_t numel = numel_of(t);
  char from[96], to[96];
  format_dims(from, sizeof from, t->ndim, t->shape);
  if (infer >= 0) {
    if (known == 0 || numel % known != 0) {
      format_dims(to, sizeof to, ndim, shape);
      return vqc_error(VQC_ESHAPE, "%s: cannot infer the -1 dim of %s for %s "
                       "(%" PRId64 " elements)", __func__, to, from, numel);
    }
    new_shape[infer] = numel / known;
    known = numel;
  }
  format_dims(to, sizeof to, ndim, new_shape);
  if (known != numel)
    return vqc_error(VQC_ESHAPE, "%s: cannot reshape %s (%" PRId64 " elements) "
                     "into %s (%" PRId64 " elements)",
                     __func__, from, numel, to, known);

  int64_t new_strides[VQC_MAX_DIMS] = {0};
  if (numel == 0) {
    contiguous_strides(ndim, new_shape, new_strides); /* no element to reach */
  } else if (!view_strides(t, ndim, new_shape, new_strides)) {
    char str[96];
    format_dims(str, sizeof str, t->ndim, t->strides);
    return vqc_error(VQC_ESHAPE, "%s: a tensor of shape %s with strides %s "
                     "cannot be viewed as %s without a copy; call "
                     "vqc_tensor_contiguous first and reshape the copy",
                     __func__, from, str, to);
  }
  v.ndim = ndim;
  for (int d = 0; d < VQC_MAX_DIMS; d++) {
    v.shape[d] = d < ndim ? new_shape[d] : 0;
    v.strides[d] = d < ndim ? new_strides[d] : 0;
  }
  return finish_view(&v, out);
}

/* ======================================================================
 * copies
 * ====================================================================== */

/* Copies n bytes between any two devices. memmove on the CPU, so copying a
 * tensor onto itself is harmless. */
static vqc_status copy_bytes(void *dst, vqc_device dst_dev, const void *src,
                             vqc_device src_dev, size_t n) {
  if (dst_dev == VQC_DEVICE_CPU && src_dev == VQC_DEVICE_CPU) {
    memmove(dst, src, n);
    return VQC_OK;
  }
  if (dst_dev == VQC_DEVICE_CPU) return vqc_device_memcpy_d2h(dst, src, n);
  if (src_dev == VQC_DEVICE_CPU) return vqc_device_memcpy_h2d(dst, src, n);
  return vqc_device_memcpy_d2d(dst, src, n);
}

/* dst <- src element by element; both validated, same dtype and shape.
 * Contiguous pairs are one block copy; otherwise the walk goes over every
 * index of the outer dims and copies the innermost dim as one run when both
 * sides are unit-stride there, else element by element (element-size copies
 * work for every dtype). Overlapping dst and src other than identical views
 * give an order-dependent result, as in torch. */
static vqc_status strided_copy(const vqc_tensor *dst, const vqc_tensor *src) {
  int64_t numel = numel_of(src);
  if (numel == 0) return VQC_OK;
  const ptrdiff_t es = (ptrdiff_t)vqc_dtype_size(src->dtype);
  /* Untracked: the public callers count the read of src themselves. */
  char *d = vqc_tensor_data_untracked(dst);
  const char *s = vqc_tensor_data_untracked(src);
  vqc_device dd = dst->storage->device, sd = src->storage->device;
  if (layout_is_contiguous(dst) && layout_is_contiguous(src))
    return copy_bytes(d, dd, s, sd, (size_t)numel * (size_t)es);

  const int nd = src->ndim; /* >= 1 here: a scalar is always contiguous */
  const int64_t run = src->shape[nd - 1];
  const int64_t dstep = dst->strides[nd - 1], sstep = src->strides[nd - 1];
  const bool unit_run = dstep == 1 && sstep == 1;
  int64_t idx[VQC_MAX_DIMS] = {0}; /* index over dims 0..nd-2 */
  for (int64_t r = 0; r < numel / run; r++) {
    int64_t doff = 0, soff = 0;
    for (int k = 0; k < nd - 1; k++) {
      doff += idx[k] * dst->strides[k];
      soff += idx[k] * src->strides[k];
    }
    if (unit_run) {
      VQC_TRY(copy_bytes(d + doff * es, dd, s + soff * es, sd,
                         (size_t)(run * es)));
    } else {
      for (int64_t i = 0; i < run; i++)
        VQC_TRY(copy_bytes(d + (doff + i * dstep) * es, dd,
                           s + (soff + i * sstep) * es, sd, (size_t)es));
    }
    for (int k = nd - 2; k >= 0; k--) { /* odometer step, last dim fastest */
      if (++idx[k] < src->shape[k]) break;
      idx[k] = 0;
    }
  }
  return VQC_OK;
}

/* Checks that dst and src can be copied into one another. */
static vqc_status check_copy_pair(const char *fn, const vqc_tensor *dst,
                                  const vqc_tensor *src) {
  VQC_TRY(check_tensor(fn, "dst", dst));
  VQC_TRY(check_tensor(fn, "src", src));
  if (dst->dtype != src->dtype)
    return vqc_error(VQC_EDTYPE, "%s: dtypes differ (dst %s, src %s)", fn,
                     vqc_dtype_name(dst->dtype), vqc_dtype_name(src->dtype));
  bool same = dst->ndim == src->ndim;
  for (int d = 0; same && d < dst->ndim; d++)
    same = dst->shape[d] == src->shape[d];
  if (!same) {
    char a[96], b[96];
    format_dims(a, sizeof a, dst->ndim, dst->shape);
    format_dims(b, sizeof b, src->ndim, src->shape);
    return vqc_error(VQC_ESHAPE, "%s: shapes differ (dst %s, src %s)", fn, a,
                     b);
  }
  return VQC_OK;
}

vqc_status vqc_tensor_copy(vqc_tensor *dst, const vqc_tensor *src) {
  VQC_TRY(check_copy_pair(__func__, dst, src));
  vqc_tensor_note_access(src);
  return strided_copy(dst, src);
}

/* A fresh contiguous tensor on `device` holding t's values. */
static vqc_status copy_new(const char *fn, const vqc_tensor *t,
                           vqc_device device, vqc_tensor *out) {
  vqc_tensor c;
  VQC_TRY(new_tensor(fn, &c, t->dtype, t->ndim, t->shape, device, false));
  vqc_status st = strided_copy(&c, t);
  if (st != VQC_OK) {
    vqc_tensor_free(&c);
    return st;
  }
  *out = c;
  return VQC_OK;
}

vqc_status vqc_tensor_contiguous(const vqc_tensor *t, vqc_tensor *out) {
  VQC_TRY(begin_out(__func__, t, out));
  VQC_TRY(check_tensor(__func__, "t", t));
  if (layout_is_contiguous(t)) return vqc_tensor_view(t, out);

  vqc_tensor_note_access(t);
  VQC_TRY(copy_new(__func__, t, t->storage->device, out));
  /* The copy keeps t's storage alive through origin, so the link stays valid
   * even if every view of t is freed first. */
  storage_retain(t->storage);
  out->origin.storage = t->storage;
  out->origin.offset = t->offset;
  out->origin.ndim = t->ndim;
  for (int d = 0; d < t->ndim; d++) {
    out->origin.shape[d] = t->shape[d];
    out->origin.strides[d] = t->strides[d];
  }
  return VQC_OK;
}

vqc_status vqc_tensor_to(const vqc_tensor *t, vqc_device device,
                         vqc_tensor *out) {
  VQC_TRY(begin_out(__func__, t, out));
  VQC_TRY(check_tensor(__func__, "t", t));
  vqc_tensor_note_access(t);
  return copy_new(__func__, t, device, out);
}

/* The origin of `copy` as a tensor that borrows the copy's reference (the
 * caller must not free it). */
static vqc_status origin_as_tensor(const char *fn, const vqc_tensor *copy,
                                   vqc_tensor *o) {
  VQC_TRY(check_tensor(fn, "copy", copy));
  if (copy->origin.storage == NULL)
    return vqc_error(VQC_EINVAL, "%s: copy has no origin (it is not a "
                     "contiguous copy of a strided tensor)", fn);
  memset(o, 0, sizeof *o);
  o->storage = copy->origin.storage;
  o->offset = copy->origin.offset;
  o->dtype = copy->dtype; /* a contiguous copy keeps its source's dtype */
  o->ndim = copy->origin.ndim;
  for (int d = 0; d < o->ndim && d < VQC_MAX_DIMS; d++) {
    o->shape[d] = copy->origin.shape[d];
    o->strides[d] = copy->origin.strides[d];
  }
  return check_tensor(fn, "copy's origin", o);
}

vqc_status vqc_tensor_copy_to_origin(const vqc_tensor *copy) {
  vqc_tensor o;
  VQC_TRY(origin_as_tensor(__func__, copy, &o));
  VQC_TRY(check_copy_pair(__func__, &o, copy));
  vqc_tensor_note_access(copy); /* the write-back uses the copy's result */
  return strided_copy(&o, copy);
}

vqc_status vqc_tensor_origin_view(const vqc_tensor *copy, vqc_dtype dt,
                                  vqc_tensor *out) {
  VQC_TRY(begin_out(__func__, copy, out));
  vqc_tensor o;
  VQC_TRY(origin_as_tensor(__func__, copy, &o));
  /* The origin shares the copy's dtype; dt is checked against it so a caller
   * who expected another dtype hears about it instead of reinterpreting. */
  if (dt != copy->dtype)
    return vqc_error(VQC_EDTYPE, "%s: asked for %s but the origin holds %s",
                     __func__, vqc_dtype_name(dt),
                     vqc_dtype_name(copy->dtype));
  storage_retain(o.storage);
  *out = o;
  return VQC_OK;
}

/* ======================================================================
 * element access
 * ====================================================================== */

/* Address of t[idx] on the CPU, or NULL after recording why not. */
static void *element_address(const char *fn, const vqc_tensor *t,
                             const int64_t *idx) {
  if (check_tensor(fn, "t", t) != VQC_OK) return NULL;
  if (t->storage->device != VQC_DEVICE_CPU) {
    vqc_error(VQC_EINVAL, "%s: t is in device memory; copy it to the CPU with "
              "vqc_tensor_to first", fn);
    return NULL;
  }
  if (t->ndim > 0 && idx == NULL) {
    vqc_error(VQC_EINVAL, "%s: idx is NULL for a %d-dim tensor", fn, t->ndim);
    return NULL;
  }
  int64_t off = (int64_t)t->offset;
  for (int d = 0; d < t->ndim; d++) {
    if (idx[d] < 0 || idx[d] >= t->shape[d]) {
      vqc_error(VQC_EINVAL, "%s: index %" PRId64 " out of range for dim %d of "
                "size %" PRId64, fn, idx[d], d, t->shape[d]);
      return NULL;
    }
    off += idx[d] * t->strides[d];
  }
  return (char *)t->storage->data + off * (int64_t)vqc_dtype_size(t->dtype);
}

/* Returns NaN (with a message in vqc_last_error) for a bad tensor or index.
 * memcpy instead of a typed load: wrapped caller memory may be unaligned. */
double vqc_tensor_get(const vqc_tensor *t, const int64_t *idx) {
  const void *p = element_address(__func__, t, idx);
  if (p == NULL) return NAN;
  vqc_tensor_note_access(t);
  switch (t->dtype) {
#define X(name, ctype, size, code, str) \
  case VQC_##name: {                    \
    ctype v;                            \
    memcpy(&v, p, sizeof v);            \
    return (double)v;                   \
  }
    VQC_DTYPE_LIST(X)
#undef X
    default: return NAN; /* unreachable: dtype checked above */
  }
}

/* Integer dtypes truncate toward zero and saturate at their range; NaN
 * becomes 0. (A plain C cast of an out-of-range double is undefined.) */
static int64_t saturate(double v, double lo, double hi) {
  if (isnan(v)) return 0;
  if (v <= lo) return (int64_t)lo;
  if (v >= hi) return (int64_t)hi;
  return (int64_t)v;
}

void vqc_tensor_set(vqc_tensor *t, const int64_t *idx, double v) {
  void *p = element_address(__func__, t, idx);
  if (p == NULL) return;
  switch (t->dtype) {
    case VQC_F32: { float x = (float)v; memcpy(p, &x, sizeof x); break; }
    case VQC_F64: { memcpy(p, &v, sizeof v); break; }
    case VQC_I32: {
      int32_t x = (int32_t)saturate(v, INT32_MIN, INT32_MAX);
      memcpy(p, &x, sizeof x);
      break;
    }
    case VQC_I64: {
      /* 2^63 is not an int64; values at or above it saturate to INT64_MAX. */
      int64_t x;
      if (isnan(v)) x = 0;
      else if (v >= 9223372036854775808.0) x = INT64_MAX;
      else if (v <= -9223372036854775808.0) x = INT64_MIN;
      else x = (int64_t)v;
      memcpy(p, &x, sizeof x);
      break;
    }
    case VQC_U8: {
      uint8_t x = (uint8_t)saturate(v, 0, UINT8_MAX);
      memcpy(p, &x, sizeof x);
      break;
    }
    default: break; /* unreachable: dtype checked above */
  }
}

/* ======================================================================
 * device support in a build without CUDA: every request says so
 * ====================================================================== */

#if !VQC_WITH_CUDA
static vqc_status no_cuda(const char *what) {
  return vqc_error(VQC_ENODEVICE, "%s: this build has no CUDA "
                   "(VQC_WITH_CUDA=0); reconfigure with the CUDA toolkit "
                   "(CUDAToolkit_ROOT) to use device storage", what);
}

bool vqc_cuda_available(void) { return false; }

vqc_status vqc_device_alloc(void **dev, size_t nbytes) {
  if (dev != NULL) *dev = NULL;
  return no_cuda("device storage");
}

void vqc_device_free(void *dev) {}

vqc_status vqc_device_memset_zero(void *dev, size_t nbytes) {
  return no_cuda("device memset");
}

vqc_status vqc_device_memcpy_h2d(void *dev, const void *host, size_t nbytes) {
  return no_cuda("host-to-device copy");
}

vqc_status vqc_device_memcpy_d2h(void *host, const void *dev, size_t nbytes) {
  return no_cuda("device-to-host copy");
}

vqc_status vqc_device_memcpy_d2d(void *dst_dev, const void *src_dev,
                                 size_t nbytes) {
  return no_cuda("device-to-device copy");
}
#endif
