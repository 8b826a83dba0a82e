/* vq_codebook.c: the VQ codebook's state, nearest-code search, commitment
 * loss with its straight-through gradient, and the forward pass that ties
 * them to the EMA update (vq_ema.c), k-means init (vq_kmeans.c) and
 * dead-code expiry (vq_dead_code.c). Math: shared/spec/quantizers.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vq_internal.h"
#include "vq_nearest.h"

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
  /* torch's CPU lerp: the branch keeps the result exact at both ends
   * (w = 0 gives a, w = 1 gives b). */
  return w < 0.5f ? a + w * (b - a) : b - (b - a) * (1.0f - w);
}

/* Sequential fused multiply-add chain over d: acc = fmaf(a[d], b[d], acc)
 * from acc = 0. This is the definition of the dot products and squared
 * norms of the distance (see vq_nearest.h): fmaf rounds once per step
 * whatever -ffp-contract says, and the SIMD kernels (vq_nearest.c) run the
 * very same chain in each vector lane, so both give identical bits. */
static float dot_fma(const float *a, const float *b, int64_t D) {
  float acc = 0.0f;
  for (int64_t d = 0; d < D; d++) acc = fmaf(a[d], b[d], acc);
  return acc;
}

vqc_status vqc_vq_nearest(const float *x, int64_t M, const float *E,
                          int64_t C, int64_t D, int64_t *indices,
                          float *neg_dist) {
  /* The fastest kernel this CPU has; each one computes vq_nearest_ref's
   * function bit for bit (tests/unit/test_vq_nearest.c). */
  return vq_nearest_with(vq_kernel_best(), x, M, E, C, D, indices, neg_dist);
}

vqc_status vq_nearest_ref(const float *x, int64_t M, const float *E,
                          int64_t C, int64_t D, int64_t *indices,
                          float *neg_dist) {
  float *e2 = malloc((size_t)C * sizeof(float)); /* |E_c|^2, freed below */
  if (!e2) return vqc_error(VQC_ENOMEM, "vq_nearest: %lld codes", (long long)C);
  /* float32 chains in index order, as torch sums short rows: worst
   * difference from upstream on the golden cases 2.6e-7 (plain multiply-
   * then-add chains gave 2.3e-7, sums in double 4.8e-7). */
  for (int64_t c = 0; c < C; c++) e2[c] = dot_fma(E + c * D, E + c * D, D);
  for (int64_t i = 0; i < M; i++) {
    const float *xi = x + i * D;
    const float x2 = dot_fma(xi, xi, D);
    int64_t best = 0;
    float best_dist = INFINITY;
    for (int64_t c = 0; c < C; c++) {
      const float dot = dot_fma(xi, E + c * D, D);
      /* Expanded form, as upstream's cdist: (x2 + e2) + (-2 dot), then the
       * clamp and the sqrt. Ties are decided on this final value. */
      const float d2 = (x2 + e2[c]) + (-2.0f * dot);
      const float dist = sqrtf(fmaxf(d2, VQC_VQ_DIST_CLAMP));
      if (neg_dist) neg_dist[i * C + c] = -dist;
      if (dist < best_dist) { /* strict: the lowest index keeps a tie */
        best_dist = dist;
        best = c;
      }
    }
    indices[i] = best;
  }
  free(e2);
  return VQC_OK;
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
