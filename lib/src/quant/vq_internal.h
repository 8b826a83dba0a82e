/* vq_internal.h: helpers shared by the VQ codebook sources (vq_codebook.c,
 * vq_ema.c, vq_kmeans.c, vq_dead_code.c, vq_sampler.c, rvq.c); not public. */
#ifndef VQC_VQ_INTERNAL_H
#define VQC_VQ_INTERNAL_H

#include "vqc/vq.h"

/* The comm of a possibly NULL ctx (NULL = single process). */
static inline vqc_comm *vq_ctx_comm(const vqc_vq_ctx *ctx) {
  return ctx ? ctx->comm : NULL;
}
static inline int vq_ctx_rank(const vqc_vq_ctx *ctx) {
  return ctx && ctx->comm ? vqc_comm_rank(ctx->comm) : 0;
}
static inline int vq_ctx_size(const vqc_vq_ctx *ctx) {
  return ctx && ctx->comm ? vqc_comm_size(ctx->comm) : 1;
}
static inline uint64_t vq_ctx_step(const vqc_vq_ctx *ctx) {
  return ctx ? ctx->step : 0;
}
static inline const vqc_draws *vq_ctx_draws(const vqc_vq_ctx *ctx) {
  return ctx ? ctx->draws : NULL;
}
static inline vqc_draw_at vq_draw_at(const vqc_vq_ctx *ctx,
                                     vqc_rng_purpose purpose) {
  vqc_draw_at at = {purpose, vq_ctx_step(ctx), vq_ctx_rank(ctx),
                    ctx ? ctx->layer : 0};
  return at;
}

/* vqc_lerp_f32's definition, inline so the EMA's C*D lerps are not a call
 * each (vqc_lerp_f32 returns this; the same operations either way). */
static inline float vq_lerp_f32(float a, float b, float w) {
  /* torch's CPU lerp: the branch keeps the result exact at both ends
   * (w = 0 gives a, w = 1 gives b). */
  return w < 0.5f ? a + w * (b - a) : b - (b - a) * (1.0f - w);
}

/* E = embed_avg / smoothed[:, None] with
 * smoothed = (cluster_size + eps) / (tot + C*eps) * tot, tot = sum(cluster_size)
 * (spec: EMA step 4; also used after k-means init). */
void vq_renormalize(vqc_vq *vq);

/* Checks that a (M, D) input is usable: M >= 0, x non-NULL when M > 0. */
vqc_status vq_check_rows(const char *fn, const float *x, int64_t M);

/* Raises the probe (vqc/probe.h) that shows checkers how many codes are
 * about to be filled and how many rows were sampled for them: name
 * "dead_code" (keys expired, sampled, local_rows, layer) or "kmeans_init"
 * (keys codes, sampled, local_rows, layer); sampled = -1 before sampling.
 * Every rank must call it at the same point. A non-OK return (a checker
 * saw the ranks disagree) means: write nothing and return it. vq_sampler.c. */
vqc_status vq_emit_fill_probe(const vqc_vq_ctx *ctx, vqc_rng_purpose purpose,
                              int64_t wanted, int64_t sampled,
                              int64_t local_rows, vqc_site site);

/* vqc_vq_sample_rows with a catalogue fault of the codebook (vq->p.fault;
 * the sampler acts on VQC_FAULT_SAMPLER_FLOAT_SPLIT only): the dead-code
 * and k-means callers pass their codebook's fault through here. */
vqc_status vq_sample_rows(const vqc_vq_ctx *ctx, vqc_rng_purpose purpose,
                          uint64_t seed, vqc_fault fault, const float *x,
                          int64_t n_local, int64_t D, int64_t k, float *out);

#endif /* VQC_VQ_INTERNAL_H */
