/* autoencoder.c: the tiny autoencoder of autoencoder.h (encoder, pluggable
 * bottleneck, decoder), its loss and its hand-written backward, plus the
 * identity bottleneck and the commitment / straight-through helpers that
 * quantizer adapters share. */
#include <stdlib.h>
#include <string.h>

#include "vqc/autoencoder.h"

struct vqc_autoencoder {
  vqc_autoencoder_config cfg;
  vqc_bottleneck bn;
  vqc_linear enc0, enc2, dec0, dec2;
  vqc_param_list params;

  /* Activations of the last forward, sized for `capacity` rows; one
   * allocation (`arena`) carved into the arrays below. */
  int64_t capacity;
  int64_t rows;     /* rows of the last forward; -1 before the first */
  float *arena;
  float *x;         /* (rows, din) copy of the input */
  float *h1;        /* (rows, hidden) act(encoder.0(x)) */
  float *z;         /* (rows, latent) */
  float *q;         /* (rows, latent) */
  float *row_loss;  /* (rows) */
  float *h2;        /* (rows, hidden) act(decoder.0(q)) */
  float *recon;     /* (rows, din) */
  /* gradient scratch */
  float *drecon;    /* (rows, din) */
  float *dh;        /* (rows, hidden) gradient at an activation's output */
  float *dpre;      /* (rows, hidden) gradient at its input */
  float *dq;        /* (rows, latent) */
  float *dz;        /* (rows, latent) */
};

/* ---- identity bottleneck and quantizer helpers ---- */

static vqc_status identity_forward(void *ctx, const float *z, int64_t rows,
                                   int64_t dim, float *q, float *row_loss) {
  memcpy(q, z, (size_t)(rows * dim) * sizeof(float));
  memset(row_loss, 0, (size_t)rows * sizeof(float));
  return VQC_OK;
}

static vqc_status identity_backward(void *ctx, const float *z, const float *q,
                                    const float *dq, int64_t rows, int64_t dim,
                                    float dloss_row, float *dz) {
  for (int64_t i = 0; i < rows * dim; i++) dz[i] += dq[i];
  return VQC_OK;
}

vqc_bottleneck vqc_bottleneck_identity(void) {
  vqc_bottleneck b = {"identity", NULL, identity_forward, identity_backward,
                      NULL};
  return b;
}

void vqc_commitment_rows(const float *z, const float *q, int64_t rows,
                         int64_t dim, float weight, float *row_loss) {
  for (int64_t i = 0; i < rows; i++) {
    double sum = 0.0;
    for (int64_t d = 0; d < dim; d++) {
      double e = (double)q[i * dim + d] - (double)z[i * dim + d];
      sum += e * e;
    }
    row_loss[i] = (float)((double)weight * sum / (double)dim);
  }
}

void vqc_straight_through_backward(const float *z, const float *q,
                                   const float *dq, int64_t rows, int64_t dim,
                                   float weight, float dloss_row, float *dz) {
  float c = (float)((double)dloss_row * (double)weight * 2.0 / (double)dim);
  for (int64_t i = 0; i < rows * dim; i++)
    dz[i] += dq[i] + c * (z[i] - q[i]);
}

/* ---- the model ---- */

void vqc_autoencoder_destroy(vqc_autoencoder *ae) {
  if (ae == NULL) return;
  vqc_linear_free(&ae->enc0);
  vqc_linear_free(&ae->enc2);
  vqc_linear_free(&ae->dec0);
  vqc_linear_free(&ae->dec2);
  vqc_param_list_free(&ae->params);
  free(ae->arena);
  free(ae);
}

static vqc_status register_all(vqc_autoencoder *ae) {
  VQC_TRY(vqc_linear_register(&ae->enc0, "encoder.0.", &ae->params));
  VQC_TRY(vqc_linear_register(&ae->enc2, "encoder.2.", &ae->params));
  VQC_TRY(vqc_linear_register(&ae->dec0, "decoder.0.", &ae->params));
  VQC_TRY(vqc_linear_register(&ae->dec2, "decoder.2.", &ae->params));
  if (ae->bn.register_state == NULL) return VQC_OK;
  vqc_param_list state;
  vqc_param_list_init(&state);
  vqc_status s = ae->bn.register_state(ae->bn.ctx, &state);
  if (s == VQC_OK) s = vqc_param_list_extend(&ae->params, &state, "bottleneck.");
  vqc_param_list_free(&state);
  return s;
}

