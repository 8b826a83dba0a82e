/* run_models.c: the models scenarios train (see run_models.h).
 *
 * Every rank builds the same replicated state from the scenario's seed (no
 * broadcast: a divergence at step 0 must be a bug in the step, not hidden by
 * a copy), draws its own shard of every step from (seed, step, rank), and
 * runs one training step per call. The gradient-trained models keep a twin
 * built the same way without a comm: before each step the replicated state
 * is copied aside, and the equivalence checker's reference gradient is the
 * twin's gradient on the global batch from that copy.
 *
 * --device cuda (run_models.h "Device"): the vq model keeps a device twin of
 * its codebook (vq_device) that the kernels update, and copies it into the
 * host codebook at the end of every step for the checkers; the fsq model's
 * bottleneck is an adapter (fsq_device) that quantizes on the device. */
#include "run_models.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vqc/autoencoder.h"
#include "vqc/bottleneck.h"
#include "vqc/clip.h"
#include "vqc/data.h"
#include "vqc/ddp.h"
#include "vqc/digest.h"
#include "vqc/fsq.h"
#include "vqc/gpu.h"
#include "vqc/optim.h"
#include "vqc/rvq.h"
#include "vqc/vq.h"

/* Synthetic data: a handful of well separated clusters, so a codebook has
 * structure to find and most codes of a large codebook stay unused. */
#define DATA_CLUSTERS 8
#define DATA_CENTRE_STD 1.0f
#define DATA_NOISE_STD 0.25f
/* CLIP pairs: image and text are the same signal plus this much noise. */
#define PAIR_NOISE_STD 0.3f
/* CLIP's initial temperature, exp(t) = 1 / 0.07. */
#define CLIP_LOGIT_SCALE (1.0f / 0.07f)
/* Adam's step size for every gradient-trained model: large enough that a
 * few steps move the weights visibly, small enough to stay finite. */
#define ADAM_LR 1e-2

/* ---- device copies (--device cuda) */

/* dev <- the numel(dev) elements at host, read in dev's dtype and shape (dev
 * contiguous). vqc_tensor_copy moves bytes between any two devices. */
static vqc_status upload(vqc_tensor *dev, const void *host) {
  vqc_tensor h = {0};
  VQC_TRY(vqc_tensor_wrap(&h, (void *)host, dev->dtype, dev->ndim,
                          dev->shape));
  vqc_status s = vqc_tensor_copy(dev, &h);
  vqc_tensor_free(&h);
  return s;
}

/* host <- the numel(dev) elements of dev (contiguous). */
static vqc_status download(void *host, const vqc_tensor *dev) {
  vqc_tensor h = {0};
  VQC_TRY(vqc_tensor_wrap(&h, host, dev->dtype, dev->ndim, dev->shape));
  vqc_status s = vqc_tensor_copy(&h, dev);
  vqc_tensor_free(&h);
  return s;
}

/* ---- FSQ's quantizer on the device (--device cuda) */

/* A vqc_bottleneck over an FSQ whose quantize runs on the device: z is
 * uploaded, vqc_gpu_fsq_quantize writes q there and q comes back. FSQ has
 * no state and no loss; its backward is elementwise on z, which the host
 * already holds, so it stays the CPU's vqc_fsq_backward. */
typedef struct fsq_device {
  const vqc_fsq *fsq;  /* the net's quantizer (net.fsqb.fsq) */
  vqc_tensor z, q;     /* (cap, width) f32 on the device */
  int64_t cap;         /* rows of z and q; a net's row count never changes,
                          so they are allocated once */
  int64_t rows;        /* rows of the last forward; -1 before the first */
  /* Elements that took the kernel's double-precision tanh (vqc/gpu.h "FSQ
   * and tanh"), summed over the forwards: for a person comparing runs. */
  int64_t refined;
} fsq_device;

static void fsq_device_free(fsq_device *f) {
  vqc_tensor_free(&f->z);
  vqc_tensor_free(&f->q);
  f->cap = 0;
  f->rows = -1;
}

