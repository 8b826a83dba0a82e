/* model_rvq.c: the rvq model: residual VQ, num_quantizers EMA codebooks
 * each quantizing what the layers before left, with quantize dropout (a
 * random number of layers per step, the seed agreed across ranks). Dropout
 * is on from step 1: step 0 is a warm-up without it, so every rank agrees
 * on a baseline before the dropout seed sync first runs. CPU only. */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>

#include "vqc/rvq.h"

typedef struct rvq_model {
  vqc_rvq rvq;
  int64_t *indices;   /* (rows, Q) */
  float *quantized;   /* (rows, D) */
  float *losses;      /* (Q) each layer's loss */
} rvq_model;

static void rvq_destroy(vqc_run_model *m) {
  rvq_model *r = m->impl;
  if (!r) return;
  vqc_rvq_free(&r->rvq);
  free(r->indices);
  free(r->quantized);
  free(r->losses);
  free(r);
  m->impl = NULL;
}

static vqc_status rvq_create(vqc_run_model *m) {
  const vqc_scenario *sc = m->sc;
  rvq_model *r = calloc(1, sizeof *r);
  if (!r) return vqc_error(VQC_ENOMEM, "runner: no memory for the model");
  m->impl = r;
  const int Q = sc->num_quantizers;
  const size_t rows = (size_t)(m->rows > 0 ? m->rows : 1);
  r->indices = malloc(rows * (size_t)Q * sizeof(int64_t));
  r->quantized = malloc(rows * (size_t)sc->dim * sizeof(float));
  r->losses = malloc((size_t)Q * sizeof(float));
  if (!r->indices || !r->quantized || !r->losses)
    return vqc_error(VQC_ENOMEM, "runner: outputs of %zu rows", rows);
  m->indices = r->indices;
  vqc_rvq_params p;
  vqc_rvq_params_default(&p, Q, sc->dim, sc->codebook_size);
  p.layer.threshold_ema_dead_code = sc->threshold_dead_code;
  p.layer.kmeans_init = sc->kmeans_init;
  p.layer.seed = sc->seed;
  p.layer.fault = sc->fault;
  p.quantize_dropout = true;
  p.fault = sc->fault;
  VQC_TRY(vqc_rvq_init(&r->rvq, &p, NULL));
  for (int l = 0; l < Q; l++) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "layers.%d.", l);
    VQC_TRY(vqc_codebook_register(&m->state, &r->rvq.layers[l], prefix));
  }
  return VQC_OK;
}

/* The codebooks call the hook themselves (set_before_update). */
static vqc_status rvq_step(vqc_run_model *m, int64_t step, double *loss) {
  rvq_model *r = m->impl;
  const vqc_vq_ctx ctx = {m->comm, (uint64_t)step, NULL, 0};
  /* Step 0 is a warm-up without quantize dropout (see the top). */
  r->rvq.p.quantize_dropout = step >= 1;
  VQC_TRY(vqc_rvq_forward(&r->rvq, &ctx, m->x, m->rows, true, r->indices,
                          r->quantized, r->losses, NULL));
  double l = 0.0;
  for (int q = 0; q < m->sc->num_quantizers; q++) l += r->losses[q];
  *loss = l;
  return VQC_OK;
}

/* Each codebook calls the hook right before its k-means init or EMA
 * update (vq.h before_update). */
static void rvq_set_before_update(vqc_run_model *m) {
  rvq_model *r = m->impl;
  for (int l = 0; l < m->sc->num_quantizers; l++) {
    r->rvq.layers[l].before_update = m->before_update;
    r->rvq.layers[l].before_update_user = m->before_update_user;
  }
}

/* The codebook faults, and the dropout seed sync of rvq.c, which needs at
 * least two layers for the dropout to choose among. */
static bool rvq_has_fault(const vqc_scenario *sc, vqc_fault f) {
  if (f == VQC_FAULT_UNSYNCED_DROPOUT_SEED ||
      f == VQC_FAULT_SEED_SYNC_SOME_RANKS)
    return sc->num_quantizers > 1;
  return vqc_codebook_has_fault(sc, f);
}

/* Bytes (run_memory.c's formula, F = 4 bytes a float32):
 *   B (16D + 8Q + 8)      x, quantized, the forward's residual and layer
 *                         output, indices (B, Q) and one layer's
 * + Q (8CD + 4C) + 16CD   Q codebooks and one layer's scratch
 * + 8B with kmeans_init   its per-row assignments */
static uint64_t rvq_rank_bytes(const vqc_scenario *sc, uint64_t B,
                               uint64_t G) {
  (void)G;
  const uint64_t D = (uint64_t)sc->dim, C = (uint64_t)sc->codebook_size;
  const uint64_t Q =
      (uint64_t)(sc->num_quantizers > 0 ? sc->num_quantizers : 1);
  uint64_t b = B * (16 * D + 8 * Q + 8) + Q * (8 * C * D + 4 * C) +
               16 * C * D;
  if (sc->kmeans_init) b += 8 * B;
  return b;
}

const vqc_model_ops vqc_model_rvq = {
    .has_fault = rvq_has_fault,
    .check_cuda = NULL,
    .rows_on_every_rank = false,
    .data = VQC_DATA_CLUSTERS,
    .rank_bytes = rvq_rank_bytes,
    .global_batch = false,
    .create = rvq_create,
    .step = rvq_step,
    .set_before_update = rvq_set_before_update,
    .source_tensor = NULL,
    .reference_grads = NULL,
    .destroy = rvq_destroy,
};
