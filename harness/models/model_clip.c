/* model_clip.c: the clip model: two linear towers (image and text, dim ->
 * hidden) and CLIP's contrastive loss over the global batch (each rank's
 * rows are the others' negatives: the loss gathers every rank's features),
 * trained data-parallel by gradient (model_trained.h). Its data are paired
 * features (x, x2). The nograd_all_gather fault is the loss's gather mode.
 * CPU only. */
#include "model_trained.h"

#include <stdlib.h>
#include <string.h>

#include "vqc/clip.h"

/* CLIP's initial temperature, exp(t) = 1 / 0.07. */
#define CLIP_LOGIT_SCALE (1.0f / 0.07f)

typedef struct clip_net {
  vqc_linear img, txt;          /* the towers (D -> H) */
  vqc_param_list params;        /* "img.weight", ..., "txt.bias" */
  vqc_clip_config clip;
  int64_t hidden;               /* feature width H */
  float *fi, *ft, *dfi, *dft;   /* scratch (cap, H): features, gradients */
  int64_t cap;                  /* rows the scratch holds */
} clip_net;

static void clip_net_destroy(void *net) {
  clip_net *n = net;
  if (!n) return;
  vqc_linear_free(&n->img);
  vqc_linear_free(&n->txt);
  vqc_param_list_free(&n->params);
  free(n->fi);
  free(n->ft);
  free(n->dfi);
  free(n->dft);
  free(n);
}

static vqc_status clip_net_create(const vqc_scenario *sc, vqc_rng *init,
                                  bool with_fault, vqc_device device,
                                  void **out) {
  (void)device; /* no device path (vqc_model_clip.check_cuda) */
  clip_net *n = calloc(1, sizeof *n);
  if (!n) return vqc_error(VQC_ENOMEM, "runner: no memory for the model");
  vqc_param_list_init(&n->params);
  const vqc_fault fault = with_fault ? sc->fault : VQC_FAULT_NONE;
  vqc_status s = VQC_OK;
  n->hidden = sc->hidden;
  n->clip.gather = fault == VQC_FAULT_NOGRAD_ALL_GATHER ? VQC_GATHER_NO_GRAD
                                                        : VQC_GATHER_WITH_GRAD;
  n->clip.local_loss = false;
  n->clip.logit_scale = CLIP_LOGIT_SCALE;
  if ((s = vqc_linear_init(&n->img, sc->dim, sc->hidden, init)) ||
      (s = vqc_linear_init(&n->txt, sc->dim, sc->hidden, init)) ||
      (s = vqc_linear_register(&n->img, "img.", &n->params)) ||
      (s = vqc_linear_register(&n->txt, "txt.", &n->params))) {
    clip_net_destroy(n);
    return s;
  }
  *out = n;
  return VQC_OK;
}

static const vqc_param_list *clip_net_params(const void *net) {
  const clip_net *n = net;
  return &n->params;
}

/* Grows the scratch to `rows` rows. */
static vqc_status clip_net_reserve(clip_net *n, int64_t rows) {
  if (rows <= n->cap) return VQC_OK;
  const size_t bytes = (size_t)(rows * n->hidden) * sizeof(float);
  float **bufs[4] = {&n->fi, &n->ft, &n->dfi, &n->dft};
  for (int i = 0; i < 4; i++) {
    float *q = realloc(*bufs[i], bytes);
    if (!q) return vqc_error(VQC_ENOMEM, "runner: clip scratch for %lld rows",
                             (long long)rows);
    *bufs[i] = q;
  }
  n->cap = rows;
  return VQC_OK;
}

/* Both towers forward, the loss over every rank's features (comm), both
 * backward. */
static vqc_status clip_net_forward_backward(void *net, vqc_comm *comm,
                                            int64_t step, const float *x,
                                            const float *x2, int64_t rows,
                                            float grad_scale, double *loss) {
  (void)step, (void)grad_scale; /* the loss is the global batch's */
  clip_net *n = net;
  VQC_TRY(clip_net_reserve(n, rows > 0 ? rows : 1));
  const size_t nf = (size_t)(rows * n->hidden);
  vqc_linear_forward(&n->img, x, rows, n->fi);
  vqc_linear_forward(&n->txt, x2, rows, n->ft);
  memset(n->dfi, 0, nf * sizeof(float));
  memset(n->dft, 0, nf * sizeof(float));
  VQC_TRY(vqc_clip_loss(comm, &n->clip, n->fi, n->ft, rows, n->hidden, loss,
                        n->dfi, n->dft, NULL));
  vqc_linear_backward(&n->img, x, n->dfi, rows, NULL);
  vqc_linear_backward(&n->txt, x2, n->dft, rows, NULL);
  return VQC_OK;
}

static const vqc_net_ops clip_net_ops = {
    .create = clip_net_create,
    .destroy = clip_net_destroy,
    .params = clip_net_params,
    .forward_backward = clip_net_forward_backward,
    .kmeans_flag = NULL,
    .loss_is_global = true,
    .update_in_forward = false,
};

/* ---- the model */

static vqc_status clip_create(vqc_run_model *m) {
  return vqc_trained_create(m, &clip_net_ops);
}

/* The DDP faults, and the contrastive loss's feature gather. */
static bool clip_has_fault(const vqc_scenario *sc, vqc_fault f) {
  (void)sc;
  return f == VQC_FAULT_NOGRAD_ALL_GATHER || vqc_trained_has_fault(f);
}

/* Bytes (run_memory.c's formula, F = 4 bytes a float32):
 *   2 B D F + 2 G D F      both modalities' shard and global batch
 * + 4 (B + G) H F          the towers' outputs and gradients
 * + 8 G^2 + 48 G H + 24 G  one contrastive loss call (clip_loss.c: the
 *                          (G, G) similarity in double, the gathered
 *                          features)
 * + 10 P F                 P = 2 (DH + H)
 * 8 G^2 alone can pass 2^64 within the scenario ranges: it saturates. */
static uint64_t clip_rank_bytes(const vqc_scenario *sc, uint64_t B,
                                uint64_t G) {
  const uint64_t D = (uint64_t)sc->dim, H = (uint64_t)sc->hidden;
  const uint64_t F = 4;
  const uint64_t P = 2 * (D * H + H);
  const uint64_t b = 2 * B * D * F + 2 * G * D * F + 4 * (B + G) * H * F +
                     48 * G * H + 24 * G + 10 * P * F;
  return vqc_sat_add(b, vqc_sat_mul(8 * G, G));
}

const vqc_model_ops vqc_model_clip = {
    .has_fault = clip_has_fault,
    .check_cuda = NULL,
    .rows_on_every_rank = false,
    .data = VQC_DATA_PAIRS,
    .rank_bytes = clip_rank_bytes,
    .global_batch = true,
    .create = clip_create,
    .step = vqc_trained_step,
    .set_before_update = NULL,
    .source_tensor = NULL,
    .reference_grads = vqc_trained_reference_grads,
    .destroy = vqc_trained_destroy,
};