static vqc_status fsq_device_forward(void *ctx, const float *z, int64_t rows,
                                     int64_t dim, float *q, float *row_loss) {
  fsq_device *f = ctx;
  const int64_t width = vqc_fsq_width(f->fsq);
  if (dim != width)
    return vqc_error(VQC_ESHAPE, "fsq bottleneck (device): latent dim %lld, "
                     "FSQ width %lld", (long long)dim, (long long)width);
  f->rows = -1;
  if (rows != f->cap || !f->z.storage) {
    fsq_device_free(f);
    const int64_t shape[2] = {rows, width};
    VQC_TRY(vqc_tensor_empty(&f->z, VQC_F32, 2, shape, VQC_DEVICE_CUDA));
    VQC_TRY(vqc_tensor_empty(&f->q, VQC_F32, 2, shape, VQC_DEVICE_CUDA));
    f->cap = rows;
  }
  VQC_TRY(upload(&f->z, z));
  int64_t refined = 0;
  VQC_TRY(vqc_gpu_fsq_quantize(f->fsq, vqc_tensor_data(&f->z), rows,
                               vqc_tensor_data(&f->q), NULL, &refined));
  VQC_TRY(download(q, &f->q));
  f->refined += refined;
  memset(row_loss, 0, (size_t)rows * sizeof(float)); /* FSQ has no aux loss */
  f->rows = rows;
  return VQC_OK;
}

static vqc_status fsq_device_backward(void *ctx, const float *z,
                                      const float *q, const float *dq,
                                      int64_t rows, int64_t dim,
                                      float dloss_row, float *dz) {
  (void)q, (void)dim, (void)dloss_row; /* no loss term; dim checked above */
  fsq_device *f = ctx;
  if (rows != f->rows)
    return vqc_error(VQC_EINVAL, "fsq bottleneck (device): backward over "
                     "%lld rows after a forward over %lld", (long long)rows,
                     (long long)f->rows);
  /* dz arrives zero-filled (autoencoder.h): written outright. */
  return vqc_fsq_backward(f->fsq, z, dq, rows, dz);
}

/* ---- the part trained by gradient: an autoencoder or two CLIP towers */

typedef struct net {
  vqc_model_kind kind;
  vqc_autoencoder *ae;          /* fsq, autoencoder */
  vqc_vq_bottleneck vqb;        /* autoencoder's bottleneck */
  vqc_fsq_bottleneck fsqb;      /* fsq's bottleneck */
  fsq_device fsqd;              /* fsq with --device cuda: fsqb's quantizer
                                   run on the device */
  vqc_linear img, txt;          /* clip towers (D -> H) */
  vqc_param_list clip_params;   /* "img.weight", ..., "txt.bias" */
  vqc_clip_config clip;
  int64_t hidden;               /* clip feature width H */
  float *fi, *ft, *dfi, *dft;   /* clip scratch (cap, H) */
  int64_t cap;                  /* rows the scratch holds */
  const vqc_param_list *params; /* the net's entries (grads and state) */
} net;

/* Latent width of the autoencoder's VQ bottleneck: half the input width,
 * so the codebook sees a real bottleneck. */
static int64_t ae_latent(const vqc_scenario *sc) {
  return sc->dim / 2 > 0 ? sc->dim / 2 : 1;
}

static void net_free(net *n) {
  if (!n) return;
  vqc_autoencoder_destroy(n->ae);
  vqc_vq_bottleneck_free(&n->vqb);
  vqc_fsq_bottleneck_free(&n->fsqb);
  fsq_device_free(&n->fsqd);
  vqc_linear_free(&n->img);
  vqc_linear_free(&n->txt);
  vqc_param_list_free(&n->clip_params);
  free(n->fi);
  free(n->ft);
  free(n->dfi);
  free(n->dft);
  free(n);
}

/* Builds the net of scenario sc, weights drawn from `init`. with_fault:
 * whether the scenario's fault goes in (the single-process twin is built
 * without: it is the correct math by definition). device: where the FSQ
 * bottleneck quantizes (the only part of a net with a device path). */
