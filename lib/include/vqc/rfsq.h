/* rfsq.h: residual FSQ (upstream ResidualFSQ), the CPU reference.
 *
 * Q layers of the same FSQ (fsq.h, one codebook, no projections); layer l
 * works at scale s_l = (levels - 1)^(-l), per dimension, float32:
 *
 *   residual_0 = x
 *   q_l        = FSQ(residual_l / s_l) * s_l
 *   residual_{l+1} = residual_l - sg(q_l)
 *   output     = sum_l q_l            (float32, l ascending, from 0.0f)
 *   indices    (M, Q), int32, -1 for layers that did not run
 *
 * So layer 0 quantizes to the FSQ grid in [-1, 1], and each later layer
 * refines what is left on a grid (L-1) times finer.
 *
 * Quantize dropout (train mode, quantize_dropout, Q > 1) is as in RVQ: one
 * cutoff r per forward, layers l > r do not run (index -1, add nothing).
 * FSQ has no collectives, so the only one is the dropout seed sync
 * (vqc_rfsq_draw_cutoff); the forward takes the cutoff as an argument.
 *
 * Gradient (vqc_rfsq_backward): residual_l depends on x with identity
 * Jacobian (the subtracted q_j are stop-gradient), so
 *   d output / d x = sum over layers that ran of FSQ'(residual_l / s_l),
 * the per-element straight-through FSQ derivative (through tanh, see
 * fsq.h); the scale cancels (s_l * FSQ' * 1/s_l).
 *
 * Not part of this reference: the library's dim != len(levels) input/output
 * projections, channel-first layout and soft_clamp_input_value (callers
 * project or clamp themselves).
 *
 * A vqc_rfsq is a plain value: no allocation, nothing to free. */
#ifndef VQC_RFSQ_H
#define VQC_RFSQ_H

#include <stdbool.h>
#include <stdint.h>

#include "vqc/comm.h"
#include "vqc/fsq.h"
#include "vqc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Keeps vqc_rfsq a fixed-size value; residual FSQ in practice uses <= 8. */
#define VQC_RFSQ_MAX_QUANTIZERS 32

/* Upstream draws each rank's dropout seed with torch.randint(0, 10000). */
#define VQC_RFSQ_SEED_RANGE 10000

typedef struct vqc_rfsq_params {
  int num_quantizers;       /* Q, 1..VQC_RFSQ_MAX_QUANTIZERS */
  int d;                    /* len(levels) */
  int32_t levels[VQC_FSQ_MAX_DIMS]; /* (d,) the same for every layer */
  bool preserve_symmetry;   /* default false */
  double bound_eps;         /* default 1e-3 */
  bool quantize_dropout;    /* default false */
  int dropout_cutoff_index; /* lowest cutoff r, default 0 */
  int dropout_multiple_of;  /* r + 1 rounded up to a multiple, default 1 */
} vqc_rfsq_params;

/* Defaults as upstream; copies min(d, VQC_FSQ_MAX_DIMS) levels (init then
 * rejects a bad d). */
void vqc_rfsq_params_default(vqc_rfsq_params *p, const int32_t *levels, int d,
                             int num_quantizers);

typedef struct vqc_rfsq {
  vqc_rfsq_params p;
  vqc_fsq fsq; /* the layer quantizer, shared by all layers (stateless) */
  float scales[VQC_RFSQ_MAX_QUANTIZERS][VQC_FSQ_MAX_DIMS]; /* (Q, d) s_l */
} vqc_rfsq;

/* Validates p (FSQ rules of vqc_fsq_init, Q range, dropout_cutoff_index in
 * [0, Q), multiple_of >= 1) and computes the scales. A scale that underflows
 * to 0 in float32 (large L, many layers) is VQC_EINVAL: the layer would
 * divide by zero. */
vqc_status vqc_rfsq_init(vqc_rfsq *r, const vqc_rfsq_params *p);

/* The dropout cutoff for this forward, as upstream: seed = local_seed summed
 * over comm (all_reduce(SUM), int64; skipped when comm is NULL), then
 * r = random.Random(seed).randrange(cutoff_index, Q) (py_random.h), then
 * r = roundup(r + 1, multiple_of) - 1 (may exceed Q-1: all layers run).
 * With a comm every rank must call it (it is a collective). local_seed is
 * this rank's draw in [0, VQC_RFSQ_SEED_RANGE) (the caller's to draw, e.g.
 * from vqc_rng). synced_seed may be NULL. */
vqc_status vqc_rfsq_draw_cutoff(const vqc_rfsq *r, vqc_comm *comm,
                                int64_t local_seed, int *cutoff,
                                int64_t *synced_seed);

/* Forward on x (M, d). Layers 0..cutoff run; pass cutoff >= Q-1 (or
 * VQC_RFSQ_ALL) for all layers (eval, or no dropout). A cutoff below Q-1
 * needs quantize_dropout, and must be >= dropout_cutoff_index (VQC_EINVAL
 * otherwise). indices (M, Q) out, -1 for layers > cutoff; quantized (M, d)
 * out. NaN in x is VQC_EINVAL (FSQ has no code for it). */
#define VQC_RFSQ_ALL VQC_RFSQ_MAX_QUANTIZERS
vqc_status vqc_rfsq_forward(const vqc_rfsq *r, const float *x, int64_t M,
                            int cutoff, int32_t *indices, float *quantized);

/* Backward of the forward with the same x and cutoff: grad_out (M, d) ->
 * grad_x (M, d) = sum over layers l <= cutoff of
 * (FSQ backward of (grad_out * s_l) at residual_l / s_l) / s_l, in that
 * float32 order (torch's), layers summed ascending. grad_x may equal
 * grad_out. */
vqc_status vqc_rfsq_backward(const vqc_rfsq *r, const float *x, int64_t M,
                             int cutoff, const float *grad_out, float *grad_x);

/* Decodes indices (M, q_given) row-major, q_given <= Q, into codes
 * (Q, M, d): code(index) * s_l; entry -1, and every layer >= q_given
 * (padding, which needs quantize_dropout, as upstream), gives a zero vector.
 * Indices outside [-1, codebook_size) are VQC_EINVAL; q_given outside
 * [0, Q], or < Q without quantize_dropout, is VQC_ESHAPE. */
vqc_status vqc_rfsq_codes_from_indices(const vqc_rfsq *r,
                                       const int32_t *indices, int64_t M,
                                       int q_given, float *codes);
/* Sum over layers of vqc_rfsq_codes_from_indices, l ascending from 0.0f:
 * out (M, d). Equals the forward's quantized output exactly. */
vqc_status vqc_rfsq_output_from_indices(const vqc_rfsq *r,
                                        const int32_t *indices, int64_t M,
                                        int q_given, float *out);

#ifdef __cplusplus
}
#endif
#endif /* VQC_RFSQ_H */
