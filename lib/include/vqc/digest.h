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

#ifdef __cplusplus
}
#endif
#endif /* VQC_DIGEST_H */
