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
  VQ_KERNEL_AVX512_BF16, /* AVX-512F + AVX512_BF16: a bfloat16 screen, then
                            the exact chains for the codes it leaves
                            (vq_nearest_screen.c); the statistics run the
                            AVX-512 kernel under this choice */
  VQ_KERNEL_COUNT
} vq_kernel;

/* Whether this CPU (and build) can run kernel k. */
bool vq_kernel_available(vq_kernel k);
/* The fastest available kernel: the one vqc_vq_nearest uses. */
vq_kernel vq_kernel_best(void);
/* "scalar", "avx2", "avx512", "avx512bf16" ("?" outside the enum). */
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

/* Whether this build has the SIMD kernels (x86 with GCC or Clang): the
 * AVX2 and AVX-512 ones of vq_nearest.c and the bfloat16 screen. */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define VQ_X86_KERNELS 1
#else
#define VQ_X86_KERNELS 0
#endif

#if VQ_X86_KERNELS
#include <stdlib.h>

/* n floats (or 32-bit words), 64-byte aligned for the kernels' vector
 * loads; free with free(). */
static inline float *vq_alloc_floats(int64_t n) {
  const size_t bytes = ((size_t)(n > 0 ? n : 1) * sizeof(float) + 63) &
                       ~(size_t)63; /* aligned_alloc wants a multiple */
  return aligned_alloc(64, bytes);
}

/* The screened search (vq_nearest_screen.c) on a CPU with AVX-512F and
 * AVX512_BF16, without distances: indices (M) as vq_nearest_ref's; the
 * arguments checked by vq_nearest_with. *n_apart: how many rows the screen
 * could not decide and the exact AVX-512 kernel answered (all of them when
 * the codebook is not finite or too large for its bound). */
vqc_status vq_nearest_screen(const float *x, int64_t M, const float *E,
                             int64_t C, int64_t D, int64_t *indices,
                             int64_t *n_apart);
#endif

#endif /* VQC_VQ_NEAREST_H */
