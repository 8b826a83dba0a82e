/* bottleneck_quantizers.c: the VQ, RVQ and FSQ reference quantizers behind
 * the autoencoder's vqc_bottleneck interface (see bottleneck.h for the
 * semantics, the gradients and the registered state names). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vqc/bottleneck.h"

/* Grows *p to hold n elements of `size` bytes (keeps it when large enough).
 * Used for per-forward scratch whose row count varies from call to call. */
static vqc_status grow(void **p, int64_t n, size_t size, const char *what) {
  void *q = realloc(*p, (size_t)(n > 0 ? n : 1) * size);
  if (q == NULL)
    return vqc_error(VQC_ENOMEM, "%s: scratch for %lld rows", what,
                     (long long)n);
  *p = q;
  return VQC_OK;
}

/* Registers a codebook's three state tensors under `prefix` ("" or
 * "layers.<l>."), grad NULL: they are trained by EMA, not by gradient. */
static vqc_status register_codebook(vqc_vq *vq, const char *prefix,
                                    vqc_param_list *list) {
  const vqc_tensor *t[3] = {&vq->embed, &vq->cluster_size, &vq->embed_avg};
  const char *names[3] = {"embed", "cluster_size", "embed_avg"};
  for (int i = 0; i < 3; i++) {
    char name[VQC_PARAM_NAME_MAX];
    int n = snprintf(name, sizeof name, "%s%s", prefix, names[i]);
    if (n < 0 || n >= (int)sizeof name)
      return vqc_error(VQC_EINVAL, "bottleneck: state name '%s%s' too long",
                       prefix, names[i]);
    VQC_TRY(vqc_param_list_add(list, name, t[i]->dtype, vqc_tensor_data(t[i]),
                               NULL, t[i]->ndim, t[i]->shape));
  }
  return VQC_OK;
}

/* ---- VQ ---- */

vqc_status vqc_vq_bottleneck_init(vqc_vq_bottleneck *b, const vqc_vq_params *p,
                                  const float *embed) {
  if (b == NULL) return vqc_error(VQC_EINVAL, "vq_bottleneck_init: NULL");
  memset(b, 0, sizeof *b);
  b->train = true;
  b->rows = -1;
  return vqc_vq_init(&b->vq, p, embed);
}

void vqc_vq_bottleneck_free(vqc_vq_bottleneck *b) {
  if (b == NULL) return;
  vqc_vq_free(&b->vq);
  free(b->indices);
  b->indices = NULL;
  b->capacity = 0;
  b->rows = -1;
}

static vqc_status vq_bn_forward(void *ctx, const float *z, int64_t rows,
                                int64_t dim, float *q, float *row_loss) {
  vqc_vq_bottleneck *b = ctx;
  if (dim != b->vq.p.dim)
    return vqc_error(VQC_ESHAPE, "vq bottleneck: latent dim %lld, codebook "
                     "dim %lld", (long long)dim, (long long)b->vq.p.dim);
  if (rows > b->capacity) {
    VQC_TRY(grow((void **)&b->indices, rows, sizeof(int64_t), "vq bottleneck"));
    b->capacity = rows;
  }
  b->rows = -1; /* until this forward succeeds */
  const vqc_vq_ctx vctx = {b->comm, b->step, b->draws, 0};
  VQC_TRY(vqc_vq_forward(&b->vq, &vctx, z, rows, b->train, b->indices, q,
                         NULL));
  /* The per-row form of the commitment loss; eval mode has none. */
  b->weight = b->train ? (float)b->vq.p.commitment_weight : 0.0f;
  vqc_commitment_rows(z, q, rows, dim, b->weight, row_loss);
  b->rows = rows;
  return VQC_OK;
}

static vqc_status vq_bn_backward(void *ctx, const float *z, const float *q,
                                 const float *dq, int64_t rows, int64_t dim,
                                 float dloss_row, float *dz) {
  vqc_vq_bottleneck *b = ctx;
  if (rows != b->rows)
    return vqc_error(VQC_EINVAL, "vq bottleneck: backward over %lld rows "
                     "after a forward over %lld", (long long)rows,
                     (long long)b->rows);
  vqc_straight_through_backward(z, q, dq, rows, dim, b->weight, dloss_row, dz);
  return VQC_OK;
}

static vqc_status vq_bn_register(void *ctx, vqc_param_list *list) {
  vqc_vq_bottleneck *b = ctx;
  return register_codebook(&b->vq, "", list);
}

vqc_bottleneck vqc_vq_bottleneck_iface(vqc_vq_bottleneck *b) {
  vqc_bottleneck it = {"vq", b, vq_bn_forward, vq_bn_backward, vq_bn_register};
  return it;
}

