/* vq_nearest.h: the kernels behind vqc_vq_nearest (vq.h), internal to the
 * library and visible to the unit tests and benchmarks, which compare the
 * SIMD kernels with the scalar reference and time them.
 *
 * Every kernel computes the same function, bit for bit (indices and
 * distances): d(i,c) = sqrt(max((x2_i + e2_c) + (-2 * dot_ic), 1e-8)) in
 * float32, where dot_ic, x2_i and e2_c are sequential chains of fused
 * multiply-adds over d = 0..D-1 (acc = fmaf(a[d], b[d], acc) from acc = 0),
 * and the lowest index wins ties on the final distance. fmaf rounds once
 * per step whatever the compiler's contraction flags, and a SIMD lane that
 * runs the same chain with a vector FMA rounds the same way, so the kernels
 * may vectorise across codes without changing a bit. */
#ifndef VQC_VQ_NEAREST_H
#define VQC_VQ_NEAREST_H

#include <stdbool.h>
#include <stdint.h>

#include "vqc/status.h"

/* The instruction sets a kernel is written for; the nearest search's blocks
 * are in brackets (the batch statistics, vq_stats.h, use the same choice). */
typedef enum vq_kernel {
  VQ_KERNEL_SCALAR, /* plain C, the reference (vq_codebook.c); anywhere */
  VQ_KERNEL_AVX2,   /* x86 AVX2 + FMA (6 rows x 16 codes per block) */
  VQ_KERNEL_AVX512, /* x86 AVX-512F (12 rows x 32 codes per block) */
  VQ_KERNEL_COUNT
} vq_kernel;

/* Whether this CPU (and build) can run kernel k. */
bool vq_kernel_available(vq_kernel k);
/* The fastest available kernel: the one vqc_vq_nearest uses. */
vq_kernel vq_kernel_best(void);
/* "scalar", "avx2", "avx512" ("?" outside the enum). */
const char *vq_kernel_name(vq_kernel k);

/* vqc_vq_nearest with a chosen kernel: same arguments, same checks, same
 * results. VQC_EUNSUPPORTED when k is not available here. */
vqc_status vq_nearest_with(vq_kernel k, const float *x, int64_t M,
                           const float *E, int64_t C, int64_t D,
                           int64_t *indices, float *neg_dist);

/* The scalar reference (vq_codebook.c). The arguments must already have
 * passed vq_nearest_with's checks; it cannot fail otherwise except for
 * VQC_ENOMEM. x (M, D), E (C, D), indices (M), neg_dist (M, C) or NULL. */
vqc_status vq_nearest_ref(const float *x, int64_t M, const float *E,
                          int64_t C, int64_t D, int64_t *indices,
                          float *neg_dist);

#endif /* VQC_VQ_NEAREST_H */
