/* vq_kmeans.c: k-means initialisation of a codebook (upstream kmeans and
 * init_embed_), single-process or distributed.
 *
 * Distributed, each iteration reduces the bins (int64) and then each rank's
 * partial means "segment sum / global bins" (float32), as upstream does:
 * summing those partial means over ranks gives the global mean. */
#include <stdlib.h>
#include <string.h>

#include "quant/vq_internal.h"

vqc_status vqc_vq_kmeans(const vqc_vq_ctx *ctx, const float *x, int64_t M,
                         int64_t D, int64_t C, int iters, float *means,
                         int64_t *bins) {
  VQC_TRY(vq_check_rows("vq_kmeans", x, M));
  if (D <= 0 || C <= 0 || iters < 1 || !means || !bins)
    return vqc_error(VQC_EINVAL, "vq_kmeans: D %lld, C %lld, iters %d",
                     (long long)D, (long long)C, iters);
  vqc_comm *comm = vq_ctx_comm(ctx);
  int64_t *idx = malloc((size_t)(M > 0 ? M : 1) * sizeof(int64_t)); /* (M,) */
  float *sums = malloc((size_t)(C * D) * sizeof(float));              /* (C, D) */
  vqc_status s = VQC_OK;
  if (!idx || !sums) {
    s = vqc_error(VQC_ENOMEM, "vq_kmeans: %lld rows, %lld codes", (long long)M,
                  (long long)C);
    goto done;
  }
  for (int it = 0; it < iters; it++) {
    if ((s = vqc_vq_nearest(x, M, means, C, D, idx, NULL))) goto done;

    memset(bins, 0, (size_t)C * sizeof(int64_t));
    for (int64_t i = 0; i < M; i++) bins[idx[i]]++;
    if (comm &&
        (s = vqc_all_reduce(comm, bins, bins, (size_t)C, VQC_I64, VQC_SUM)))
      goto done;

    /* Segment sums in float32, row by row, as torch's scatter_add_. */
    memset(sums, 0, (size_t)(C * D) * sizeof(float));
    for (int64_t i = 0; i < M; i++)
      for (int64_t d = 0; d < D; d++) sums[idx[i] * D + d] += x[i * D + d];
    for (int64_t c = 0; c < C; c++) {
      const float div = bins[c] == 0 ? 1.0f : (float)bins[c];
      for (int64_t d = 0; d < D; d++) sums[c * D + d] /= div;
    }
    if (comm && (s = vqc_all_reduce(comm, sums, sums, (size_t)(C * D),
                                    VQC_F32, VQC_SUM)))
      goto done;

    /* An empty cluster keeps its previous mean. */
    for (int64_t c = 0; c < C; c++)
      if (bins[c] != 0)
        memcpy(means + c * D, sums + c * D, (size_t)D * sizeof(float));
  }
done:
  free(idx);
  free(sums);
  return s;
}

vqc_status vqc_vq_kmeans_init(vqc_vq *vq, const vqc_vq_ctx *ctx,
                              const float *x, int64_t M) {
  if (!vq || !vqc_vq_embed(vq))
    return vqc_error(VQC_EINVAL, "vq_kmeans_init: codebook not initialised");
  VQC_TRY(vq_check_rows("vq_kmeans_init", x, M));
  const int64_t C = vq->p.codebook_size, D = vq->p.dim;
  if (vq->p.kmeans_iters < 1)
    return vqc_error(VQC_EINVAL, "vq_kmeans_init: kmeans_iters %d < 1",
                     vq->p.kmeans_iters);
  float *means = malloc((size_t)(C * D) * sizeof(float)); /* (C, D) */
  int64_t *bins = malloc((size_t)C * sizeof(int64_t));     /* (C,) */
  vqc_status s = VQC_OK;
  if (!means || !bins) {
    s = vqc_error(VQC_ENOMEM, "vq_kmeans_init: %lld codes", (long long)C);
    goto done;
  }
  /* C initial means sampled from the (possibly sharded) batch. */
  if ((s = vq_sample_rows(ctx, VQC_RNG_KMEANS, vq->p.seed, vq->p.fault, x, M,
                          D, C, means)))
    goto done;
  if ((s = vqc_vq_kmeans(ctx, x, M, D, C, vq->p.kmeans_iters, means, bins)))
    goto done;

  /* cluster_size = bins, embed_avg = means * bins, then E with the EMA
   * smoothing (an empty code's embed_avg is 0, so its row becomes 0). */
  float *cs = vqc_vq_cluster_size(vq);
  float *avg = vqc_vq_embed_avg(vq);
  for (int64_t c = 0; c < C; c++) {
    cs[c] = (float)bins[c];
    for (int64_t d = 0; d < D; d++) avg[c * D + d] = means[c * D + d] * cs[c];
  }
  vq_renormalize(vq);
  vq->initted = true;
done:
  free(means);
  free(bins);
  return s;
}
