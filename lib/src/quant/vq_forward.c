/* vq_forward.c: one VQ forward (vqc_vq_forward), the top of the VQ files:
 * k-means init on the first training batch (vq_kmeans.c), the nearest code
 * (vq_nearest.c), the quantized rows and the commitment loss
 * (vq_codebook.c), then in training the EMA update (vq_ema.c) and dead-code
 * expiry (vq_dead_code.c), in the spec's order
 * (docs/spec/quantizers.md). */
#include <string.h>

#include "quant/vq_internal.h"

vqc_status vqc_vq_forward(vqc_vq *vq, const vqc_vq_ctx *ctx, const float *x,
                          int64_t M, bool train, int64_t *indices,
                          float *quantized, float *loss) {
  if (!vq || !vqc_vq_embed(vq))
    return vqc_error(VQC_EINVAL, "vq_forward: codebook not initialised");
  VQC_TRY(vq_check_rows("vq_forward", x, M));
  if (M > 0 && (!indices || !quantized))
    return vqc_error(VQC_EINVAL, "vq_forward: NULL indices or quantized");
  const int64_t C = vq->p.codebook_size, D = vq->p.dim;

  if (vq->p.kmeans_init && !vq->initted) {
    if (vq->before_update) VQC_TRY(vq->before_update(vq->before_update_user));
    VQC_TRY(vqc_vq_kmeans_init(vq, ctx, x, M));
  }

  const float *E = vqc_vq_embed(vq);
  VQC_TRY(vqc_vq_nearest(x, M, E, C, D, indices, NULL));
  for (int64_t i = 0; i < M; i++)
    memcpy(quantized + i * D, E + indices[i] * D, (size_t)D * sizeof(float));

  if (loss)
    *loss = train ? vqc_vq_commitment_loss(x, quantized, M, D,
                                           vq->p.commitment_weight)
                  : 0.0f;
  if (!train || vq->p.freeze_codebook) return VQC_OK;

  /* quantized already holds the pre-update rows, as the spec requires. */
  if (vq->before_update) VQC_TRY(vq->before_update(vq->before_update_user));
  VQC_TRY(vqc_vq_ema_update(vq, ctx, x, M, indices));
  return vqc_vq_expire_codes(vq, ctx, x, M, NULL, NULL);
}