/* ---- RVQ ---- */

vqc_status vqc_rvq_bottleneck_init(vqc_rvq_bottleneck *b,
                                   const vqc_rvq_params *p,
                                   const float *codebooks) {
  if (b == NULL) return vqc_error(VQC_EINVAL, "rvq_bottleneck_init: NULL");
  memset(b, 0, sizeof *b);
  b->train = true;
  b->rows = -1;
  return vqc_rvq_init(&b->rvq, p, codebooks);
}

void vqc_rvq_bottleneck_free(vqc_rvq_bottleneck *b) {
  if (b == NULL) return;
  vqc_rvq_free(&b->rvq);
  free(b->indices);
  free(b->commit_dir);
  free(b->residual);
  free(b->layer_q);
  free(b->layer_idx);
  b->indices = NULL;
  b->commit_dir = b->residual = b->layer_q = NULL;
  b->layer_idx = NULL;
  b->capacity = 0;
  b->rows = -1;
}

static vqc_status rvq_bn_reserve(vqc_rvq_bottleneck *b, int64_t rows) {
  if (rows <= b->capacity) return VQC_OK;
  const int64_t Q = b->rvq.p.num_quantizers, D = b->rvq.p.layer.dim;
  const char *w = "rvq bottleneck";
  VQC_TRY(grow((void **)&b->indices, rows * Q, sizeof(int64_t), w));
  VQC_TRY(grow((void **)&b->commit_dir, rows * D, sizeof(float), w));
  VQC_TRY(grow((void **)&b->residual, rows * D, sizeof(float), w));
  VQC_TRY(grow((void **)&b->layer_q, rows * D, sizeof(float), w));
  VQC_TRY(grow((void **)&b->layer_idx, rows, sizeof(int64_t), w));
  b->capacity = rows;
  return VQC_OK;
}

/* vqc_rvq_forward's loop, step for step (the same cutoff draw, the same
 * vqc_vq_forward calls with ctx.layer = l, the same float32 operations on
 * the residual and the output), written out here because backward needs
 * what it does not return: each layer's residual against its code. The unit
 * test holds the two bit-identical. */
static vqc_status rvq_bn_forward(void *ctx, const float *z, int64_t rows,
                                 int64_t dim, float *q, float *row_loss) {
  vqc_rvq_bottleneck *b = ctx;
  vqc_rvq *r = &b->rvq;
  const int Q = r->p.num_quantizers;
  const int64_t D = r->p.layer.dim;
  if (dim != D)
    return vqc_error(VQC_ESHAPE, "rvq bottleneck: latent dim %lld, codebook "
                     "dim %lld", (long long)dim, (long long)D);
  VQC_TRY(rvq_bn_reserve(b, rows));
  b->rows = -1; /* until this forward succeeds */
  const vqc_vq_ctx base = {b->comm, b->step, b->draws, 0};

  int last = Q - 1;
  if (b->train && r->p.quantize_dropout && Q > 1)
    VQC_TRY(vqc_rvq_draw_cutoff(r, &base, &last, NULL));
  b->cutoff = last;

  if (rows > 0) memcpy(b->residual, z, (size_t)(rows * D) * sizeof(float));
  for (int64_t j = 0; j < rows * D; j++) {
    q[j] = 0.0f;
    b->commit_dir[j] = 0.0f;
  }
  /* Commitment sums per row in double, rounded once at the end (as
   * vqc_commitment_rows does for one codebook). */
  double *sums = calloc((size_t)(rows > 0 ? rows : 1), sizeof(double));
  if (sums == NULL)
    return vqc_error(VQC_ENOMEM, "rvq bottleneck: %lld rows", (long long)rows);

  vqc_status s = VQC_OK;
  vqc_vq_ctx lctx = base;
  for (int l = 0; l < Q; l++) {
    if (l > last) { /* dropped: no state change, no collectives */
      for (int64_t i = 0; i < rows; i++) b->indices[i * Q + l] = -1;
      continue;
    }
    lctx.layer = l;
    if ((s = vqc_vq_forward(&r->layers[l], &lctx, b->residual, rows, b->train,
                            b->layer_idx, b->layer_q, NULL)))
      break;
    for (int64_t i = 0; i < rows; i++) {
      b->indices[i * Q + l] = b->layer_idx[i];
      for (int64_t d = 0; d < D; d++) {
        const int64_t j = i * D + d;
        const double e = (double)b->layer_q[j] - (double)b->residual[j];
        sums[i] += e * e;
        b->commit_dir[j] += b->residual[j] - b->layer_q[j];
        b->residual[j] -= b->layer_q[j];
        q[j] += b->layer_q[j];
      }
    }
  }
  if (s == VQC_OK) {
    b->weight = b->train ? (float)r->p.layer.commitment_weight : 0.0f;
    for (int64_t i = 0; i < rows; i++)
      row_loss[i] = (float)((double)b->weight * sums[i] / (double)D);
    b->rows = rows;
  }
  free(sums);
  return s;
}

