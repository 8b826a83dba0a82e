/* run_models.c: the models scenarios train (see run_models.h): the
 * dispatcher between the runner and the models' ops tables (model.h).
 *
 * What every model shares lives here: the checks before anything is built
 * (the scenario's fault, the device), the rank's row counts and its shard
 * of every step (drawn from (seed, step, rank), so each rank has its own
 * without a broadcast), the state list, the before-update hook. What a
 * model does is its table's: create, step, the reference gradients,
 * destroy, one file per model (model_vq.c, model_rvq.c, model_fsq.c,
 * model_clip.c, model_autoencoder.c). Nothing here asks which model it
 * is. */
#include "run_models.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "vqc/data.h"
#include "vqc/digest.h"
#include "vqc/gpu.h"

/* Synthetic data (VQC_DATA_CLUSTERS): a handful of well separated
 * clusters, so a codebook has structure to find and most codes of a large
 * codebook stay unused. */
#define DATA_CLUSTERS 8
#define DATA_CENTRE_STD 1.0f
#define DATA_NOISE_STD 0.25f
/* Pairs (VQC_DATA_PAIRS): image and text are the same signal plus this
 * much noise. */
#define PAIR_NOISE_STD 0.3f

/* ---- helpers the models share (model.h) */

vqc_status vqc_model_upload(vqc_tensor *dev, const void *host) {
  vqc_tensor h = {0};
  VQC_TRY(vqc_tensor_wrap(&h, (void *)host, dev->dtype, dev->ndim,
                          dev->shape));
  /* vqc_tensor_copy moves bytes between any two devices. */
  vqc_status s = vqc_tensor_copy(dev, &h);
  vqc_tensor_free(&h);
  return s;
}

vqc_status vqc_model_download(void *host, const vqc_tensor *dev) {
  vqc_tensor h = {0};
  VQC_TRY(vqc_tensor_wrap(&h, host, dev->dtype, dev->ndim, dev->shape));
  vqc_status s = vqc_tensor_copy(&h, dev);
  vqc_tensor_free(&h);
  return s;
}

vqc_status vqc_model_before_update(vqc_run_model *m) {
  return m->before_update ? m->before_update(m->before_update_user) : VQC_OK;
}

vqc_status vqc_model_global_batch(vqc_run_model *m, int64_t step, float *gx,
                                  float *gx2) {
  if (m->ops->data == VQC_DATA_PAIRS)
    return vqc_pair_data_global(&m->pdata, (uint64_t)step, m->size, m->sizes,
                                gx, gx2);
  return vqc_cluster_data_global(&m->cdata, (uint64_t)step, m->size, m->sizes,
                                 gx, NULL);
}

/* This rank's shard of `step` into m->x (and m->x2). */
static vqc_status shard(vqc_run_model *m, int64_t step) {
  if (m->ops->data == VQC_DATA_PAIRS)
    return vqc_pair_data_shard(&m->pdata, (uint64_t)step, m->rank, m->rows,
                               m->x, m->x2);
  return vqc_cluster_data_shard(&m->cdata, (uint64_t)step, m->rank, m->rows,
                                m->x, NULL);
}

/* ---- which faults a model can carry */

/* Where fault f lives, for the refusal's message. */
static const char *fault_home(vqc_fault f) {
  switch (f) {
    case VQC_FAULT_LOST_INPLACE_CONTIGUOUS:
    case VQC_FAULT_MISMATCHED_COLLECTIVE:
      return "models with an EMA codebook: vq, rvq, autoencoder";
    case VQC_FAULT_SAMPLER_FLOAT_SPLIT:
      return "vq, rvq or autoencoder with sizes.threshold_dead_code > 0 (or "
             "kmeans_init: true), where rows are sampled across ranks";
    case VQC_FAULT_UNSYNCED_DROPOUT_SEED:
    case VQC_FAULT_SEED_SYNC_SOME_RANKS:
      return "rvq with num_quantizers >= 2 (quantize dropout)";
    case VQC_FAULT_SKIP_WEIGHT_SYNC:
    case VQC_FAULT_DISCARDED_OUT_OF_PLACE_RESULT:
      return "models trained data-parallel: fsq, clip, autoencoder";
    case VQC_FAULT_NOGRAD_ALL_GATHER:
      return "clip (the contrastive loss's feature gather)";
    default:
      return "";
  }
}

vqc_status vqc_run_check_fault(const vqc_scenario *sc) {
  const vqc_model_ops *ops = vqc_model_ops_of(sc->model);
  if (!ops)
    return vqc_error(VQC_EINVAL, "runner: unknown model %d", (int)sc->model);
  if (sc->fault == VQC_FAULT_NONE || sc->fault == VQC_FAULT_COUNT ||
      ops->has_fault(sc, sc->fault))
    return VQC_OK;
  return vqc_error(VQC_EINVAL, "%s: fault %s has no code path in model %s "
                   "(it lives in %s)", sc->path, vqc_fault_name(sc->fault),
                   vqc_model_name(sc->model), fault_home(sc->fault));
}

