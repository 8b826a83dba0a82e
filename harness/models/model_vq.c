/* model_vq.c: the vq model: one VQ codebook trained by EMA, with dead-code
 * expiry and k-means init as the scenario asks (run_models.h).
 *
 * On the CPU a step is vqc_vq_forward (vq.h). With --device cuda it is its
 * device twin vqc_vq_device_forward (vq.h): the codebook state (embed,
 * cluster_size, embed_avg) and the batch live in device tensors
 * (vqc_vq_device) and the kernels of vqc/gpu.h update them; k-means init
 * and dead-code expiry run on the host copy, which every step ends by
 * refreshing: the checkers read host memory (run_models.h "Device"). */
#include "model.h"

#include <stdlib.h>
#include <string.h>

#include "vqc/vq.h"

/* ---- the model */

typedef struct vq_model {
  vqc_vq vq;          /* with --device cuda, the host copy */
  vqc_vq_device dev;  /* --device cuda: the device state */
  int64_t *indices;   /* (rows) */
  float *quantized;   /* (rows, D) */
} vq_model;

static void vq_destroy(vqc_run_model *m) {
  vq_model *v = m->impl;
  if (!v) return;
  vqc_vq_free(&v->vq);
  vqc_vq_device_free(&v->dev);
  free(v->indices);
  free(v->quantized);
  free(v);
  m->impl = NULL;
}

static vqc_status vq_create(vqc_run_model *m) {
  const vqc_scenario *sc = m->sc;
  vq_model *v = calloc(1, sizeof *v);
  if (!v) return vqc_error(VQC_ENOMEM, "runner: no memory for the model");
  m->impl = v;
  const size_t rows = (size_t)(m->rows > 0 ? m->rows : 1);
  v->indices = malloc(rows * sizeof(int64_t));
  v->quantized = malloc(rows * (size_t)sc->dim * sizeof(float));
  if (!v->indices || !v->quantized)
    return vqc_error(VQC_ENOMEM, "runner: outputs of %zu rows", rows);
  m->indices = v->indices;
  vqc_vq_params p;
  vqc_codebook_params(sc, sc->dim, sc->fault, &p);
  VQC_TRY(vqc_vq_init(&v->vq, &p, NULL));
  VQC_TRY(vqc_codebook_register(&m->state, &v->vq, "codebook."));
  if (m->device == VQC_DEVICE_CUDA)
    VQC_TRY(vqc_vq_device_init(&v->dev, &v->vq, m->rows));
  return VQC_OK;
}

static vqc_status vq_step(vqc_run_model *m, int64_t step, double *loss) {
  vq_model *v = m->impl;
  float f = 0.0f;
  const vqc_vq_ctx ctx = {m->comm, (uint64_t)step, NULL, 0};
  if (m->device == VQC_DEVICE_CUDA) {
    /* The kernels update the state: the hook runs before the step. */
    VQC_TRY(vqc_model_before_update(m));
    VQC_TRY(vqc_vq_device_forward(&v->vq, &v->dev, &ctx, m->x, m->rows, true,
                                  v->indices, v->quantized, &f));
  } else {
    /* The codebook calls the hook itself (vq.h before_update). */
    VQC_TRY(vqc_vq_forward(&v->vq, &ctx, m->x, m->rows, true, v->indices,
                           v->quantized, &f));
  }
  *loss = f;
  return VQC_OK;
}

static void vq_set_before_update(vqc_run_model *m) {
  vq_model *v = m->impl;
  /* On the host the codebook calls it right before its k-means init or
   * EMA update (the nearest-code search overlaps); on the device the step
   * calls it. */
  if (m->device != VQC_DEVICE_CUDA) {
    v->vq.before_update = m->before_update;
    v->vq.before_update_user = m->before_update_user;
  }
}

/* With --device cuda the codebook's source is the device tensor. */
static const vqc_tensor *vq_source_tensor(const vqc_run_model *m,
                                          const char *name) {
  const vq_model *v = m->impl;
  if (m->device != VQC_DEVICE_CUDA) return NULL;
  const vqc_tensor *dev[3] = {&v->dev.embed, &v->dev.cluster_size,
                              &v->dev.embed_avg};
  const char *names[3] = {"codebook.embed", "codebook.cluster_size",
                          "codebook.embed_avg"};
  for (int i = 0; i < 3; i++)
    if (strcmp(name, names[i]) == 0) return dev[i];
  return NULL;
}

static bool vq_has_fault(const vqc_scenario *sc, vqc_fault f) {
  return vqc_codebook_has_fault(sc, f);
}

/* --device cuda: any backend, but NCCL moves device buffers only, and
 * dead-code expiry and k-means init run on the host. */
static vqc_status vq_check_cuda(const vqc_scenario *sc, vqc_backend backend) {
  if (backend == VQC_BACKEND_NCCL &&
      (sc->threshold_dead_code > 0.0 || sc->kmeans_init))
    return vqc_error(VQC_EINVAL, "%s: dead-code expiry and k-means init run "
                     "on the host and their collectives move host buffers, "
                     "which NCCL cannot: use --backend mpi with --device "
                     "cuda", sc->path);
  return VQC_OK;
}

/* Bytes (run_memory.c's formula, F = 4 bytes a float32):
 *   B (8D + 8)        x, quantized (F each per element), indices (int64)
 * + C D 24 + 4C       embed, embed_avg; the step's scratch: the EMA's
 *                     double accumulator, the nearest-code panels, the
 *                     collective's copy
 * + 8B with kmeans_init   its per-row assignments */
static uint64_t vq_rank_bytes(const vqc_scenario *sc, uint64_t B,
                              uint64_t G) {
  (void)G;
  const uint64_t D = (uint64_t)sc->dim, C = (uint64_t)sc->codebook_size;
  uint64_t b = B * (8 * D + 8) + C * D * 24 + 4 * C;
  if (sc->kmeans_init) b += 8 * B;
  return b;
}

const vqc_model_ops vqc_model_vq = {
    .has_fault = vq_has_fault,
    .check_cuda = vq_check_cuda,
    .rows_on_every_rank = false,
    .data = VQC_DATA_CLUSTERS,
    .rank_bytes = vq_rank_bytes,
    .global_batch = false,
    .create = vq_create,
    .step = vq_step,
    .set_before_update = vq_set_before_update,
    .source_tensor = vq_source_tensor,
    .reference_grads = NULL,
    .destroy = vq_destroy,
};
