/* model_vq.c: the vq model: one VQ codebook trained by EMA, with dead-code
 * expiry and k-means init as the scenario asks (run_models.h).
 *
 * On the CPU a step is vqc_vq_forward (vq.h). With --device cuda the
 * codebook state (embed, cluster_size, embed_avg) and the batch live in
 * device tensors (vq_device) and the kernels of vqc/gpu.h update them;
 * k-means init and dead-code expiry have no kernels and run on the host
 * copy, which every step ends by refreshing: the checkers read host memory
 * (run_models.h "Device"). */
#include "model.h"

#include <stdlib.h>
#include <string.h>

#include "vqc/gpu.h"

/* ---- the codebook on the device (--device cuda) */

/* While a step runs the device codebook is the state; between steps the
 * host vqc_vq holds an exact copy (the staging the checkers read, and where
 * k-means init and dead-code expiry run). */
typedef struct vq_device {
  vqc_tensor embed;        /* (C, D) f32 */
  vqc_tensor cluster_size; /* (C) f32 */
  vqc_tensor embed_avg;    /* (C, D) f32 */
  vqc_tensor x;            /* (rows, D) f32: this rank's shard */
  vqc_tensor indices;      /* (rows) i64 */
  vqc_tensor quantized;    /* (rows, D) f32 */
  vqc_tensor counts;       /* (C) f32: this step's counts, then all ranks' */
  vqc_tensor sums;         /* (C, D) f32: the same for the sums */
  vqc_tensor host_counts;  /* (C) f32, host: staging for threads and mpi */
  vqc_tensor host_sums;    /* (C, D) f32, host: the same */
} vq_device;

static void vq_device_free(vq_device *g) {
  vqc_tensor *all[] = {&g->embed,  &g->cluster_size, &g->embed_avg,
                       &g->x,      &g->indices,      &g->quantized,
                       &g->counts, &g->sums,         &g->host_counts,
                       &g->host_sums};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    vqc_tensor_free(all[i]);
}

/* Device copies of vq's state and buffers for `rows` rows per step. */
static vqc_status vq_device_init(vq_device *g, const vqc_vq *vq,
                                 int64_t rows) {
  const int64_t C = vq->p.codebook_size, D = vq->p.dim;
  const int64_t rows_d[2] = {rows, D}, codes_d[2] = {C, D};
  const vqc_device dev = VQC_DEVICE_CUDA;
  VQC_TRY(vqc_tensor_to(&vq->embed, dev, &g->embed));
  VQC_TRY(vqc_tensor_to(&vq->cluster_size, dev, &g->cluster_size));
  VQC_TRY(vqc_tensor_to(&vq->embed_avg, dev, &g->embed_avg));
  VQC_TRY(vqc_tensor_empty(&g->x, VQC_F32, 2, rows_d, dev));
  VQC_TRY(vqc_tensor_empty(&g->indices, VQC_I64, 1, &rows, dev));
  VQC_TRY(vqc_tensor_empty(&g->quantized, VQC_F32, 2, rows_d, dev));
  VQC_TRY(vqc_tensor_empty(&g->counts, VQC_F32, 1, &C, dev));
  VQC_TRY(vqc_tensor_empty(&g->sums, VQC_F32, 2, codes_d, dev));
  VQC_TRY(vqc_tensor_empty(&g->host_counts, VQC_F32, 1, &C, VQC_DEVICE_CPU));
  return vqc_tensor_empty(&g->host_sums, VQC_F32, 2, codes_d, VQC_DEVICE_CPU);
}

/* The host codebook <- the device one (the copy the checkers digest). */
static vqc_status codebook_to_host(vqc_vq *vq, const vq_device *g) {
  VQC_TRY(vqc_tensor_copy(&vq->embed, &g->embed));
  VQC_TRY(vqc_tensor_copy(&vq->cluster_size, &g->cluster_size));
  return vqc_tensor_copy(&vq->embed_avg, &g->embed_avg);
}

/* The device codebook <- the host one (after a host-side change). */
static vqc_status codebook_to_device(vq_device *g, const vqc_vq *vq) {
  VQC_TRY(vqc_tensor_copy(&g->embed, &vq->embed));
  VQC_TRY(vqc_tensor_copy(&g->cluster_size, &vq->cluster_size));
  return vqc_tensor_copy(&g->embed_avg, &vq->embed_avg);
}

/* vq_ema.c's update with the kernels, in its order: this rank's counts and
 * sums of the rows x by their codes; all_reduce(SUM) of the counts, then of
 * the sums; cluster_size and embed_avg lerp toward them; E renormalized.
 * The all_reduces: NCCL reduces the device tensors in place; threads and
 * mpi move host memory, so the statistics go through host staging tensors
 * (device -> host, all_reduce in place, host -> device). Either way the
 * ledger sees the same two collectives as on the CPU path, and the reduced
 * tensors are the ones read afterwards. */
