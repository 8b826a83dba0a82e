/* model.h: one model family as the harness sees it: its ops table, the
 * registry of the tables, and the model object's common part. Internal to
 * harness/models/ and to the run/ files that ask about models
 * (run_memory.c); the runner sees run_models.h only.
 *
 * One file per family, model_<name>.c (vq, rvq, fsq, clip, autoencoder),
 * defines one vqc_model_ops table, vqc_model_<name>. It answers everything
 * that used to be an `if (model == ...)` somewhere else (what a scenario
 * file may say about it, its name, sizes and defaults, is its row of
 * scenario.h's VQC_MODEL_LIST, data the loader links without this code):
 *   the runner's checks (run_models.c) which faults have a code path in
 *                                      it, whether it runs --device cuda
 *   the memory estimate (run_memory.c) one rank's bytes
 *   the runner (run_models.c)          create, step, state, reference
 *                                      gradients, destroy
 * model_registry.c maps vqc_model_kind to the tables (the rows of
 * scenario.h's VQC_MODEL_LIST). run_models.c is the dispatcher: it owns
 * what every model shares (the rank's shard, the state list, the
 * before-update hook) and calls the table for the rest.
 *
 * Families share two pieces: the EMA codebook (model_codebook.c: vq, rvq,
 * autoencoder) and training by gradient with DDP, Adam and a
 * single-process twin (model_trained.h: fsq, clip, autoencoder). */
#ifndef VQC_MODEL_H
#define VQC_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "run_models.h"
#include "scenario.h"
#include "vqc/comm.h"
#include "vqc/data.h"
#include "vqc/fault.h"
#include "vqc/nn.h"
#include "vqc/status.h"
#include "vqc/tensor.h"
#include "vqc/vq.h"

/* The shape of a model's data (vqc/data.h), drawn per (seed, step, rank). */
typedef enum {
  VQC_DATA_CLUSTERS, /* rows around a few well separated centres (x) */
  VQC_DATA_PAIRS     /* paired features: x and a noisy copy x2 (clip) */
} vqc_model_data;

typedef struct vqc_model_ops {
  /* ---- the checks before anything is built (run_models.c) */
  /* Whether fault f (never VQC_FAULT_NONE) has a code path in this model
   * with sc's sizes. */
  bool (*has_fault)(const vqc_scenario *sc, vqc_fault f);
  /* NULL: no --device cuda path. Else this model's own conditions for
   * running sc with --device cuda over `backend`, once the generic ones
   * passed (run_models.c vqc_run_check_device): VQC_OK, or VQC_EINVAL
   * saying what to run instead. */
  vqc_status (*check_cuda)(const vqc_scenario *sc, vqc_backend backend);
  /* Every rank needs at least one row per step (a collective the model
   * skips on an empty shard would leave the others waiting). */
  bool rows_on_every_rank;
  vqc_model_data data;

  /* ---- memory (run_memory.c, whose header has the whole formula) */
  /* One rank's model bytes with B rows of its own and G in the global
   * batch; saturates at UINT64_MAX (vqc_sat_add) instead of wrapping. */
  uint64_t (*rank_bytes)(const vqc_scenario *sc, uint64_t B, uint64_t G);
  /* Every rank holds the global batch, so memory grows with the square of
   * the rank count (said in the refusal's message). */
  bool global_batch;

  /* ---- the model (run_models.c; m's common part is filled first) */
  /* Builds the family's state into m->impl, adds its replicated tensors
   * to m->state (in their fixed order) and sets m->indices where it has
   * codes. On failure m is destroyed by the caller (destroy must accept a
   * half-built impl). */
  vqc_status (*create)(vqc_run_model *m);
  /* One training step on m->x (and m->x2), the shard of `step`, already
   * drawn; calls vqc_model_before_update (or has its codebooks call it)
   * right before the first write of the state. *loss: this rank's. */
  vqc_status (*step)(vqc_run_model *m, int64_t step, double *loss);
  /* NULL, or hands m->before_update on to code that calls it itself
   * (the host codebooks); called after m->before_update is set. */
  void (*set_before_update)(vqc_run_model *m);
  /* NULL, or the device tensor that holds state entry `name` (NULL when
   * the host entry is the source): vqc_run_model_source_digest. */
  const vqc_tensor *(*source_tensor)(const vqc_run_model *m,
                                     const char *name);
  /* NULL for the models not trained by gradient; else
   * vqc_run_model_reference_grads (run_models.h). */
  vqc_status (*reference_grads)(vqc_run_model *m, int64_t step,
                                vqc_param_list *grads);
  /* Frees m->impl (NULL or half-built too). */
  void (*destroy)(vqc_run_model *m);
} vqc_model_ops;

