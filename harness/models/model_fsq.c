/* model_fsq.c: the fsq model: an autoencoder (dim -> hidden -> levels ->
 * hidden -> dim, tanh) with an FSQ bottleneck, trained data-parallel by
 * gradient (model_trained.h). FSQ has no state and no collectives of its
 * own: what the ranks share is DDP's gradient average.
 *
 * With --device cuda the bottleneck quantizes on the device (fsq_device:
 * upload z, vqc_gpu_fsq_quantize, download q); the encoder, decoder, DDP and
 * Adam stay on the host. The twin uses the same device quantizer, so the
 * equivalence checker compares one function with itself. */
#include "model_trained.h"

#include <stdlib.h>
#include <string.h>

#include "vqc/autoencoder.h"
#include "vqc/bottleneck.h"
#include "vqc/fsq.h"
#include "vqc/gpu.h"

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
  VQC_TRY(vqc_model_upload(&f->z, z));
  int64_t refined = 0;
  VQC_TRY(vqc_gpu_fsq_quantize(f->fsq, vqc_tensor_data(&f->z), rows,
                               vqc_tensor_data(&f->q), NULL, &refined));
  VQC_TRY(vqc_model_download(q, &f->q));
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

/* ---- the net */

typedef struct fsq_net {
  vqc_autoencoder *ae;
  vqc_fsq_bottleneck fsqb;
  fsq_device fsqd;     /* --device cuda: fsqb's quantizer on the device */
} fsq_net;

static void fsq_net_destroy(void *net) {
  fsq_net *n = net;
  if (!n) return;
  vqc_autoencoder_destroy(n->ae);
  vqc_fsq_bottleneck_free(&n->fsqb);
  fsq_device_free(&n->fsqd);
  free(n);
}

/* FSQ carries no fault (with_fault unused): the DDP faults live in the
 * gradient average. */
static vqc_status fsq_net_create(const vqc_scenario *sc, vqc_rng *init,
                                 bool with_fault, vqc_device device,
                                 void **out) {
  (void)with_fault;
  fsq_net *n = calloc(1, sizeof *n);
  if (!n) return vqc_error(VQC_ENOMEM, "runner: no memory for the model");
  n->fsqd.rows = -1;
  vqc_status s = VQC_OK;
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
  *out = n;
  return VQC_OK;
fail:
  fsq_net_destroy(n);
  return s;
}

static const vqc_param_list *fsq_net_params(const void *net) {
  const fsq_net *n = net;
  return vqc_autoencoder_params(n->ae);
}

static vqc_status fsq_net_forward_backward(void *net, vqc_comm *comm,
                                           int64_t step, const float *x,
                                           const float *x2, int64_t rows,
                                           float grad_scale, double *loss) {
  (void)comm, (void)step, (void)x2; /* FSQ has no collectives */
  fsq_net *n = net;
  vqc_ae_loss l;
  VQC_TRY(vqc_autoencoder_forward(n->ae, x, rows, &l));
  VQC_TRY(vqc_autoencoder_backward(n->ae, grad_scale));
  *loss = l.total;
  return VQC_OK;
}

static const vqc_net_ops fsq_net_ops = {
    .create = fsq_net_create,
    .destroy = fsq_net_destroy,
    .params = fsq_net_params,
    .forward_backward = fsq_net_forward_backward,
    .kmeans_flag = NULL,
    .loss_is_global = false,
    .update_in_forward = false,
};

/* ---- the model */

static vqc_status fsq_create(vqc_run_model *m) {
  return vqc_trained_create(m, &fsq_net_ops);
}

static bool fsq_has_fault(const vqc_scenario *sc, vqc_fault f) {
  (void)sc;
  return vqc_trained_has_fault(f);
}

/* --device cuda over threads or mpi; not nccl. */
static vqc_status fsq_check_cuda(const vqc_scenario *sc, vqc_backend backend) {
  if (backend == VQC_BACKEND_NCCL)
    return vqc_error(VQC_EINVAL, "%s: model %s has no --backend nccl path "
                     "(its DDP gradients are host buffers): use --backend "
                     "mpi with --device cuda", sc->path,
                     vqc_model_name(sc->model));
  return VQC_OK;
}

/* Bytes: the autoencoder net's (model_autoencoder.c), whose latent is the
 * FSQ's width, one dimension per level. */
static uint64_t fsq_rank_bytes(const vqc_scenario *sc, uint64_t B,
                               uint64_t G) {
  return vqc_autoencoder_net_bytes(sc, B, G, (uint64_t)sc->nlevels);
}

const vqc_model_ops vqc_model_fsq = {
    .has_fault = fsq_has_fault,
    .check_cuda = fsq_check_cuda,
    .rows_on_every_rank = false,
    .data = VQC_DATA_CLUSTERS,
    .rank_bytes = fsq_rank_bytes,
    .global_batch = true,
    .create = fsq_create,
    .step = vqc_trained_step,
    .set_before_update = NULL,
    .source_tensor = NULL,
    .reference_grads = vqc_trained_reference_grads,
    .destroy = vqc_trained_destroy,
};