static vqc_status vq_device_ema(vq_device *g, vqc_comm *comm,
                                const vqc_vq_params *p, int64_t M) {
  const int64_t C = p->codebook_size, D = p->dim;
  float *counts = vqc_tensor_data(&g->counts);
  float *sums = vqc_tensor_data(&g->sums);
  VQC_TRY(vqc_gpu_vq_stats(vqc_tensor_data(&g->x), M, D,
                           vqc_tensor_data(&g->indices), C, counts, sums));
  if (vqc_comm_backend(comm) == VQC_BACKEND_NCCL) {
    VQC_TRY(vqc_all_reduce_tensor(comm, &g->counts, VQC_SUM));
    VQC_TRY(vqc_all_reduce_tensor(comm, &g->sums, VQC_SUM));
  } else {
    VQC_TRY(vqc_tensor_copy(&g->host_counts, &g->counts));
    VQC_TRY(vqc_tensor_copy(&g->host_sums, &g->sums));
    VQC_TRY(vqc_all_reduce_tensor(comm, &g->host_counts, VQC_SUM));
    VQC_TRY(vqc_all_reduce_tensor(comm, &g->host_sums, VQC_SUM));
    VQC_TRY(vqc_tensor_copy(&g->counts, &g->host_counts));
    VQC_TRY(vqc_tensor_copy(&g->sums, &g->host_sums));
  }
  /* w = float32(1 - decay) computed in double, as vq_ema.c does. */
  const float w = (float)(1.0 - p->decay);
  float *cs = vqc_tensor_data(&g->cluster_size);
  float *avg = vqc_tensor_data(&g->embed_avg);
  VQC_TRY(vqc_gpu_lerp(cs, counts, (size_t)C, w));
  VQC_TRY(vqc_gpu_lerp(avg, sums, (size_t)(C * D), w));
  return vqc_gpu_vq_renormalize(cs, avg, C, D, p->eps,
                                vqc_tensor_data(&g->embed));
}

/* ---- the model */

typedef struct vq_model {
  vqc_vq vq;          /* with --device cuda, the host copy */
  vq_device dev;      /* --device cuda: the device state */
  int64_t *indices;   /* (rows) */
  float *quantized;   /* (rows, D) */
} vq_model;

static void vq_destroy(vqc_run_model *m) {
  vq_model *v = m->impl;
  if (!v) return;
  vqc_vq_free(&v->vq);
  vq_device_free(&v->dev);
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
    VQC_TRY(vq_device_init(&v->dev, &v->vq, m->rows));
  return VQC_OK;
}

/* One step with --device cuda, as vqc_vq_forward orders it (k-means init,
 * nearest codes, E[indices] before the update, loss, EMA, dead-code
 * expiry). On entry the host codebook equals the device one; on return
 * too. */
static vqc_status vq_device_step(vqc_run_model *m, vq_model *v, int64_t step,
                                 float *loss) {
  vqc_vq *vq = &v->vq;
  vq_device *g = &v->dev;
  const vqc_vq_ctx ctx = {m->comm, (uint64_t)step, NULL, 0};
  const int64_t C = vq->p.codebook_size, D = vq->p.dim, M = m->rows;
  /* 1. k-means init has no kernel: it runs on the host copy (with its
   * collectives and draws), and the result goes up. */
  if (vq->p.kmeans_init && !vq->initted) {
    VQC_TRY(vqc_vq_kmeans_init(vq, &ctx, m->x, M));
    VQC_TRY(codebook_to_device(g, vq));
  }
  /* 2. nearest codes and quantized = E[indices], before this step's update;
   * both come back for the loss (and for the caller's outputs). */
  VQC_TRY(vqc_model_upload(&g->x, m->x));
  const float *E = vqc_tensor_data(&g->embed);
  VQC_TRY(vqc_gpu_vq_nearest(vqc_tensor_data(&g->x), M, E, C, D,
                             vqc_tensor_data(&g->indices), NULL));
  VQC_TRY(vqc_gpu_vq_gather(E, C, D, vqc_tensor_data(&g->indices), M,
                            vqc_tensor_data(&g->quantized)));
  VQC_TRY(vqc_model_download(v->indices, &g->indices));
  VQC_TRY(vqc_model_download(v->quantized, &g->quantized));
  /* 3. the commitment loss: one number for the progress line, on the host */
  *loss = vqc_vq_commitment_loss(m->x, v->quantized, M, D,
                                 vq->p.commitment_weight);
  if (vq->p.freeze_codebook) return VQC_OK;
  /* 4. the EMA update with the kernels */
  VQC_TRY(vq_device_ema(g, m->comm, &vq->p, M));
  /* 5. staging: the host copy the checkers read. Dead-code expiry has no
   * kernel either: it runs there and what it replaced goes up. */
  VQC_TRY(codebook_to_host(vq, g));
  int64_t expired = 0;
  VQC_TRY(vqc_vq_expire_codes(vq, &ctx, m->x, M, NULL, &expired));
  return expired > 0 ? codebook_to_device(g, vq) : VQC_OK;
}

static vqc_status vq_step(vqc_run_model *m, int64_t step, double *loss) {
  vq_model *v = m->impl;
  float f = 0.0f;
  if (m->device == VQC_DEVICE_CUDA) {
    /* The kernels update the state: the hook runs before the step. */
    VQC_TRY(vqc_model_before_update(m));
    VQC_TRY(vq_device_step(m, v, step, &f));
  } else {
    /* The codebook calls the hook itself (vq.h before_update). */
    const vqc_vq_ctx ctx = {m->comm, (uint64_t)step, NULL, 0};
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
