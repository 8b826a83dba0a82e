/* digest.h: tensor digests with xxHash XXH3-64.
 *
 * The tensor digest (defined once; README "Tensor digest" is the normative
 * text, reproducible from any language for a contiguous little-endian buffer):
 *
 *   leaf_i  = XXH3_64bits(bytes[i*CHUNK, min((i+1)*CHUNK, n)))   CHUNK = 65536
 *             i = 0 .. max(1, ceil(n / CHUNK)) - 1  (an empty buffer has one
 *             leaf, the hash of zero bytes)
 *   header  = "VQCD" | u8 version=1 | u8 dtype code | u8 ndim | u8 0 |
 *             ndim x i64 little-endian shape
 *   digest  = XXH3_64bits(header | leaf_0 | leaf_1 | ...)   leaves as u64 LE
 *
 * Chunks are independent, so threads and GPU blocks hash them in parallel and
 * every way of computing (one-shot, streamed in pieces of any size, chunked
 * across threads, on the GPU) gives the same value. */
#ifndef VQC_DIGEST_H
#define VQC_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "vqc/status.h"
#include "vqc/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VQC_DIGEST_CHUNK ((size_t)65536)
#define VQC_DIGEST_VERSION 1

/* Plain XXH3-64 (seed 0) of a buffer: the leaf function. */
uint64_t vqc_xxh3_64(const void *data, size_t n);

/* The tensor digest of a contiguous little-endian buffer holding `ndim` dims
 * of `shape` elements of `dt`. n must be numel * element size; VQC_EINVAL
 * otherwise. One thread. */
vqc_status vqc_digest_buffer(const void *data, size_t n, vqc_dtype dt,
                             int ndim, const int64_t *shape, uint64_t *out);

/* Same, with the leaves hashed by `nthreads` threads (>= 1). */
vqc_status vqc_digest_buffer_parallel(const void *data, size_t n, vqc_dtype dt,
                                      int ndim, const int64_t *shape,
                                      int nthreads, uint64_t *out);

/* The digest of a tensor's logical contents in row-major order, whatever its
 * strides (strided CPU tensors are walked without a full copy; device tensors
 * are digested on the device when CUDA is built, or copied to the host). */
vqc_status vqc_digest_tensor(const vqc_tensor *t, uint64_t *out);

/* Streaming form: feed the bytes in pieces of any size. The state is opaque
 * and heap-allocated: create/destroy pair, destroy accepts NULL. */
typedef struct vqc_digest_state vqc_digest_state;
vqc_status vqc_digest_create(vqc_digest_state **st, vqc_dtype dt, int ndim,
                             const int64_t *shape);
vqc_status vqc_digest_update(vqc_digest_state *st, const void *data, size_t n);
/* Fails with VQC_EINVAL if the bytes fed differ from numel * element size. */
vqc_status vqc_digest_final(vqc_digest_state *st, uint64_t *out);
void vqc_digest_destroy(vqc_digest_state *st);

/* The header bytes of the definition above; returns their length
 * (8 + 8*ndim <= 40). Exposed so tests and other writers can check it. */
size_t vqc_digest_header(vqc_dtype dt, int ndim, const int64_t *shape,
                         uint8_t out[8 + 8 * VQC_MAX_DIMS]);

/* ---- element types of other frameworks, and any strides
 *
 * The library computes with the vqc_dtype types, but a model's replicated
 * state also holds types it never computes with (PyTorch's bool buffers,
 * bfloat16 weights, float8, complex). The digest covers them by a code and
 * an element size: the bytes are hashed as they lie in memory (little-endian
 * hosts), so no value is converted. The first five codes are the vqc_dtype
 * codes. Never renumber: the codes are part of every digest (README "The
 * tensor digest" lists them).
 *
 * X(NAME, name string, digest code, element size in bytes). Names are
 * PyTorch's (torch.bfloat16 -> "bfloat16"), which numpy and ml_dtypes share.
 * complex32 is PyTorch's chalf (two float16); float4_e2m1fn_x2 packs two
 * 4-bit values in one byte, which is its element. */