/* ---- which scenarios have a device path */

/* The models with a --device cuda path, as "vq and fsq". */
static void cuda_models(char *out, size_t n) {
  int count = 0, seen = 0;
  for (int k = 0; k < VQC_MODEL_COUNT; k++)
    count += vqc_model_ops_of((vqc_model_kind)k)->check_cuda != NULL;
  out[0] = '\0';
  for (int k = 0; k < VQC_MODEL_COUNT; k++) {
    if (!vqc_model_ops_of((vqc_model_kind)k)->check_cuda) continue;
    const char *sep = seen == 0 ? "" : seen == count - 1 ? " and " : ", ";
    const size_t used = strlen(out);
    snprintf(out + used, n - used, "%s%s", sep,
             vqc_model_name((vqc_model_kind)k));
    seen++;
  }
}

vqc_status vqc_run_check_device(const vqc_scenario *sc, vqc_device device,
                                vqc_backend backend) {
  const vqc_model_ops *ops = vqc_model_ops_of(sc->model);
  if (!ops)
    return vqc_error(VQC_EINVAL, "runner: unknown model %d", (int)sc->model);
  if (device != VQC_DEVICE_CUDA) {
    if (backend == VQC_BACKEND_NCCL)
      return vqc_error(VQC_EINVAL, "--backend nccl needs --device cuda "
                       "(NCCL moves device buffers only)");
    return VQC_OK;
  }
  if (!ops->check_cuda) {
    char have[128];
    cuda_models(have, sizeof have);
    return vqc_error(VQC_EINVAL, "%s: model %s has no --device cuda path yet "
                     "(%s have one): run it with --device cpu", sc->path,
                     vqc_model_name(sc->model), have);
  }
  /* These two live in vq_ema.c, the host EMA that the device path replaces
   * with the kernels: run there, they could never fire. */
  if (sc->fault == VQC_FAULT_LOST_INPLACE_CONTIGUOUS ||
      sc->fault == VQC_FAULT_MISMATCHED_COLLECTIVE)
    return vqc_error(VQC_EINVAL, "%s: fault %s lives in the host EMA update "
                     "(vq_ema.c), which --device cuda replaces with the "
                     "kernels of vqc/gpu.h: run it with --device cpu",
                     sc->path, vqc_fault_name(sc->fault));
  return ops->check_cuda(sc, backend);
}

/* The reason inside a device error ("... no usable CUDA device (REASON)"),
 * or the whole message when it has no such part. */
static void device_reason(const char *msg, char *why, size_t n) {
  static const char marker[] = "no usable CUDA device (";
  const char *p = strstr(msg, marker);
  if (!p) {
    snprintf(why, n, "%s", msg);
    return;
  }
  p += sizeof marker - 1;
  size_t len = strlen(p);
  if (len > 0 && p[len - 1] == ')') len--;
  snprintf(why, n, "%.*s", (int)len, p);
}

vqc_status vqc_run_probe_device(void) {
  char why[512];
  if (!vqc_gpu_built()) {
    snprintf(why, sizeof why, "this build has no CUDA kernels; reconfigure "
             "with the CUDA toolkit (nvcc) to get them");
  } else {
    /* A real allocation and a real launch: a device that is listed but
     * cannot hold memory or run this build's kernels is no use either. */
    vqc_tensor t = {0};
    const int64_t one = 1;
    vqc_status s = vqc_tensor_empty(&t, VQC_I32, 1, &one, VQC_DEVICE_CUDA);
    if (s == VQC_OK)
      s = vqc_gpu_fill_u32(vqc_tensor_data_untracked(&t), 1, 0u);
    vqc_tensor_free(&t);
    if (s == VQC_OK) return VQC_OK;
    device_reason(vqc_last_error(), why, sizeof why);
  }
  return vqc_error(VQC_ENODEVICE, "no usable CUDA device (%s): run with "
                   "--device cpu", why);
}

/* ---- the model */

void vqc_run_model_destroy(vqc_run_model *m) {
  if (!m) return;
  vqc_param_list_free(&m->state);
  m->ops->destroy(m);
  vqc_cluster_data_free(&m->cdata);
  free(m->sizes);
  free(m->x);
  free(m->x2);
  free(m);
}

vqc_status vqc_run_model_create(const vqc_scenario *sc, vqc_comm *c,
                                vqc_run_model **out) {
  return vqc_run_model_create_device(sc, c, VQC_DEVICE_CPU, out);
}

