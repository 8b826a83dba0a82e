/* vq_dead_code.c: dead-code expiry (upstream expire_codes_ / replace).
 *
 * After the EMA, a code whose EMA count fell below the threshold is replaced
 * by a row of the batch. Every rank must replace the same codes with the
 * same rows: the expired set comes from the replicated cluster_size, and the
 * rows come from the distributed sampler (vq_sampler.c), which refuses to
 * write when the number of rows it gathered differs from this rank's count
 * of expired codes. The count is shown to checkers (the "dead_code" probe)
 * before anything depends on it, so ranks that disagree stop together. */
#include <stdlib.h>
#include <string.h>

#include "quant/vq_internal.h"

vqc_status vqc_vq_expire_codes(vqc_vq *vq, const vqc_vq_ctx *ctx,
                               const float *x, int64_t M, uint8_t *expired,
                               int64_t *num_expired) {
  if (!vq || !vqc_vq_embed(vq))
    return vqc_error(VQC_EINVAL, "vq_expire_codes: codebook not initialised");
  VQC_TRY(vq_check_rows("vq_expire_codes", x, M));
  const int64_t C = vq->p.codebook_size, D = vq->p.dim;
  if (expired) memset(expired, 0, (size_t)C);
  if (num_expired) *num_expired = 0;
  if (!(vq->p.threshold_ema_dead_code > 0.0)) return VQC_OK;

  /* torch compares a float32 tensor with a Python float in float32. */
  const float T = (float)vq->p.threshold_ema_dead_code;
  const float R = vq->p.reset_cluster_size < 0.0
                      ? T
                      : (float)vq->p.reset_cluster_size;
  float *cs = vqc_vq_cluster_size(vq);
  int64_t k = 0;
  for (int64_t c = 0; c < C; c++) {
    const bool dead = cs[c] < T; /* strict: a count equal to T is kept */
    if (expired) expired[c] = dead;
    k += dead;
  }
  if (num_expired) *num_expired = k;
  /* k comes from replicated state, so every rank skips (or not) together;
   * if that state diverged, some ranks would enter the sampler's
   * collectives while others skip them. The probe lets a checker compare k
   * across ranks first (sampled -1: nothing sampled yet). */
  VQC_TRY(vq_emit_fill_probe(ctx, VQC_RNG_DEAD_CODE, k, -1, M, VQC_SITE));
  if (k == 0) return VQC_OK;

  float *rows = malloc((size_t)(k * D) * sizeof(float)); /* (k, D) */
  if (!rows)
    return vqc_error(VQC_ENOMEM, "vq_expire_codes: %lld rows", (long long)k);
  vqc_status s = vq_sample_rows(ctx, VQC_RNG_DEAD_CODE, vq->p.seed,
                                vq->p.fault, x, M, D, k, rows);
  if (s == VQC_OK) {
    float *E = vqc_vq_embed(vq);
    float *avg = vqc_vq_embed_avg(vq);
    int64_t j = 0; /* the j-th expired code, ascending, gets row j */
    for (int64_t c = 0; c < C; c++) {
      if (!(cs[c] < T)) continue;
      const float *row = rows + j * D;
      memcpy(E + c * D, row, (size_t)D * sizeof(float));
      cs[c] = R;
      for (int64_t d = 0; d < D; d++) avg[c * D + d] = row[d] * R;
      j++;
    }
  }
  free(rows);
  return s;
}