static vqc_status net_create(const vqc_scenario *sc, vqc_rng *init,
                             bool with_fault, vqc_device device, net **out) {
  net *n = calloc(1, sizeof *n);
  if (!n) return vqc_error(VQC_ENOMEM, "runner: no memory for the model");
  vqc_param_list_init(&n->clip_params);
  n->fsqd.rows = -1;
  n->kind = sc->model;
  const vqc_fault fault = with_fault ? sc->fault : VQC_FAULT_NONE;
  vqc_status s = VQC_OK;
  if (sc->model == VQC_MODEL_AUTOENCODER) {
    vqc_vq_params p;
    vqc_vq_params_default(&p, ae_latent(sc), sc->codebook_size);
    p.threshold_ema_dead_code = sc->threshold_dead_code;
    p.kmeans_init = sc->kmeans_init;
    p.seed = sc->seed;
    p.fault = fault;
    if ((s = vqc_vq_bottleneck_init(&n->vqb, &p, NULL))) goto fail;
    vqc_bottleneck bn = vqc_vq_bottleneck_iface(&n->vqb);
    vqc_autoencoder_config cfg = {sc->dim, sc->hidden, ae_latent(sc),
                                  VQC_ACT_TANH};
    if ((s = vqc_autoencoder_create(&cfg, init, &bn, &n->ae))) goto fail;
    n->params = vqc_autoencoder_params(n->ae);
  } else if (sc->model == VQC_MODEL_FSQ) {
    int32_t levels[VQC_SCENARIO_MAX_LEVELS];
    for (int i = 0; i < sc->nlevels; i++) levels[i] = sc->levels[i];
    if ((s = vqc_fsq_bottleneck_init(&n->fsqb, levels, sc->nlevels, 1, false,
                                     1e-3)))
      goto fail;
    vqc_bottleneck bn = vqc_fsq_bottleneck_iface(&n->fsqb);
    if (device == VQC_DEVICE_CUDA) {
      n->fsqd.fsq = &n->fsqb.fsq;
      bn = (vqc_bottleneck){"fsq", &n->fsqd, fsq_device_forward,
                            fsq_device_backward, NULL};
    }
    vqc_autoencoder_config cfg = {sc->dim, sc->hidden, sc->nlevels,
                                  VQC_ACT_TANH};
    if ((s = vqc_autoencoder_create(&cfg, init, &bn, &n->ae))) goto fail;
    n->params = vqc_autoencoder_params(n->ae);
  } else if (sc->model == VQC_MODEL_CLIP) {
    n->hidden = sc->hidden;
    n->clip.gather = fault == VQC_FAULT_NOGRAD_ALL_GATHER ? VQC_GATHER_NO_GRAD
                                                          : VQC_GATHER_WITH_GRAD;
    n->clip.local_loss = false;
    n->clip.logit_scale = CLIP_LOGIT_SCALE;
    if ((s = vqc_linear_init(&n->img, sc->dim, sc->hidden, init)) ||
        (s = vqc_linear_init(&n->txt, sc->dim, sc->hidden, init)) ||
        (s = vqc_linear_register(&n->img, "img.", &n->clip_params)) ||
        (s = vqc_linear_register(&n->txt, "txt.", &n->clip_params)))
      goto fail;
    n->params = &n->clip_params;
  } else {
    s = vqc_error(VQC_EINVAL, "runner: model %s is not trained by gradient",
                  vqc_model_name(sc->model));
    goto fail;
  }
  *out = n;
  return VQC_OK;
fail:
  net_free(n);
  return s;
}

