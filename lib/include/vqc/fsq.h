/* fsq.h: finite scalar quantization (FSQ), the CPU reference.
 *
 * Follows lucidrains/vector-quantize-pytorch 1.31.0 (spec/quantizers.md, and
 * fixtures/vqpt/README.md for the exact float32 operation order). Every
 * element of z is bounded through tanh and rounded to one of L_i levels:
 *
 * tanh below is tanh correctly rounded to float (lib/src/quant/tanh_exact.h: the
 * float nearest the true value, ties to even), not glibc's tanhf, which is
 * off by an ulp on 28% of inputs in (2^-12, 9.02); PyTorch 1.13's float tanh
 * on 0.42%. An AVX2 kernel chosen at run time gives the same bits as the
 * scalar one, and so does the GPU kernel (gpu.h).
 *
 *   default mode (eps = bound_eps, 1e-3 in the library):
 *     half_l  = float(L-1) * float32(1+eps) / 2
 *     offset  = 0.5 if L even else 0;  shift = atanhf(offset / half_l)
 *     code    = rintf(tanh(z + shift) * half_l - offset) / float(L/2)
 *               (round half to even; codes -1 .. (L/2-1)/(L/2) for even L)
 *   preserve_symmetry mode:
 *     k       = floorf(float(L-1) * (tanh(z) + 1) / 2 + 0.5)
 *     code    = (2 / float(L-1)) * k - 1          (symmetric in [-1, 1])
 *
 * An index packs the level indices k_i in mixed radix with dimension 0 the
 * least significant digit: index = sum_i k_i * basis_i, basis_i =
 * prod_{j<i} L_j, 0 <= index < codebook_size = prod_i L_i (int32, as in the
 * library). As in the library the sum is done in float32 and rounded, so it
 * is exact only while codebook_size <= 2^24 (larger sizes are accepted and
 * reproduce the library's float32 behaviour).
 *
 * Several codebooks (num_codebooks = C > 1, the library's FSQ(num_codebooks))
 * split the feature dimension of width C*d into C contiguous groups of d
 * (feature j of group c is column c*d + j) and quantize each group with the
 * same levels: z (M, C*d) -> codes (M, C*d), indices (M, C). The library's
 * optional input/output projections (dim != C*d) are not part of this
 * reference: callers project themselves.
 *
 * Gradient: straight-through. Rounding has identity gradient, so
 * d code / d z = half_l * (1 - tanh^2(z + shift)) / float(L/2) in default
 * mode and (1 - tanh^2(z)) in preserve_symmetry mode.
 *
 * Bit-exactness: fsq.c disables FMA contraction so that products are rounded
 * to float32 before the following add, as torch computes them; FSQ outputs
 * are compared exactly against the golden cases.
 *
 * A vqc_fsq is a plain value: no allocation, nothing to free. */
#ifndef VQC_FSQ_H
#define VQC_FSQ_H

#include <stdbool.h>
#include <stdint.h>

#include "vqc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every level is >= 2 and the codebook size must fit an int32 index, so no
 * valid FSQ has more than 30 dimensions. */
#define VQC_FSQ_MAX_DIMS 30

typedef struct vqc_fsq {
  int d;                  /* levels per codebook (the codebook dimension) */
  int num_codebooks;      /* C: groups along the feature dim, >= 1 */
  bool preserve_symmetry;
  double bound_eps;
  int64_t codebook_size;  /* prod(levels) */
  int32_t levels[VQC_FSQ_MAX_DIMS]; /* (d,) L_i */
  int32_t basis[VQC_FSQ_MAX_DIMS];  /* (d,) prod_{j<i} L_j */
  /* Per-dimension float32 constants, computed once in the library's order. */
  float half_l[VQC_FSQ_MAX_DIMS];     /* default mode */
  float offset[VQC_FSQ_MAX_DIMS];     /* default mode */
  float shift[VQC_FSQ_MAX_DIMS];      /* default mode */
  float half_width[VQC_FSQ_MAX_DIMS]; /* float(L/2), default mode */
  float sym_scale[VQC_FSQ_MAX_DIMS];  /* 2 / float(L-1), symmetric mode */
} vqc_fsq;

/* Sets up *q. levels (d,), each >= 2; L == 2 only with preserve_symmetry
 * (the library rejects it otherwise); prod(levels) < 2^31; num_codebooks
 * >= 1; bound_eps finite and >= 0 (the library uses 1e-3). */
vqc_status vqc_fsq_init(vqc_fsq *q, const int32_t *levels, int d,
                        int num_codebooks, bool preserve_symmetry,
                        double bound_eps);

/* Feature width of an input row: num_codebooks * d. */
int vqc_fsq_width(const vqc_fsq *q);

/* Forward (eval; no noise dropout). z (M, C*d) -> out (M, C*d) codes in
 * [-1, 1], and indices (M, C) when `indices` is not NULL. out may equal z.
 * A NaN in z is VQC_EINVAL (it has no code); +-inf saturate to the end codes. */
vqc_status vqc_fsq_quantize(const vqc_fsq *q, const float *z, int64_t M,
                            float *out, int32_t *indices);

/* Codes (M, C*d), as produced by quantize, -> indices (M, C). Codes whose
 * index is not an int32 (NaN, far outside [-1, 1]) are VQC_EINVAL. */
vqc_status vqc_fsq_codes_to_indices(const vqc_fsq *q, const float *codes,
                                    int64_t M, int32_t *indices);

/* Indices (M, C) -> codes (M, C*d). Every index must be in
 * [0, codebook_size): VQC_EINVAL otherwise (names the first bad one). */
vqc_status vqc_fsq_indices_to_codes(const vqc_fsq *q, const int32_t *indices,
                                    int64_t M, float *codes);

/* Indices (n,) -> level indices (n, d): (index / basis_i) % L_i. Same range
 * check as indices_to_codes. */
vqc_status vqc_fsq_level_indices(const vqc_fsq *q, const int32_t *indices,
                                 int64_t n, int32_t *level_indices);

/* The implicit codebook (codebook_size, d): row k is the code of index k. */
vqc_status vqc_fsq_implicit_codebook(const vqc_fsq *q, float *codebook);

/* Straight-through backward: z (M, C*d), grad_out (M, C*d) ->
 * grad_z (M, C*d) = grad_out * d code / d z. grad_z may equal grad_out. */
vqc_status vqc_fsq_backward(const vqc_fsq *q, const float *z,
                            const float *grad_out, int64_t M, float *grad_z);

#ifdef __cplusplus
}
#endif
#endif /* VQC_FSQ_H */
