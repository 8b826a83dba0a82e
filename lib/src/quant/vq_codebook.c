/* vq_codebook.c: the VQ codebook's state (parameters, init, accessors),
 * the helpers every codebook operation shares (row checks, torch's lerp,
 * the EMA smoothing), and the commitment loss with its straight-through
 * gradient. The bottom of the VQ files: the operations (vq_nearest.c,
 * vq_sampler.c, vq_ema.c, vq_kmeans.c, vq_dead_code.c) use it and the
 * forward (vq_forward.c) ties them together; nothing here calls them.
 * Math: docs/spec/quantizers.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quant/vq_internal.h"

void vqc_vq_params_default(vqc_vq_params *p, int64_t dim,
                           int64_t codebook_size) {
  memset(p, 0, sizeof *p);
  p->dim = dim;
  p->codebook_size = codebook_size;
  p->decay = 0.8;
  p->eps = 1e-5;
  p->threshold_ema_dead_code = 0.0;
  p->reset_cluster_size = -1.0;
  p->kmeans_init = false;
  p->kmeans_iters = 10;
  p->commitment_weight = 1.0;
  p->freeze_codebook = false;
  p->seed = 0;
}

static vqc_status check_params(const vqc_vq_params *p) {
  if (p->dim <= 0 || p->codebook_size <= 0)
    return vqc_error(VQC_EINVAL, "vq: dim %lld and codebook_size %lld must be > 0",
                     (long long)p->dim, (long long)p->codebook_size);
  if (!(p->decay >= 0.0 && p->decay <= 1.0))
    return vqc_error(VQC_EINVAL, "vq: decay %g must lie in [0, 1]", p->decay);
  if (!(p->eps >= 0.0))
    return vqc_error(VQC_EINVAL, "vq: eps %g must be >= 0", p->eps);
  if (p->kmeans_init && p->kmeans_iters < 1)
    return vqc_error(VQC_EINVAL,
                     "vq: kmeans_iters %d must be >= 1 with kmeans_init "
                     "(upstream crashes with 0)", p->kmeans_iters);
  return VQC_OK;
}

vqc_status vqc_vq_init(vqc_vq *vq, const vqc_vq_params *p, const float *embed) {
  if (!vq || !p) return vqc_error(VQC_EINVAL, "vq_init: NULL argument");
  memset(vq, 0, sizeof *vq);
  VQC_TRY(check_params(p));
  vq->p = *p;
  const int64_t C = p->codebook_size, D = p->dim;
  const int64_t shape_cd[2] = {C, D};
  vqc_status s;
  if ((s = vqc_tensor_zeros(&vq->embed, VQC_F32, 2, shape_cd, VQC_DEVICE_CPU)) ||
      (s = vqc_tensor_zeros(&vq->cluster_size, VQC_F32, 1, &C, VQC_DEVICE_CPU)) ||
      (s = vqc_tensor_zeros(&vq->embed_avg, VQC_F32, 2, shape_cd, VQC_DEVICE_CPU)))
    goto fail;

  float *E = vqc_vq_embed(vq);
  if (embed) {
    memcpy(E, embed, (size_t)(C * D) * sizeof(float));
  } else if (!p->kmeans_init) {
    /* Upstream uses kaiming_uniform_; only the bound's scale matters here. */
    vqc_rng r;
    vqc_rng_init(&r, p->seed, vqc_rng_stream_for(0, VQC_RNG_INIT, -1));
    const float bound = sqrtf(6.0f / (float)D);
    vqc_rng_uniform(&r, E, C * D, -bound, bound);
  } /* else: zeros until k-means init */
  float *cs = vqc_vq_cluster_size(vq);
  for (int64_t c = 0; c < C; c++) cs[c] = 1.0f;
  memcpy(vqc_vq_embed_avg(vq), E, (size_t)(C * D) * sizeof(float));
  vq->initted = !p->kmeans_init; /* k-means overwrites any given embed */
  return VQC_OK;
fail:
  vqc_vq_free(vq);
  return s;
}

void vqc_vq_free(vqc_vq *vq) {
  if (!vq) return;
  vqc_tensor_free(&vq->embed);
  vqc_tensor_free(&vq->cluster_size);
  vqc_tensor_free(&vq->embed_avg);
  vq->initted = false;
}

float *vqc_vq_embed(vqc_vq *vq) { return vqc_tensor_data(&vq->embed); }
float *vqc_vq_cluster_size(vqc_vq *vq) {
  return vqc_tensor_data(&vq->cluster_size);
}
float *vqc_vq_embed_avg(vqc_vq *vq) { return vqc_tensor_data(&vq->embed_avg); }

vqc_status vq_check_rows(const char *fn, const float *x, int64_t M) {
  if (M < 0) return vqc_error(VQC_ESHAPE, "%s: %lld rows", fn, (long long)M);
  if (M > 0 && !x) return vqc_error(VQC_EINVAL, "%s: x is NULL", fn);
  return VQC_OK;
}

float vqc_lerp_f32(float a, float b, float w) {
  return vq_lerp_f32(a, b, w); /* vq_internal.h */
}

float vqc_vq_commitment_loss(const float *x, const float *q, int64_t M,
                             int64_t D, double commitment_weight) {
  const int64_t n = M * D;
  if (n <= 0) return 0.0f;
  double sum = 0.0; /* double: torch's float mean is accurate to ~1 ulp */
  for (int64_t i = 0; i < n; i++) {
    const float diff = q[i] - x[i];
    sum += (double)diff * (double)diff;
  }
  const float mean = (float)(sum / (double)n);
  return mean * (float)commitment_weight;
}

void vqc_vq_backward(const float *x, const float *q, int64_t M, int64_t D,
                     double commitment_weight, const float *grad_out,
                     float grad_loss, float *grad_x) {
  const int64_t n = M * D;
  if (n <= 0) return;
  const float scale =
      (float)((double)grad_loss * commitment_weight * 2.0 / (double)n);
  for (int64_t i = 0; i < n; i++) {
    const float g = grad_out ? grad_out[i] : 0.0f;
    grad_x[i] = g + scale * (x[i] - q[i]);
  }
}

void vq_renormalize(vqc_vq *vq) {
  const int64_t C = vq->p.codebook_size, D = vq->p.dim;
  float *E = vqc_vq_embed(vq);
  const float *cs = vqc_vq_cluster_size(vq);
  const float *avg = vqc_vq_embed_avg(vq);
  double tot_d = 0.0;
  for (int64_t c = 0; c < C; c++) tot_d += cs[c];
  const float tot = (float)tot_d;
  /* Upstream adds Python floats to float32 tensors: each scalar is rounded
   * to float32 first, and C*eps is formed in double before that. */
  const float eps = (float)vq->p.eps;
  const float denom = tot + (float)((double)C * vq->p.eps);
  for (int64_t c = 0; c < C; c++) {
    const float smoothed = (cs[c] + eps) / denom * tot;
    for (int64_t d = 0; d < D; d++) E[c * D + d] = avg[c * D + d] / smoothed;
  }
}
