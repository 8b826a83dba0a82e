/* vq_nearest.cu: nearest-code search on the device (vqc_vq_nearest's
 * function, vq.h / vq_nearest.h), with the argmin fused into a register-
 * blocked SIMT matrix product so the (M, C) distance matrix never goes to
 * memory unless asked for. The CPU twin is vq_nearest_ref (vq_codebook.c).
 *
 * The function, bit for bit: dot_ic, x2_i = |x_i|^2 and e2_c = |E_c|^2 are
 * sequential fused multiply-add chains over d = 0..D-1 from 0
 * (acc = fmaf(a[d], b[d], acc)); d(i,c) = sqrt(max((x2_i + e2_c) +
 * (-2 * dot_ic), 1e-8)); the answer is the lowest c with the smallest d. On
 * the device each chain is one thread's accumulator advanced with
 * __fmaf_rn in the same d order (a GEMM without split-K does exactly this),
 * and the epilogue uses __fadd_rn / __fmul_rn / __fsqrt_rn, so every
 * distance has the CPU's bits and the indices are the CPU's, ties included.
 * Zero padding past D (when D is not a multiple of BK) adds fma(0, 0, acc)
 * = acc, except that it turns a -0 chain into +0; the -2 * dot term then
 * differs only in the sign of a zero, which (x2 + e2) + (-2 dot) and the
 * clamp erase, so no distance changes.
 *
 * Tiling: a block owns BM = 128 rows of x and walks the whole codebook in
 * tiles of BN = 128 codes, BK = 8 dims at a time through double-buffered
 * shared memory (one barrier per step; the next step's global loads are in
 * flight during this step's FMAs). 256 threads each hold an 8 x 8 tile of
 * accumulators: rows ty*4 + {0..3} and 64 + ty*4 + {0..3}, codes tx*4 +
 * {0..3} and 64 + tx*4 + {0..3} (ty = tid / 16, tx = tid % 16), read from
 * shared memory as float4s. After the last BK step of a code tile the
 * epilogue turns the 64 dot products into distances and updates the
 * thread's per-row best.
 *
 * The argmin, exactly. Each thread visits its codes in increasing order and
 * keeps, per row, the best distance bd (lowest code on ties: strict <), its
 * code bi, and bq, the smallest clamped squared distance seen. A new q >= bq
 * cannot win (sqrt is monotonic, so sqrt(q) >= sqrt(bq) = bd), so the
 * IEEE sqrt is taken only for q < bq: rare after the first tiles. At the
 * end the 16 threads sharing a row combine (bd, bi) pairs by the smaller
 * distance, then the lower code: each thread's pair is the lowest code with
 * its smallest distance, so the combination is the global one. A row whose
 * distances are all inf gets code 0, as on the CPU.
 *
 * x2 and e2 come from vq_sqnorms_kernel (the same chains, one thread per
 * row, rows staged through shared memory so the reads are coalesced). */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "gpu_internal.h"
#include "vqc/gpu.h"
#include "vqc/vq.h"

/* The kernels themselves (device code only; kernels/emu runs the same
 * source on the CPU). */
#include "vq_nearest_kernels.cuh"

static vqc_status launch_sqnorms(const float *A, int64_t n, int64_t D,
                                 float *out) {
  if (n == 0) return VQC_OK;
  vq_sqnorms_kernel<<<vqc_gpu_blocks(n, SQ_ROWS), SQ_ROWS>>>(A, n, D, out);
  return GPU_LAUNCH_CHECK("vq_sqnorms_kernel");
}

template <bool kVec, bool kWriteDist>
static vqc_status launch_nearest(const float *x, int64_t M, const float *E,
                                 int64_t C, int64_t D, const float *x2,
                                 const float *e2, int64_t *indices,
                                 float *neg_dist) {
  vq_nearest_kernel<kVec, kWriteDist><<<vqc_gpu_blocks(M, BM), NT>>>(
      x, M, E, (int)C, (int)D, x2, e2, indices, neg_dist);
  return GPU_LAUNCH_CHECK("vq_nearest_kernel");
}