/* Grows the CLIP scratch to `rows` rows. */
static vqc_status net_reserve(net *n, int64_t rows) {
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

/* Zeroes the grads, then forward and backward on x (rows, D) (and, for
 * CLIP, the paired x2): the gradient of grad_scale * loss lands in the
 * entries' grads. comm NULL: one process. */
static vqc_status net_forward_backward(net *n, vqc_comm *comm, int64_t step,
                                       const float *x, const float *x2,
                                       int64_t rows, float grad_scale,
                                       double *loss) {
  vqc_param_list_zero_grad(n->params);
  if (n->kind == VQC_MODEL_CLIP) {
    VQC_TRY(net_reserve(n, rows > 0 ? rows : 1));
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
  if (n->kind == VQC_MODEL_AUTOENCODER) {
    n->vqb.comm = comm;
    n->vqb.step = (uint64_t)step;
    n->vqb.train = true;
  }
  vqc_ae_loss l;
  VQC_TRY(vqc_autoencoder_forward(n->ae, x, rows, &l));
  VQC_TRY(vqc_autoencoder_backward(n->ae, grad_scale));
  *loss = l.total;
  return VQC_OK;
}

/* ---- which faults a model can carry */

vqc_status vqc_run_check_fault(const vqc_scenario *sc) {
  const vqc_model_kind m = sc->model;
  const bool codebook = m == VQC_MODEL_VQ || m == VQC_MODEL_RVQ ||
                        m == VQC_MODEL_AUTOENCODER;
  const bool ddp = m == VQC_MODEL_FSQ || m == VQC_MODEL_CLIP ||
                   m == VQC_MODEL_AUTOENCODER;
  bool ok = true;
  const char *where = "";
  switch (sc->fault) {
    case VQC_FAULT_NONE:
    case VQC_FAULT_COUNT:
      break;
    case VQC_FAULT_LOST_INPLACE_CONTIGUOUS:
    case VQC_FAULT_MISMATCHED_COLLECTIVE:
      ok = codebook;
      where = "models with an EMA codebook: vq, rvq, autoencoder";
      break;
    case VQC_FAULT_SAMPLER_FLOAT_SPLIT:
      ok = codebook && (sc->threshold_dead_code > 0.0 || sc->kmeans_init);
      where = "vq, rvq or autoencoder with sizes.threshold_dead_code > 0 (or "
              "kmeans_init: true), where rows are sampled across ranks";
      break;
    case VQC_FAULT_UNSYNCED_DROPOUT_SEED:
    case VQC_FAULT_SEED_SYNC_SOME_RANKS:
      ok = m == VQC_MODEL_RVQ && sc->num_quantizers > 1;
      where = "rvq with num_quantizers >= 2 (quantize dropout)";
      break;
    case VQC_FAULT_SKIP_WEIGHT_SYNC:
    case VQC_FAULT_DISCARDED_OUT_OF_PLACE_RESULT:
      ok = ddp;
      where = "models trained data-parallel: fsq, clip, autoencoder";
      break;
    case VQC_FAULT_NOGRAD_ALL_GATHER:
      ok = m == VQC_MODEL_CLIP;
      where = "clip (the contrastive loss's feature gather)";
      break;
  }
  if (ok) return VQC_OK;
  return vqc_error(VQC_EINVAL, "%s: fault %s has no code path in model %s "
                   "(it lives in %s)", sc->path, vqc_fault_name(sc->fault),
                   vqc_model_name(m), where);
}

/* ---- which scenarios have a device path */

vqc_status vqc_run_check_device(const vqc_scenario *sc, vqc_device device,
                                vqc_backend backend) {
  const char *model = vqc_model_name(sc->model);
  if (device != VQC_DEVICE_CUDA) {
    if (backend == VQC_BACKEND_NCCL)
      return vqc_error(VQC_EINVAL, "--backend nccl needs --device cuda "
                       "(NCCL moves device buffers only)");
    return VQC_OK;
  }
  if (sc->model != VQC_MODEL_VQ && sc->model != VQC_MODEL_FSQ)
    return vqc_error(VQC_EINVAL, "%s: model %s has no --device cuda path yet "
                     "(vq and fsq have one): run it with --device cpu",
                     sc->path, model);
  /* These two live in vq_ema.c, the host EMA that the device path replaces
   * with the kernels: run there, they could never fire. */
  if (sc->fault == VQC_FAULT_LOST_INPLACE_CONTIGUOUS ||
      sc->fault == VQC_FAULT_MISMATCHED_COLLECTIVE)
    return vqc_error(VQC_EINVAL, "%s: fault %s lives in the host EMA update "
                     "(vq_ema.c), which --device cuda replaces with the "
                     "kernels of vqc/gpu.h: run it with --device cpu",
                     sc->path, vqc_fault_name(sc->fault));
  if (backend == VQC_BACKEND_NCCL) {
    if (sc->model != VQC_MODEL_VQ)
      return vqc_error(VQC_EINVAL, "%s: model %s has no --backend nccl path "
                       "(its DDP gradients are host buffers): use --backend "
                       "mpi with --device cuda", sc->path, model);
    if (sc->threshold_dead_code > 0.0 || sc->kmeans_init)
      return vqc_error(VQC_EINVAL, "%s: dead-code expiry and k-means init run "
                       "on the host and their collectives move host buffers, "
                       "which NCCL cannot: use --backend mpi with --device "
                       "cuda", sc->path);
  }
  return VQC_OK;
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

/* ---- the VQ codebook on the device (--device cuda) */

/* The device half of the vq model. While a step runs the device codebook is
 * the state; between steps the host vqc_vq holds an exact copy (the staging
 * the checkers read, and where k-means init and dead-code expiry run). */
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

struct vqc_run_model {
  const vqc_scenario *sc;
  vqc_run_before_update_fn before_update; /* NULL: none */
  void *before_update_user;
  vqc_comm *comm;
  vqc_device device;       /* where the hot path runs (run_models.h) */
  int rank, size;
  int64_t *sizes;          /* (size) rows of every rank */
  int64_t rows;            /* this rank's rows */
  int64_t global_rows;
  vqc_cluster_data cdata;  /* vq, rvq, fsq, autoencoder */
  vqc_pair_data_config pdata; /* clip */
  float *x, *x2;           /* (rows, D) this rank's shard (x2: clip text) */
  /* vq, rvq */
  vqc_vq vq;               /* vq: with --device cuda, the host copy */
  vq_device vqd;           /* vq with --device cuda: the device state */
  vqc_rvq rvq;
  int64_t *indices;        /* (rows, Q) */
  float *quantized;        /* (rows, D) */
  float *losses;           /* (Q) */
  /* fsq, clip, autoencoder */
  net *main;               /* trained, with the fault */
  net *twin;               /* single-process reference, no fault */
  vqc_optim *opt;
  void *snapshot;          /* bytes of every main->params entry, in order */
  size_t snapshot_bytes;
  bool snapshot_initted;   /* the VQ bottleneck's k-means flag at the copy */
  int64_t snap_step;       /* the step the snapshot is the start of; -1 */
  float *gx, *gx2;         /* (global_rows, D) the global batch */
  vqc_param_list state;    /* every replicated tensor */
};

void vqc_run_model_destroy(vqc_run_model *m) {
  if (!m) return;
  vqc_param_list_free(&m->state);
  vqc_optim_destroy(m->opt);
  net_free(m->main);
  net_free(m->twin);
  vqc_vq_free(&m->vq);
  vq_device_free(&m->vqd);
  vqc_rvq_free(&m->rvq);
  vqc_cluster_data_free(&m->cdata);
  free(m->sizes);
  free(m->x);
  free(m->x2);
  free(m->gx);
  free(m->gx2);
  free(m->indices);
  free(m->quantized);
  free(m->losses);
  free(m->snapshot);
  free(m);
}

/* Registers a codebook's state under prefix ("codebook." or "layers.<l>."):
 * EMA-trained, so no grad. */
static vqc_status register_codebook(vqc_param_list *l, vqc_vq *vq,
                                    const char *prefix) {
  const vqc_tensor *t[3] = {&vq->embed, &vq->cluster_size, &vq->embed_avg};
  const char *names[3] = {"embed", "cluster_size", "embed_avg"};
  for (int i = 0; i < 3; i++) {
    char name[VQC_PARAM_NAME_MAX];
    snprintf(name, sizeof name, "%s%s", prefix, names[i]);
    VQC_TRY(vqc_param_list_add(l, name, t[i]->dtype,
                               vqc_tensor_data_untracked(t[i]), NULL,
                               t[i]->ndim, t[i]->shape));
  }
  return VQC_OK;
}

/* The shape of the models' data: clusters (vq, rvq, fsq, autoencoder) or
 * paired features (clip). */
static vqc_status shard(vqc_run_model *m, int64_t step) {
  if (m->sc->model == VQC_MODEL_CLIP)
    return vqc_pair_data_shard(&m->pdata, (uint64_t)step, m->rank, m->rows,
                               m->x, m->x2);
  return vqc_cluster_data_shard(&m->cdata, (uint64_t)step, m->rank, m->rows,
                                m->x, NULL);
}

static vqc_status build_codebooks(vqc_run_model *m) {
  const vqc_scenario *sc = m->sc;
  if (sc->model == VQC_MODEL_VQ) {
    vqc_vq_params p;
    vqc_vq_params_default(&p, sc->dim, sc->codebook_size);
    p.threshold_ema_dead_code = sc->threshold_dead_code;
    p.kmeans_init = sc->kmeans_init;
    p.seed = sc->seed;
    p.fault = sc->fault;
    VQC_TRY(vqc_vq_init(&m->vq, &p, NULL));
    return register_codebook(&m->state, &m->vq, "codebook.");
  }
  vqc_rvq_params p;
  vqc_rvq_params_default(&p, sc->num_quantizers, sc->dim, sc->codebook_size);
  p.layer.threshold_ema_dead_code = sc->threshold_dead_code;
  p.layer.kmeans_init = sc->kmeans_init;
  p.layer.seed = sc->seed;
  p.layer.fault = sc->fault;
  p.quantize_dropout = true;
  p.fault = sc->fault;
  VQC_TRY(vqc_rvq_init(&m->rvq, &p, NULL));
  for (int l = 0; l < sc->num_quantizers; l++) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "layers.%d.", l);
    VQC_TRY(register_codebook(&m->state, &m->rvq.layers[l], prefix));
  }
  return VQC_OK;
}

static vqc_status build_nets(vqc_run_model *m) {
  const vqc_scenario *sc = m->sc;
  /* Weights from their own stream (step 1 of the INIT purpose), distinct
   * from the codebook's (step 0), the same on every rank. */
  vqc_rng init;
  vqc_rng_init(&init, sc->seed, vqc_rng_stream_for(1, VQC_RNG_INIT, -1));
  vqc_rng twin_init = init;
  /* The twin quantizes where the trained net does, so the equivalence
   * checker compares one function with itself. */
  VQC_TRY(net_create(sc, &init, true, m->device, &m->main));
  VQC_TRY(net_create(sc, &twin_init, false, m->device, &m->twin));
  vqc_optim_config oc = vqc_optim_adam(ADAM_LR);
  VQC_TRY(vqc_optim_create(&oc, m->main->params, &m->opt));
  VQC_TRY(vqc_param_list_extend(&m->state, m->main->params, ""));
  VQC_TRY(vqc_param_list_extend(&m->state, vqc_optim_state(m->opt), ""));
  for (int i = 0; i < m->main->params->count; i++) {
    const vqc_param *p = &m->main->params->items[i];
    m->snapshot_bytes += (size_t)p->numel * vqc_dtype_size(p->dtype);
  }
  m->snapshot = malloc(m->snapshot_bytes + 1);
  const size_t g = (size_t)(m->global_rows > 0 ? m->global_rows : 1);
  m->gx = malloc(g * (size_t)sc->dim * sizeof(float));
  m->gx2 = malloc(g * (size_t)sc->dim * sizeof(float));
  if (!m->snapshot || !m->gx || !m->gx2)
    return vqc_error(VQC_ENOMEM, "runner: global batch of %lld rows",
                     (long long)m->global_rows);
  return VQC_OK;
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
  m->sc = sc;
  m->comm = c;
  m->device = device;
  m->rank = vqc_comm_rank(c);
  m->size = vqc_comm_size(c);
  m->snap_step = -1;
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
  /* The autoencoder skips its bottleneck (and so the VQ's collectives) on
   * an empty shard (bottleneck.h): it needs rows on every rank. The other
   * models run their collectives whatever the row count. */
  if (sc->model == VQC_MODEL_AUTOENCODER) {
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
  if (sc->model == VQC_MODEL_CLIP) {
    m->pdata = (vqc_pair_data_config){sc->seed, sc->dim, PAIR_NOISE_STD};
  } else {
    vqc_cluster_data_config dc = {sc->seed, sc->dim, DATA_CLUSTERS,
                                  DATA_CENTRE_STD, DATA_NOISE_STD};
    if ((s = vqc_cluster_data_init(&m->cdata, &dc))) goto fail;
  }

  if (sc->model == VQC_MODEL_VQ || sc->model == VQC_MODEL_RVQ) {
    const int Q = sc->model == VQC_MODEL_RVQ ? sc->num_quantizers : 1;
    m->indices = malloc(rows * (size_t)Q * sizeof(int64_t));
    m->quantized = malloc(rows * D * sizeof(float));
    m->losses = malloc((size_t)Q * sizeof(float));
    if (!m->indices || !m->quantized || !m->losses) {
      s = vqc_error(VQC_ENOMEM, "runner: outputs of %zu rows", rows);
      goto fail;
    }
    if ((s = build_codebooks(m))) goto fail;
    if (sc->model == VQC_MODEL_VQ && device == VQC_DEVICE_CUDA &&
        (s = vq_device_init(&m->vqd, &m->vq, m->rows)))
      goto fail;
  } else {
    if ((s = build_nets(m))) goto fail;
  }
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
  if (m->sc->model == VQC_MODEL_VQ && m->device == VQC_DEVICE_CUDA) {
    const vqc_tensor *dev[3] = {&m->vqd.embed, &m->vqd.cluster_size,
                                &m->vqd.embed_avg};
    const char *names[3] = {"codebook.embed", "codebook.cluster_size",
                            "codebook.embed_avg"};
    for (int i = 0; i < 3; i++)
      if (strcmp(name, names[i]) == 0) return vqc_digest_tensor(dev[i], out);
  }
  return vqc_param_digest(p, out);
}

bool vqc_run_model_has_reference(const vqc_run_model *m) {
  return m && m->main != NULL;
}

/* Copies every entry of the trained net aside (the state `step` starts
 * from), for the reference. */
static void take_snapshot(vqc_run_model *m, int64_t step) {
  char *dst = m->snapshot;
  const vqc_param_list *l = m->main->params;
  for (int i = 0; i < l->count; i++) {
    const size_t n = (size_t)l->items[i].numel * vqc_dtype_size(l->items[i].dtype);
    memcpy(dst, l->items[i].data, n);
    dst += n;
  }
  m->snapshot_initted = m->main->vqb.vq.initted;
  m->snap_step = step;
}

/* One vq step with --device cuda, as vqc_vq_forward orders it (k-means
 * init, nearest codes, E[indices] before the update, loss, EMA, dead-code
 * expiry). On entry the host codebook equals the device one; on return
 * too. */
static vqc_status vq_device_step(vqc_run_model *m, int64_t step, float *loss) {
  vqc_vq *vq = &m->vq;
  vq_device *g = &m->vqd;
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
  VQC_TRY(upload(&g->x, m->x));
  const float *E = vqc_tensor_data(&g->embed);
  VQC_TRY(vqc_gpu_vq_nearest(vqc_tensor_data(&g->x), M, E, C, D,
                             vqc_tensor_data(&g->indices), NULL));
  VQC_TRY(vqc_gpu_vq_gather(E, C, D, vqc_tensor_data(&g->indices), M,
                            vqc_tensor_data(&g->quantized)));
  VQC_TRY(download(m->indices, &g->indices));
  VQC_TRY(download(m->quantized, &g->quantized));
  /* 3. the commitment loss: one number for the progress line, on the host */
  *loss = vqc_vq_commitment_loss(m->x, m->quantized, M, D,
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

/* DDP's fault switch for this step: the scenario's fault, where it lives in
 * ddp.c, and from which step on. */
static vqc_ddp_fault ddp_fault(const vqc_scenario *sc, int64_t step) {
  switch (sc->fault) {
    case VQC_FAULT_SKIP_WEIGHT_SYNC:
      /* PyTorch/XLA: the replicas agree at first, one drifts from step 1. */
      return step >= 1 ? VQC_DDP_FAULT_SKIP_GRAD_SYNC_LAST_RANK
                       : VQC_DDP_FAULT_NONE;
    case VQC_FAULT_DISCARDED_OUT_OF_PLACE_RESULT:
      return VQC_DDP_FAULT_DISCARD_MEAN;
    default:
      return VQC_DDP_FAULT_NONE;
  }
}

void vqc_run_model_set_before_update(vqc_run_model *m,
                                     vqc_run_before_update_fn fn, void *user) {
  m->before_update = fn;
  m->before_update_user = user;
  /* vq and rvq on the host: each codebook calls it itself (vq.h). */
  if (m->device != VQC_DEVICE_CUDA && m->sc->model == VQC_MODEL_VQ) {
    m->vq.before_update = fn;
    m->vq.before_update_user = user;
  }
  if (m->sc->model == VQC_MODEL_RVQ)
    for (int l = 0; l < m->sc->num_quantizers; l++) {
      m->rvq.layers[l].before_update = fn;
      m->rvq.layers[l].before_update_user = user;
    }
}

static vqc_status before_update(vqc_run_model *m) {
  return m->before_update ? m->before_update(m->before_update_user) : VQC_OK;
}

vqc_status vqc_run_model_step(vqc_run_model *m, int64_t step, double *loss) {
  if (!m) return vqc_error(VQC_EINVAL, "runner: NULL model");
  double l = 0.0;
  VQC_TRY(shard(m, step));
  const vqc_scenario *sc = m->sc;
  /* Every model writes its state somewhere in the step: the hook runs once,
   * before the first write (run_models.h). */
  const bool codebook_hooks =
      sc->model == VQC_MODEL_RVQ ||
      (sc->model == VQC_MODEL_VQ && m->device != VQC_DEVICE_CUDA);
  const bool update_in_forward = sc->model == VQC_MODEL_VQ ||
                                 sc->model == VQC_MODEL_RVQ ||
                                 sc->model == VQC_MODEL_AUTOENCODER;
  if (update_in_forward && !codebook_hooks) VQC_TRY(before_update(m));
  if (sc->model == VQC_MODEL_VQ && m->device == VQC_DEVICE_CUDA) {
    float f = 0.0f;
    VQC_TRY(vq_device_step(m, step, &f));
    l = f;
  } else if (sc->model == VQC_MODEL_VQ) {
    const vqc_vq_ctx ctx = {m->comm, (uint64_t)step, NULL, 0};
    float f = 0.0f;
    VQC_TRY(vqc_vq_forward(&m->vq, &ctx, m->x, m->rows, true, m->indices,
                           m->quantized, &f));
    l = f;
  } else if (sc->model == VQC_MODEL_RVQ) {
    const vqc_vq_ctx ctx = {m->comm, (uint64_t)step, NULL, 0};
    /* Step 0 is a warm-up without quantize dropout (see run_models.h). */
    m->rvq.p.quantize_dropout = step >= 1;
    VQC_TRY(vqc_rvq_forward(&m->rvq, &ctx, m->x, m->rows, true, m->indices,
                            m->quantized, m->losses, NULL));
    for (int q = 0; q < sc->num_quantizers; q++) l += m->losses[q];
  } else {
    take_snapshot(m, step);
    /* The loss is a mean over this rank's rows; this scale makes DDP's
     * 1/W average the global-batch mean with uneven shards (ddp.h). CLIP's
     * loss is already the global batch's on every rank. */
    const float scale =
        sc->model == VQC_MODEL_CLIP
            ? 1.0f
            : vqc_ddp_loss_scale(m->rows, m->global_rows, m->size);
    VQC_TRY(net_forward_backward(m->main, m->comm, step, m->x, m->x2, m->rows,
                                 scale, &l));
    const vqc_ddp_options opt = {0, ddp_fault(sc, step)};
    VQC_TRY(vqc_ddp_average_grads(m->comm, m->main->params, &opt));
    if (!update_in_forward) VQC_TRY(before_update(m));
    VQC_TRY(vqc_optim_step(m->opt));
  }
  if (loss) *loss = l;
  return VQC_OK;
}

vqc_status vqc_run_model_reference_grads(void *model, int64_t step,
                                         vqc_param_list *grads) {
  vqc_run_model *m = model;
  if (!m || !m->twin || !grads)
    return vqc_error(VQC_EINVAL, "runner: no reference for this model");
  if (step != m->snap_step)
    return vqc_error(VQC_EINVAL, "runner: reference asked for step %lld but "
                     "the last step trained is %lld", (long long)step,
                     (long long)m->snap_step);
  /* The twin starts from the state the step started from. */
  const char *src = m->snapshot;
  const vqc_param_list *tl = m->twin->params;
  for (int i = 0; i < tl->count; i++) {
    const size_t n =
        (size_t)tl->items[i].numel * vqc_dtype_size(tl->items[i].dtype);
    memcpy(tl->items[i].data, src, n);
    src += n;
  }
  m->twin->vqb.vq.initted = m->snapshot_initted;
  if (m->sc->model == VQC_MODEL_CLIP)
    VQC_TRY(vqc_pair_data_global(&m->pdata, (uint64_t)step, m->size, m->sizes,
                                 m->gx, m->gx2));
  else
    VQC_TRY(vqc_cluster_data_global(&m->cdata, (uint64_t)step, m->size,
                                    m->sizes, m->gx, NULL));
  double loss;
  VQC_TRY(net_forward_backward(m->twin, NULL, step, m->gx, m->gx2,
                               m->global_rows, 1.0f, &loss));
  for (int i = 0; i < grads->count; i++) {
    vqc_param *g = &grads->items[i];
    const vqc_param *p = vqc_param_list_find(tl, g->name);
    if (!p || !p->grad || p->numel != g->numel || g->dtype != VQC_F32)
      return vqc_error(VQC_EINVAL, "runner: the reference has no gradient "
                       "'%s' of %lld floats", g->name, (long long)g->numel);
    memcpy(g->data, p->grad, (size_t)p->numel * sizeof(float));
  }
  return VQC_OK;
}