vqc_status vqc_autoencoder_create(const vqc_autoencoder_config *cfg,
                                  vqc_rng *init,
                                  const vqc_bottleneck *bottleneck,
                                  vqc_autoencoder **out) {
  *out = NULL;
  if (cfg == NULL || init == NULL || cfg->din <= 0 || cfg->hidden <= 0 ||
      cfg->latent <= 0)
    return vqc_error(VQC_EINVAL, "autoencoder_create: bad config or NULL rng");
  if (bottleneck != NULL &&
      (bottleneck->forward == NULL || bottleneck->backward == NULL))
    return vqc_error(VQC_EINVAL,
                     "autoencoder_create: bottleneck '%s' lacks forward or "
                     "backward", bottleneck->name ? bottleneck->name : "?");
  vqc_autoencoder *ae = calloc(1, sizeof *ae);
  if (ae == NULL) return vqc_error(VQC_ENOMEM, "autoencoder_create");
  ae->cfg = *cfg;
  ae->bn = bottleneck != NULL ? *bottleneck : vqc_bottleneck_identity();
  ae->rows = -1;
  vqc_param_list_init(&ae->params);

  vqc_status s;
  if ((s = vqc_linear_init(&ae->enc0, cfg->din, cfg->hidden, init)) != VQC_OK ||
      (s = vqc_linear_init(&ae->enc2, cfg->hidden, cfg->latent, init)) != VQC_OK ||
      (s = vqc_linear_init(&ae->dec0, cfg->latent, cfg->hidden, init)) != VQC_OK ||
      (s = vqc_linear_init(&ae->dec2, cfg->hidden, cfg->din, init)) != VQC_OK ||
      (s = register_all(ae)) != VQC_OK)
    goto fail;
  *out = ae;
  return VQC_OK;
fail:
  vqc_autoencoder_destroy(ae);
  return s;
}

/* Makes room for `rows` rows of every activation (keeps the old arena when
 * it is large enough). */
static vqc_status reserve(vqc_autoencoder *ae, int64_t rows) {
  if (rows <= ae->capacity && ae->arena != NULL) return VQC_OK;
  const int64_t din = ae->cfg.din, hid = ae->cfg.hidden, lat = ae->cfg.latent;
  /* x, recon, drecon: din; h1, h2, dh, dpre: hidden; z, q, dq, dz: latent;
   * row_loss: 1. */
  int64_t per_row = 3 * din + 4 * hid + 4 * lat + 1;
  int64_t cap = rows > 0 ? rows : 1;
  float *arena = malloc((size_t)(cap * per_row) * sizeof(float));
  if (arena == NULL)
    return vqc_error(VQC_ENOMEM, "autoencoder: activations for %lld rows",
                     (long long)rows);
  free(ae->arena);
  ae->arena = arena;
  ae->capacity = cap;
  float *p = arena;
  ae->x = p;        p += cap * din;
  ae->recon = p;    p += cap * din;
  ae->drecon = p;   p += cap * din;
  ae->h1 = p;       p += cap * hid;
  ae->h2 = p;       p += cap * hid;
  ae->dh = p;       p += cap * hid;
  ae->dpre = p;     p += cap * hid;
  ae->z = p;        p += cap * lat;
  ae->q = p;        p += cap * lat;
  ae->dq = p;       p += cap * lat;
  ae->dz = p;       p += cap * lat;
  ae->row_loss = p;
  return VQC_OK;
}

