/* rvq.h: residual VQ (upstream ResidualVQ) over Q codebooks of vq.h, with
 * quantize dropout.
 *
 * residual_0 = x; q_l = VQ_l(residual_l); residual_{l+1} = residual_l - q_l;
 * output sum_l q_l (float32, l ascending); indices (M, Q).
 *
 * Quantize dropout (train mode, quantize_dropout, Q > 1): one cutoff r per
 * forward for the whole batch; layers l > r do not run (index -1, loss 0,
 * no EMA, no collectives). r must be identical on every rank, so each rank
 * draws a seed, the seeds are all_reduce(SUM)'d (upstream
 * get_maybe_sync_seed), and r is derived from the synced seed alone. */
#ifndef VQC_RVQ_H
#define VQC_RVQ_H

#include <stdbool.h>
#include <stdint.h>

#include "vqc/vq.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vqc_rvq_params {
  int num_quantizers;       /* Q >= 1 */
  /* Parameters of every layer. Layer l's default draws are keyed by a seed
   * derived from layer.seed and l, so layers never share random numbers. */
  vqc_vq_params layer;
  bool quantize_dropout;    /* default false */
  int dropout_cutoff_index; /* lowest cutoff r, default 0 */
  int dropout_multiple_of;  /* r + 1 rounded up to a multiple, default 1 */
  /* A bug of the catalogue (fault.h) in the dropout seed sync of rvq.c:
   * UNSYNCED_DROPOUT_SEED or SEED_SYNC_SOME_RANKS; VQC_FAULT_NONE (the
   * default) otherwise. Codebook faults go in layer.fault. */
  vqc_fault fault;
} vqc_rvq_params;

/* Defaults: Q layers of vqc_vq_params_default(dim, codebook_size). */
void vqc_rvq_params_default(vqc_rvq_params *p, int num_quantizers, int64_t dim,
                            int64_t codebook_size);

typedef struct vqc_rvq {
  vqc_rvq_params p;
  vqc_vq *layers; /* (Q,), owned */
} vqc_rvq;

/* codebooks (Q, C, D) is copied when given (fresh EMA state per layer);
 * NULL initialises each layer as vqc_vq_init does. Free with vqc_rvq_free. */
vqc_status vqc_rvq_init(vqc_rvq *r, const vqc_rvq_params *p,
                        const float *codebooks);
void vqc_rvq_free(vqc_rvq *r); /* accepts NULL and zeroed structs */

/* The dropout cutoff for this forward: this rank's seed (draws->dropout_seed
 * or uniform in [0, 10000)), all_reduce(SUM) over ctx->comm (int64), then
 * r = draws->dropout_cutoff(synced) or, by default, upstream's
 * random.Random(synced).randrange(cutoff_index, Q) (py_random.h), then
 * r = roundup(r + 1, multiple_of) - 1. Every rank
 * must call it (it is a collective). synced_seed may be NULL. */
vqc_status vqc_rvq_draw_cutoff(const vqc_rvq *r, const vqc_vq_ctx *ctx,
                               int *cutoff, int64_t *synced_seed);

/* The two pure steps of every quantize-dropout cutoff (RVQ and residual
 * FSQ): upstream's random.Random(synced_seed).randrange(lo, hi + 1), and the
 * round-up to multiple_of, roundup(cutoff + 1, multiple_of) - 1 (it may pass
 * the last layer: then every layer runs). */
int vqc_dropout_cutoff_from_seed(int64_t synced_seed, int lo, int hi);
int vqc_dropout_round_cutoff(int cutoff, int multiple_of);

/* One forward on x (M, D). indices (M, Q) int64 out (-1 for dropped layers),
 * quantized (M, D) out, losses (Q) out (may be NULL; 0 in eval mode and for
 * dropped layers), cutoff (may be NULL) receives the last layer that ran
 * (Q-1 without dropout). In train mode with dropout this calls
 * vqc_rvq_draw_cutoff, then runs layers 0..cutoff in train mode (EMA,
 * dead-code expiry). Layer l's ctx has layer = l. */
vqc_status vqc_rvq_forward(vqc_rvq *r, const vqc_vq_ctx *ctx, const float *x,
                           int64_t M, bool train, int64_t *indices,
                           float *quantized, float *losses, int *cutoff);

/* Decodes indices (M, q_given) row-major, q_given <= Q, into codes
 * (Q, M, D): entry -1, and every layer >= q_given (padding, which needs
 * quantize_dropout as upstream), gives a zero vector. Indices outside
 * [-1, C) are VQC_EINVAL. */
vqc_status vqc_rvq_codes_from_indices(const vqc_rvq *r, const int64_t *indices,
                                      int64_t M, int q_given, float *codes);
/* sum over layers of vqc_rvq_codes_from_indices, l ascending: out (M, D). */
vqc_status vqc_rvq_output_from_indices(const vqc_rvq *r,
                                       const int64_t *indices, int64_t M,
                                       int q_given, float *out);

#ifdef __cplusplus
}
#endif
#endif /* VQC_RVQ_H */