/* ---- the registry (model_registry.c) */

/* The table of `kind`; NULL outside the list. */
const vqc_model_ops *vqc_model_ops_of(vqc_model_kind kind);
#define VQC_MODEL_DECLARE(e, name, sizes, defaults)                         \
  extern const vqc_model_ops vqc_model_##name;
VQC_MODEL_LIST(VQC_MODEL_DECLARE)
#undef VQC_MODEL_DECLARE

/* ---- the model object: what every family shares (run_models.c fills it
 * before ops->create) */

struct vqc_run_model {
  const vqc_model_ops *ops;
  const vqc_scenario *sc;
  vqc_comm *comm;
  vqc_device device;        /* where the hot path runs (run_models.h) */
  int rank, size;
  int64_t *sizes;           /* (size) rows of every rank */
  int64_t rows;             /* this rank's rows */
  int64_t global_rows;
  vqc_cluster_data cdata;   /* VQC_DATA_CLUSTERS */
  vqc_pair_data_config pdata; /* VQC_DATA_PAIRS */
  float *x, *x2;            /* (max(rows, 1), D) this rank's shard of the
                               step (x2: the paired features) */
  vqc_run_before_update_fn before_update; /* NULL: none */
  void *before_update_user;
  vqc_param_list state;     /* every replicated tensor (ops->create adds) */
  const int64_t *indices;   /* (rows, Q) codes of the last step, owned by
                               impl; NULL for models without codes */
  void *impl;               /* the family's state: ops->create allocates,
                               ops->destroy frees */
};

/* ---- helpers the families share (run_models.c) */

/* Runs m->before_update (VQC_OK when none is set). */
vqc_status vqc_model_before_update(vqc_run_model *m);
/* The global batch of `step` (every rank's shard, in rank order) into gx
 * (and gx2 for VQC_DATA_PAIRS), each (global_rows, D). */
vqc_status vqc_model_global_batch(vqc_run_model *m, int64_t step, float *gx,
                                  float *gx2);
/* dev <- the numel(dev) elements at host, read in dev's dtype and shape
 * (dev contiguous). */
vqc_status vqc_model_upload(vqc_tensor *dev, const void *host);
/* host <- the numel(dev) elements of dev (contiguous). */
vqc_status vqc_model_download(void *host, const vqc_tensor *dev);

/* ---- the EMA codebook (model_codebook.c: vq, rvq, autoencoder) */

/* vq.h's defaults for a (codebook_size, dim) codebook with sc's dead-code
 * threshold, k-means init and seed, and `fault`. */
void vqc_codebook_params(const vqc_scenario *sc, int64_t dim, vqc_fault fault,
                         vqc_vq_params *p);
/* Whether f lives in the EMA codebook's code (vq_ema.c, vq_sampler.c) and
 * sc's sizes let it act. */
bool vqc_codebook_has_fault(const vqc_scenario *sc, vqc_fault f);
/* Adds vq's state to l under prefix ("codebook." or "layers.<l>."): embed,
 * cluster_size, embed_avg. EMA-trained, so no grad. */
vqc_status vqc_codebook_register(vqc_param_list *l, vqc_vq *vq,
                                 const char *prefix);

/* ---- saturating byte counts (the memory estimates) */

static inline uint64_t vqc_sat_add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}
static inline uint64_t vqc_sat_mul(uint64_t a, uint64_t b) {
  return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

#endif /* VQC_MODEL_H */