static vqc_status rvq_bn_backward(void *ctx, const float *z, const float *q,
                                  const float *dq, int64_t rows, int64_t dim,
                                  float dloss_row, float *dz) {
  vqc_rvq_bottleneck *b = ctx;
  if (rows != b->rows)
    return vqc_error(VQC_EINVAL, "rvq bottleneck: backward over %lld rows "
                     "after a forward over %lld", (long long)rows,
                     (long long)b->rows);
  /* Every layer that ran passes dq straight through to its residual, and
   * each residual has identity gradient to z. */
  const float n = (float)(b->cutoff + 1 < b->rvq.p.num_quantizers
                              ? b->cutoff + 1
                              : b->rvq.p.num_quantizers);
  /* Rounded once, as vqc_straight_through_backward does. */
  const float c =
      (float)((double)dloss_row * (double)b->weight * 2.0 / (double)dim);
  for (int64_t j = 0; j < rows * dim; j++)
    dz[j] += n * dq[j] + c * b->commit_dir[j];
  return VQC_OK;
}

static vqc_status rvq_bn_register(void *ctx, vqc_param_list *list) {
  vqc_rvq_bottleneck *b = ctx;
  for (int l = 0; l < b->rvq.p.num_quantizers; l++) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "layers.%d.", l);
    VQC_TRY(register_codebook(&b->rvq.layers[l], prefix, list));
  }
  return VQC_OK;
}

vqc_bottleneck vqc_rvq_bottleneck_iface(vqc_rvq_bottleneck *b) {
  vqc_bottleneck it = {"rvq", b, rvq_bn_forward, rvq_bn_backward,
                       rvq_bn_register};
  return it;
}

/* ---- FSQ ---- */

vqc_status vqc_fsq_bottleneck_init(vqc_fsq_bottleneck *b,
                                   const int32_t *levels, int d,
                                   int num_codebooks, bool preserve_symmetry,
                                   double bound_eps) {
  if (b == NULL) return vqc_error(VQC_EINVAL, "fsq_bottleneck_init: NULL");
  memset(b, 0, sizeof *b);
  b->rows = -1;
  return vqc_fsq_init(&b->fsq, levels, d, num_codebooks, preserve_symmetry,
                      bound_eps);
}

void vqc_fsq_bottleneck_free(vqc_fsq_bottleneck *b) {
  if (b == NULL) return;
  free(b->indices);
  b->indices = NULL;
  b->capacity = 0;
  b->rows = -1;
}

static vqc_status fsq_bn_forward(void *ctx, const float *z, int64_t rows,
                                 int64_t dim, float *q, float *row_loss) {
  vqc_fsq_bottleneck *b = ctx;
  if (dim != vqc_fsq_width(&b->fsq))
    return vqc_error(VQC_ESHAPE, "fsq bottleneck: latent dim %lld, FSQ width "
                     "%d (num_codebooks * levels)", (long long)dim,
                     vqc_fsq_width(&b->fsq));
  if (rows > b->capacity) {
    VQC_TRY(grow((void **)&b->indices, rows * b->fsq.num_codebooks,
                 sizeof(int32_t), "fsq bottleneck"));
    b->capacity = rows;
  }
  b->rows = -1;
  VQC_TRY(vqc_fsq_quantize(&b->fsq, z, rows, q, b->indices));
  memset(row_loss, 0, (size_t)rows * sizeof(float)); /* FSQ has no aux loss */
  b->rows = rows;
  return VQC_OK;
}

static vqc_status fsq_bn_backward(void *ctx, const float *z, const float *q,
                                  const float *dq, int64_t rows, int64_t dim,
                                  float dloss_row, float *dz) {
  vqc_fsq_bottleneck *b = ctx;
  if (rows != b->rows)
    return vqc_error(VQC_EINVAL, "fsq bottleneck: backward over %lld rows "
                     "after a forward over %lld", (long long)rows,
                     (long long)b->rows);
  /* dz arrives zero-filled (autoencoder.h), so the FSQ backward may write
   * it outright. */
  return vqc_fsq_backward(&b->fsq, z, dq, rows, dz);
}

vqc_bottleneck vqc_fsq_bottleneck_iface(vqc_fsq_bottleneck *b) {
  vqc_bottleneck it = {"fsq", b, fsq_bn_forward, fsq_bn_backward, NULL};
  return it;
}
