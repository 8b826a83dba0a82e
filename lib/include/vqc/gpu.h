/* gpu.h: the CUDA kernels (the .cu files of kernels/) behind plain C host
 * wrappers.
 *
 * Each kernel has a CPU twin in lib/ that is its oracle (tests/gpu compare
 * them on fresh random inputs):
 *   digest        vqc_digest_buffer (digest.c)       bit-identical
 *   FSQ           vqc_fsq_quantize (fsq.c)           see "FSQ and tanh" below
 *   nearest code  vqc_vq_nearest (vq_codebook.c)     bit-identical distances
 *   statistics    vq_ema.c step 1                    bit-identical
 *   EMA, smoothing vq_ema.c steps 3-4, vq_renormalize bit-identical
 *
 * These are primitives: the VQ step that strings them together (nearest
 * code, gather, statistics, the collectives, lerp, renormalisation, with
 * k-means init and dead-code expiry on the host) is vqc_vq_device_forward
 * (vqc/vq.h), beside its CPU twin vqc_vq_forward.
 *
 * The pointer checks, errors and the stream policy every wrapper follows,
 * and the kernels below the quantizers (digest, rank-order sum, fill,
 * synchronize), are in vqc/gpu_base.h, which this header includes.
 *
 * FSQ and tanh. The kernel compiles the CPU's correctly rounded tanh
 * (vqc_tanh_exact, lib/src/quant/tanh_exact.h; no fast-math for these
 * files, which CMake enforces): a cheap tanhf screen decides the elements whose bounded
 * value lies farther than 2^-18 * (half_l + 1) from a rounding boundary or
 * from 0, and the others ("refined" elements) take the exact tanh. The codes
 * therefore equal the CPU's bit for bit (only checked on the CPU emulation
 * so far: no device has run it). */
#ifndef VQC_GPU_H
#define VQC_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vqc/comm.h"
#include "vqc/fsq.h"
#include "vqc/gpu_base.h"
#include "vqc/status.h"
#include "vqc/tensor.h"
#include "vqc/vq.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- FSQ (vqc/fsq.h) */

/* vqc_fsq_quantize on the device: z (M, C*d) -> out (M, C*d) and, when not
 * NULL, indices (M, C) int32. out may equal z. A NaN in z is VQC_EINVAL
 * naming the first one (row-major), as on the CPU; out and indices are then
 * unspecified. *refined (host, may be NULL) receives how many elements took
 * the double-precision tanh (see "FSQ and tanh" above). */
vqc_status vqc_gpu_fsq_quantize(const vqc_fsq *q, const float *z, int64_t M,
                                float *out, int32_t *indices,
                                int64_t *refined);

/* ---- VQ codebook (vqc/vq.h) */

/* out[i] = the squared norm of row i of A (n, D): the sequential fmaf chain
 * over d that vqc_vq_nearest defines. */
vqc_status vqc_gpu_vq_sqnorms(const float *A, int64_t n, int64_t D,
                              float *out);

/* vqc_vq_nearest on the device: x (M, D), E (C, D) -> indices (M) int64 and,
 * when not NULL, neg_dist (M, C). Same function, bit for bit: each distance
 * is the CPU's sequence of float32 operations (fused multiply-add chains
 * over d in the same order, then (x2 + e2) + (-2 dot), clamp, sqrt), and the
 * lowest index wins ties on the final distance, so indices equal the CPU's
 * exactly, ties included. C < 2^31. */
vqc_status vqc_gpu_vq_nearest(const float *x, int64_t M, const float *E,
                              int64_t C, int64_t D, int64_t *indices,
                              float *neg_dist);

/* quantized (M, D) = E[indices] (rows of E (C, D)); VQC_EINVAL names the
 * first index outside [0, C). */
vqc_status vqc_gpu_vq_gather(const float *E, int64_t C, int64_t D,
                             const int64_t *indices, int64_t M,
                             float *quantized);

/* The EMA statistics of one batch, deterministically: counts (C) f32 and
 * sums (C, D) f32 of the rows x (M, D) assigned by indices (M) int64 to
 * each code. Equal bit for bit to vqc_vq_batch_stats (vq.h: counts as
 * float saturating at 2^24; sums in double over chunks of
 * VQC_VQ_STATS_CHUNK rows in row order, the chunks added in order, rounded
 * once) on every run: rows are grouped by code with a stable radix sort
 * (CUB), one block sums each chunk and one block per code adds its chunks,
 * so a code holding most rows is summed in parallel. No float atomics.
 * Scratch: about 24 bytes per row and 8 * D bytes per 128 rows. VQC_EINVAL
 * names the first index outside [0, C). */
vqc_status vqc_gpu_vq_stats(const float *x, int64_t M, int64_t D,
                            const int64_t *indices, int64_t C, float *counts,
                            float *sums);

/* a[i] = vqc_lerp_f32(a[i], b[i], w) for i < n (torch's lerp, bit for bit). */
vqc_status vqc_gpu_lerp(float *a, const float *b, size_t n, float w);

/* vq_renormalize: embed (C, D) = embed_avg / smoothed with
 * smoothed = (cluster_size + eps) / (tot + C*eps) * tot, tot the sum of
 * cluster_size in double in index order (one device thread, so it is the
 * CPU's sum: ~C double adds of latency), every float operation as the CPU
 * rounds it. eps is the codebook's (vqc_vq_params.eps). */
vqc_status vqc_gpu_vq_renormalize(const float *cluster_size,
                                  const float *embed_avg, int64_t C,
                                  int64_t D, double eps, float *embed);

#ifdef __cplusplus
}
#endif
#endif /* VQC_GPU_H */
