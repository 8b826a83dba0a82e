/* model_autoencoder.c: the autoencoder model: an autoencoder (dim ->
 * hidden -> dim/2 -> hidden -> dim, tanh) with a VQ bottleneck trained by
 * EMA, the rest data-parallel by gradient (model_trained.h). Its codebook
 * updates in the forward, with its collectives, and carries the codebook's
 * faults; the DDP faults live in the gradient average. It skips its
 * bottleneck on an empty shard (bottleneck.h), so every rank needs rows.
 * CPU only. */
#include "model_trained.h"

#include <stdlib.h>

#include "vqc/autoencoder.h"
#include "vqc/bottleneck.h"

/* Latent width of the VQ bottleneck: half the input width, so the codebook
 * sees a real bottleneck. */
static int64_t ae_latent(const vqc_scenario *sc) {
  return sc->dim / 2 > 0 ? sc->dim / 2 : 1;
}

/* ---- the net */

typedef struct ae_net {
  vqc_autoencoder *ae;
  vqc_vq_bottleneck vqb;
} ae_net;

static void ae_net_destroy(void *net) {
  ae_net *n = net;
  if (!n) return;
  vqc_autoencoder_destroy(n->ae);
  vqc_vq_bottleneck_free(&n->vqb);
  free(n);
}

static vqc_status ae_net_create(const vqc_scenario *sc, vqc_rng *init,
                                bool with_fault, vqc_device device,
                                void **out) {
  (void)device; /* no device path (vqc_model_autoencoder.check_cuda) */
  ae_net *n = calloc(1, sizeof *n);
  if (!n) return vqc_error(VQC_ENOMEM, "runner: no memory for the model");
  vqc_status s = VQC_OK;
  vqc_vq_params p;
  vqc_codebook_params(sc, ae_latent(sc),
                      with_fault ? sc->fault : VQC_FAULT_NONE, &p);
  if ((s = vqc_vq_bottleneck_init(&n->vqb, &p, NULL))) goto fail;
  vqc_bottleneck bn = vqc_vq_bottleneck_iface(&n->vqb);
  vqc_autoencoder_config cfg = {sc->dim, sc->hidden, ae_latent(sc),
                                VQC_ACT_TANH};
  if ((s = vqc_autoencoder_create(&cfg, init, &bn, &n->ae))) goto fail;
  *out = n;
  return VQC_OK;
fail:
  ae_net_destroy(n);
  return s;
}

static const vqc_param_list *ae_net_params(const void *net) {
  const ae_net *n = net;
  return vqc_autoencoder_params(n->ae);
}

static vqc_status ae_net_forward_backward(void *net, vqc_comm *comm,
                                          int64_t step, const float *x,
                                          const float *x2, int64_t rows,
                                          float grad_scale, double *loss) {
  (void)x2;
  ae_net *n = net;
  /* The bottleneck's run fields (bottleneck.h): its EMA update and dead
   * codes run in this forward, over comm. */
  n->vqb.comm = comm;
  n->vqb.step = (uint64_t)step;
  n->vqb.train = true;
  vqc_ae_loss l;
  VQC_TRY(vqc_autoencoder_forward(n->ae, x, rows, &l));
  VQC_TRY(vqc_autoencoder_backward(n->ae, grad_scale));
  *loss = l.total;
  return VQC_OK;
}

static bool *ae_net_kmeans_flag(void *net) {
  ae_net *n = net;
  return &n->vqb.vq.initted;
}

static const vqc_net_ops ae_net_ops = {
    .create = ae_net_create,
    .destroy = ae_net_destroy,
    .params = ae_net_params,
    .forward_backward = ae_net_forward_backward,
    .kmeans_flag = ae_net_kmeans_flag,
    .loss_is_global = false,
    .update_in_forward = true,
};

/* ---- the model */

static vqc_status ae_create(vqc_run_model *m) {
  return vqc_trained_create(m, &ae_net_ops);
}

static bool ae_has_fault(const vqc_scenario *sc, vqc_fault f) {
  return vqc_codebook_has_fault(sc, f) || vqc_trained_has_fault(f);
}

/* Bytes of an autoencoder net with latent width lat (run_memory.c's
 * formula; F = 4 bytes a float32), trained and twin:
 *   (B + G)(3D + 4H + 4lat + 1) F   activations (autoencoder.c's arena)
 * + (B + G) 8                       the bottleneck's indices
 * + B D F + G D F                   the shard and the global batch
 * + 10 P F                          weights, grads, Adam's two moments, the
 *                                   snapshot, the twin's weights and grads,
 *                                   the checkers' copies (P = weights:
 *                                   2DH + 2H lat + 2H + D + lat) */
uint64_t vqc_autoencoder_net_bytes(const vqc_scenario *sc, uint64_t B,
                                   uint64_t G, uint64_t lat) {
  const uint64_t D = (uint64_t)sc->dim, H = (uint64_t)sc->hidden;
  const uint64_t F = 4;
  const uint64_t P = 2 * D * H + 2 * H * lat + 2 * H + D + lat;
  return (B + G) * (3 * D + 4 * H + 4 * lat + 1) * F + (B + G) * 8 +
         B * D * F + G * D * F + 10 * P * F;
}

/* The net, plus two codebooks (trained and twin), 8 C lat + 4 C each, and
 * one's update scratch, 16 C lat. */
static uint64_t ae_rank_bytes(const vqc_scenario *sc, uint64_t B,
                              uint64_t G) {
  const uint64_t C = (uint64_t)sc->codebook_size;
  const uint64_t lat = (uint64_t)ae_latent(sc);
  return vqc_autoencoder_net_bytes(sc, B, G, lat) + 2 * (8 * C * lat + 4 * C) +
         16 * C * lat;
}

const vqc_model_ops vqc_model_autoencoder = {
    .has_fault = ae_has_fault,
    .check_cuda = NULL,
    .rows_on_every_rank = true,
    .data = VQC_DATA_CLUSTERS,
    .rank_bytes = ae_rank_bytes,
    .global_batch = true,
    .create = ae_create,
    .step = vqc_trained_step,
    .set_before_update = NULL,
    .source_tensor = NULL,
    .reference_grads = vqc_trained_reference_grads,
    .destroy = vqc_trained_destroy,
};