vqc_status vqc_run_model_create_device(const vqc_scenario *sc, vqc_comm *c,
                                       vqc_device device,
                                       vqc_run_model **out) {
  if (!sc || !c || !out) return vqc_error(VQC_EINVAL, "runner: NULL argument");
  VQC_TRY(vqc_run_check_device(sc, device, vqc_comm_backend(c)));
  vqc_run_model *m = calloc(1, sizeof *m);
  if (!m) return vqc_error(VQC_ENOMEM, "runner: no memory for the model");
  vqc_param_list_init(&m->state);
  m->ops = vqc_model_ops_of(sc->model);
  m->sc = sc;
  m->comm = c;
  m->device = device;
  m->rank = vqc_comm_rank(c);
  m->size = vqc_comm_size(c);
  vqc_status s = VQC_OK;
  m->sizes = calloc((size_t)m->size, sizeof *m->sizes);
  if (!m->sizes) {
    s = vqc_error(VQC_ENOMEM, "runner: %d ranks", m->size);
    goto fail;
  }
  for (int r = 0; r < m->size; r++) {
    m->sizes[r] = vqc_scenario_batch(sc, r);
    m->global_rows += m->sizes[r];
  }
  m->rows = m->sizes[m->rank];
  /* A model that skips its collectives on an empty shard needs rows on
   * every rank; the others run their collectives whatever the row count. */
  if (m->ops->rows_on_every_rank) {
    for (int r = 0; r < m->size; r++) {
      if (m->sizes[r] == 0) {
        s = vqc_error(VQC_EINVAL, "%s: model %s needs at least one row per "
                      "rank per step (rank %d has none)", sc->path,
                      vqc_model_name(sc->model), r);
        goto fail;
      }
    }
  }
  const size_t rows = (size_t)(m->rows > 0 ? m->rows : 1);
  const size_t D = (size_t)sc->dim;
  m->x = malloc(rows * D * sizeof(float));
  m->x2 = malloc(rows * D * sizeof(float));
  if (!m->x || !m->x2) {
    s = vqc_error(VQC_ENOMEM, "runner: shard of %zu rows", rows);
    goto fail;
  }
  if (m->ops->data == VQC_DATA_PAIRS) {
    m->pdata = (vqc_pair_data_config){sc->seed, sc->dim, PAIR_NOISE_STD};
  } else {
    vqc_cluster_data_config dc = {sc->seed, sc->dim, DATA_CLUSTERS,
                                  DATA_CENTRE_STD, DATA_NOISE_STD};
    if ((s = vqc_cluster_data_init(&m->cdata, &dc))) goto fail;
  }
  if ((s = m->ops->create(m))) goto fail;
  *out = m;
  return VQC_OK;
fail:
  vqc_run_model_destroy(m);
  return s;
}

const vqc_param_list *vqc_run_model_state(const vqc_run_model *m) {
  return &m->state;
}

const int64_t *vqc_run_model_indices(const vqc_run_model *m, int64_t *rows) {
  if (rows) *rows = m ? m->rows : 0;
  return m ? m->indices : NULL;
}

vqc_status vqc_run_model_source_digest(const vqc_run_model *m,
                                       const char *name, uint64_t *out) {
  if (!m || !name || !out)
    return vqc_error(VQC_EINVAL, "runner: NULL argument");
  const vqc_param *p = vqc_param_list_find(&m->state, name);
  if (!p) return vqc_error(VQC_EINVAL, "runner: no state entry '%s'", name);
  const vqc_tensor *dev =
      m->ops->source_tensor ? m->ops->source_tensor(m, name) : NULL;
  return dev ? vqc_digest_tensor(dev, out) : vqc_param_digest(p, out);
}

void vqc_run_model_set_before_update(vqc_run_model *m,
                                     vqc_run_before_update_fn fn, void *user) {
  m->before_update = fn;
  m->before_update_user = user;
  if (m->ops->set_before_update) m->ops->set_before_update(m);
}

vqc_status vqc_run_model_step(vqc_run_model *m, int64_t step, double *loss) {
  if (!m) return vqc_error(VQC_EINVAL, "runner: NULL model");
  double l = 0.0;
  VQC_TRY(shard(m, step));
  VQC_TRY(m->ops->step(m, step, &l));
  if (loss) *loss = l;
  return VQC_OK;
}

bool vqc_run_model_has_reference(const vqc_run_model *m) {
  return m && m->ops->reference_grads != NULL;
}

vqc_status vqc_run_model_reference_grads(void *model, int64_t step,
                                         vqc_param_list *grads) {
  vqc_run_model *m = model;
  if (!m || !m->ops->reference_grads)
    return vqc_error(VQC_EINVAL, "runner: no reference for this model");
  return m->ops->reference_grads(m, step, grads);
}