#define VQC_DIGEST_TYPE_LIST(X)                    \
  X(FLOAT32,          "float32",           1,  4) \
  X(FLOAT64,          "float64",           2,  8) \
  X(INT32,            "int32",             3,  4) \
  X(INT64,            "int64",             4,  8) \
  X(UINT8,            "uint8",             5,  1) \
  X(BOOL,             "bool",              6,  1) \
  X(INT8,             "int8",              7,  1) \
  X(INT16,            "int16",             8,  2) \
  X(FLOAT16,          "float16",           9,  2) \
  X(BFLOAT16,         "bfloat16",         10,  2) \
  X(COMPLEX64,        "complex64",        11,  8) \
  X(COMPLEX128,       "complex128",       12, 16) \
  X(FLOAT8_E4M3FN,    "float8_e4m3fn",    13,  1) \
  X(FLOAT8_E5M2,      "float8_e5m2",      14,  1) \
  X(FLOAT8_E4M3FNUZ,  "float8_e4m3fnuz",  15,  1) \
  X(FLOAT8_E5M2FNUZ,  "float8_e5m2fnuz",  16,  1) \
  X(UINT16,           "uint16",           17,  2) \
  X(UINT32,           "uint32",           18,  4) \
  X(UINT64,           "uint64",           19,  8) \
  X(COMPLEX32,        "complex32",        20,  4) \
  X(FLOAT8_E8M0FNU,   "float8_e8m0fnu",   21,  1) \
  X(FLOAT4_E2M1FN_X2, "float4_e2m1fn_x2", 22,  1)

/* Dims the code-based entry points accept: as many as a trace line holds
 * (docs/trace-format.md). */
#define VQC_DIGEST_MAX_DIMS 8

typedef struct vqc_digest_type {
  const char *name; /* "bfloat16"; static storage */
  uint8_t code;     /* 1 .. 22 */
  uint8_t size;     /* bytes per element */
} vqc_digest_type;

/* The type called `name`. VQC_EINVAL for a name not in the list, with a
 * message that lists the names that are. */
vqc_status vqc_digest_type_by_name(const char *name, vqc_digest_type *out);
/* The type with digest code `code`; VQC_EINVAL for an unknown code. */
vqc_status vqc_digest_type_by_code(uint8_t code, vqc_digest_type *out);

/* The tensor digest of elements of type `code` at `data` (CPU memory,
 * element [0, ..., 0]) with `ndim` (0 .. VQC_DIGEST_MAX_DIMS) dims of
 * `shape`, whatever their layout: byte_strides[d] is the distance in bytes
 * between neighbours along dim d (0 for a broadcast dim, negative for a
 * reversed one); NULL means row-major contiguous. The digest is that of the
 * logical contents in row-major order. A contiguous layout is hashed in
 * place, its leaves by `nthreads` threads (>= 1); any other is gathered in
 * 64 KiB pieces by one thread, never copied whole. Equal to
 * vqc_digest_buffer for the vqc_dtype codes. */
vqc_status vqc_digest_strided(const void *data, uint8_t code, int ndim,
                              const int64_t *shape,
                              const int64_t *byte_strides, int nthreads,
                              uint64_t *out);

/* The root step alone: the digest of `ndim` dims of `shape` of type `code`
 * whose leaves (the XXH3-64 of each 64 KiB chunk, max(1, ceil(n / 65536)) of
 * them) were hashed elsewhere, e.g. on a GPU. VQC_EINVAL when nleaves does
 * not match the shape. */
vqc_status vqc_digest_from_leaves(uint8_t code, int ndim, const int64_t *shape,
                                  const uint64_t *leaves, size_t nleaves,
                                  uint64_t *out);

#ifdef __cplusplus
}
#endif
#endif /* VQC_DIGEST_H */