vqc_status vqc_autoencoder_forward(vqc_autoencoder *ae, const float *x,
                                   int64_t rows, vqc_ae_loss *loss) {
  if (ae == NULL || rows < 0 || (rows > 0 && x == NULL) || loss == NULL)
    return vqc_error(VQC_EINVAL, "autoencoder_forward: bad arguments");
  VQC_TRY(reserve(ae, rows));
  const int64_t din = ae->cfg.din, hid = ae->cfg.hidden, lat = ae->cfg.latent;
  memset(loss, 0, sizeof *loss);
  ae->rows = rows;
  if (rows == 0) return VQC_OK;

  memcpy(ae->x, x, (size_t)(rows * din) * sizeof(float));
  vqc_linear_forward(&ae->enc0, ae->x, rows, ae->h1);
  vqc_act_forward(ae->cfg.act, ae->h1, rows * hid, ae->h1);
  vqc_linear_forward(&ae->enc2, ae->h1, rows, ae->z);
  vqc_status s = ae->bn.forward(ae->bn.ctx, ae->z, rows, lat, ae->q,
                                ae->row_loss);
  if (s != VQC_OK) {
    ae->rows = -1;
    return s;
  }
  vqc_linear_forward(&ae->dec0, ae->q, rows, ae->h2);
  vqc_act_forward(ae->cfg.act, ae->h2, rows * hid, ae->h2);
  vqc_linear_forward(&ae->dec2, ae->h2, rows, ae->recon);

  loss->recon = vqc_mse_loss(ae->recon, ae->x, rows * din, 0.0f, NULL);
  double sum = 0.0;
  for (int64_t i = 0; i < rows; i++) sum += (double)ae->row_loss[i];
  loss->bottleneck = sum / (double)rows;
  loss->total = loss->recon + loss->bottleneck;
  return VQC_OK;
}

vqc_status vqc_autoencoder_backward(vqc_autoencoder *ae, float grad_scale) {
  if (ae == NULL || ae->rows < 0)
    return vqc_error(VQC_EINVAL, "autoencoder_backward: no forward to go back "
                                 "through");
  const int64_t rows = ae->rows;
  const int64_t din = ae->cfg.din, hid = ae->cfg.hidden, lat = ae->cfg.latent;
  if (rows == 0) return VQC_OK;

  /* Backward functions accumulate, so every scratch gradient starts at 0. */
  memset(ae->drecon, 0, (size_t)(rows * din) * sizeof(float));
  vqc_mse_loss(ae->recon, ae->x, rows * din, grad_scale, ae->drecon);

  /* decoder.2 then act, back to q */
  memset(ae->dh, 0, (size_t)(rows * hid) * sizeof(float));
  vqc_linear_backward(&ae->dec2, ae->h2, ae->drecon, rows, ae->dh);
  memset(ae->dpre, 0, (size_t)(rows * hid) * sizeof(float));
  vqc_act_backward(ae->cfg.act, ae->h2, ae->dh, rows * hid, ae->dpre);
  memset(ae->dq, 0, (size_t)(rows * lat) * sizeof(float));
  vqc_linear_backward(&ae->dec0, ae->q, ae->dpre, rows, ae->dq);

  /* through the bottleneck: loss.bottleneck = mean of row_loss, so each row's
   * term carries grad_scale / rows */
  memset(ae->dz, 0, (size_t)(rows * lat) * sizeof(float));
  float dloss_row = (float)((double)grad_scale / (double)rows);
  VQC_TRY(ae->bn.backward(ae->bn.ctx, ae->z, ae->q, ae->dq, rows, lat,
                          dloss_row, ae->dz));

  /* encoder.2 then act, back to encoder.0 (no input gradient needed) */
  memset(ae->dh, 0, (size_t)(rows * hid) * sizeof(float));
  vqc_linear_backward(&ae->enc2, ae->h1, ae->dz, rows, ae->dh);
  memset(ae->dpre, 0, (size_t)(rows * hid) * sizeof(float));
  vqc_act_backward(ae->cfg.act, ae->h1, ae->dh, rows * hid, ae->dpre);
  vqc_linear_backward(&ae->enc0, ae->x, ae->dpre, rows, NULL);
  return VQC_OK;
}

const vqc_param_list *vqc_autoencoder_params(const vqc_autoencoder *ae) {
  return &ae->params;
}

void vqc_autoencoder_activations(const vqc_autoencoder *ae, const float **z,
                                 const float **q, const float **recon) {
  if (z != NULL) *z = ae->z;
  if (q != NULL) *q = ae->q;
  if (recon != NULL) *recon = ae->recon;
}