/* ---- public wrappers */

static vqc_status check_matrix(const char *fn, const float *p, int64_t n,
                               int64_t D, const char *what) {
  if (n < 0 || D <= 0)
    return vqc_error(VQC_EINVAL, "%s: %s has shape (%lld, %lld)", fn, what,
                     (long long)n, (long long)D);
  return vqc_gpu_check_device_ptr(fn, what, p, (size_t)(n * D) * 4);
}

vqc_status vqc_gpu_vq_sqnorms(const float *A, int64_t n, int64_t D,
                              float *out) {
  VQC_TRY(vqc_gpu_require("gpu vq sqnorms"));
  VQC_TRY(check_matrix("gpu vq sqnorms", A, n, D, "A"));
  VQC_TRY(vqc_gpu_check_device_ptr("gpu vq sqnorms", "out", out,
                                   (size_t)n * 4));
  if (n / SQ_ROWS >= 2147483647)
    return vqc_error(VQC_EINVAL, "gpu vq sqnorms: %lld rows", (long long)n);
  VQC_TRY(launch_sqnorms(A, n, D, out));
  return GPU_SYNC("vq_sqnorms_kernel");
}

vqc_status vqc_gpu_vq_nearest(const float *x, int64_t M, const float *E,
                              int64_t C, int64_t D, int64_t *indices,
                              float *neg_dist) {
  const char *fn = "gpu vq nearest";
  VQC_TRY(vqc_gpu_require(fn));
  VQC_TRY(check_matrix(fn, x, M, D, "x"));
  VQC_TRY(check_matrix(fn, E, C, D, "E"));
  if (C <= 0 || C > 2147483647 - BN)
    return vqc_error(VQC_EINVAL, "%s: C = %lld codes (1 .. 2^31 - %d)", fn,
                     (long long)C, BN + 1);
  if (D > 2147483647 - BK)
    return vqc_error(VQC_EINVAL, "%s: D = %lld dims (at most 2^31 - %d)", fn,
                     (long long)D, BK + 1);
  VQC_TRY(vqc_gpu_check_device_ptr(fn, "indices", indices, (size_t)M * 8));
  if (neg_dist)
    VQC_TRY(vqc_gpu_check_device_ptr(fn, "neg_dist", neg_dist,
                                     (size_t)M * (size_t)C * 4));
  if (M / BM >= 2147483647)
    return vqc_error(VQC_EINVAL, "%s: %lld rows exceed one launch", fn,
                     (long long)M);
  if (M == 0) return VQC_OK;

  /* x2 (M) and e2 (C): scratch, freed below. */
  float *x2 = NULL, *e2 = NULL;
  vqc_status s = GPU_SCRATCH(&x2, (size_t)M * sizeof(float));
  if (s == VQC_OK) s = GPU_SCRATCH(&e2, (size_t)C * sizeof(float));
  if (s == VQC_OK) s = launch_sqnorms(x, M, D, x2);
  if (s == VQC_OK) s = launch_sqnorms(E, C, D, e2);
  if (s == VQC_OK) {
    const bool vec = D % 4 == 0 && ((uintptr_t)x & 15) == 0 &&
                     ((uintptr_t)E & 15) == 0;
    if (vec && neg_dist)
      s = launch_nearest<true, true>(x, M, E, C, D, x2, e2, indices, neg_dist);
    else if (vec)
      s = launch_nearest<true, false>(x, M, E, C, D, x2, e2, indices, NULL);
    else if (neg_dist)
      s = launch_nearest<false, true>(x, M, E, C, D, x2, e2, indices,
                                      neg_dist);
    else
      s = launch_nearest<false, false>(x, M, E, C, D, x2, e2, indices, NULL);
  }
  if (s == VQC_OK) s = GPU_SYNC("vq_nearest_kernel");
  vqc_gpu_scratch_free(x2);
  vqc_gpu_scratch_free(e2);
  return s;
}
