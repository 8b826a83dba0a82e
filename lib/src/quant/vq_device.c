/* vq_device.c: one VQ forward with the codebook on a CUDA device
 * (vqc_vq_device_forward, vq.h), the device twin of vq_forward.c: the same
 * steps in the same order, with the same collectives, giving the same bits.
 *
 * The nearest code, E[indices], the EMA statistics, the lerps and the
 * renormalisation are the kernels of vqc/gpu.h, each bit-identical to its
 * CPU twin (vq_nearest.c, vqc_vq_batch_stats, vqc_lerp_f32,
 * vq_renormalize). k-means init and dead-code expiry have no kernels: they
 * are the CPU functions themselves, run on the host codebook, which mirrors
 * the device state between calls (the host staging checkers read), and what
 * they change goes up. The commitment loss is computed on the host, from
 * the quantized rows that come back anyway.
 *
 * In a build without CUDA this file compiles the same; its calls fail
 * (vqc_vq_device_init with VQC_ENODEVICE from the tensor storage, the
 * kernels with VQC_EUNSUPPORTED from quant/gpu_absent.c). */
#include <string.h>

#include "quant/vq_internal.h"
#include "vqc/gpu.h"

void vqc_vq_device_free(vqc_vq_device *g) {
  if (!g) return;
  vqc_tensor *all[] = {&g->embed,  &g->cluster_size, &g->embed_avg,
                       &g->x,      &g->indices,      &g->quantized,
                       &g->counts, &g->sums,         &g->host_counts,
                       &g->host_sums};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    vqc_tensor_free(all[i]);
  g->rows = 0;
}

/* The batch buffers (x, indices, quantized) for `rows` rows. */
static vqc_status alloc_rows(vqc_vq_device *g, int64_t D, int64_t rows) {
  const int64_t rows_d[2] = {rows, D};
  const vqc_device dev = VQC_DEVICE_CUDA;
  vqc_tensor_free(&g->x);
  vqc_tensor_free(&g->indices);
  vqc_tensor_free(&g->quantized);
  g->rows = -1; /* none until all three exist */
  VQC_TRY(vqc_tensor_empty(&g->x, VQC_F32, 2, rows_d, dev));
  VQC_TRY(vqc_tensor_empty(&g->indices, VQC_I64, 1, &rows, dev));
  VQC_TRY(vqc_tensor_empty(&g->quantized, VQC_F32, 2, rows_d, dev));
  g->rows = rows;
  return VQC_OK;
}

vqc_status vqc_vq_device_init(vqc_vq_device *g, const vqc_vq *vq,
                              int64_t rows) {
  if (!g || !vq || !vq->embed.storage)
    return vqc_error(VQC_EINVAL, "vq_device_init: NULL or uninitialised "
                     "codebook");
  if (rows < 0)
    return vqc_error(VQC_EINVAL, "vq_device_init: rows %lld < 0",
                     (long long)rows);
  memset(g, 0, sizeof *g);
  const int64_t C = vq->p.codebook_size, D = vq->p.dim;
  const int64_t codes_d[2] = {C, D};
  const vqc_device dev = VQC_DEVICE_CUDA;
  VQC_TRY(vqc_tensor_to(&vq->embed, dev, &g->embed));
  VQC_TRY(vqc_tensor_to(&vq->cluster_size, dev, &g->cluster_size));
  VQC_TRY(vqc_tensor_to(&vq->embed_avg, dev, &g->embed_avg));
  VQC_TRY(alloc_rows(g, D, rows));
  VQC_TRY(vqc_tensor_empty(&g->counts, VQC_F32, 1, &C, dev));
  VQC_TRY(vqc_tensor_empty(&g->sums, VQC_F32, 2, codes_d, dev));
  VQC_TRY(vqc_tensor_empty(&g->host_counts, VQC_F32, 1, &C, VQC_DEVICE_CPU));
  return vqc_tensor_empty(&g->host_sums, VQC_F32, 2, codes_d, VQC_DEVICE_CPU);
}

/* The host codebook <- the device one (the copy the checkers digest). */
static vqc_status codebook_to_host(vqc_vq *vq, const vqc_vq_device *g) {
  VQC_TRY(vqc_tensor_copy(&vq->embed, &g->embed));
  VQC_TRY(vqc_tensor_copy(&vq->cluster_size, &g->cluster_size));
  return vqc_tensor_copy(&vq->embed_avg, &g->embed_avg);
}

/* The device codebook <- the host one (after a host-side change). */
static vqc_status codebook_to_device(vqc_vq_device *g, const vqc_vq *vq) {
  VQC_TRY(vqc_tensor_copy(&g->embed, &vq->embed));
  VQC_TRY(vqc_tensor_copy(&g->cluster_size, &vq->cluster_size));
  return vqc_tensor_copy(&g->embed_avg, &vq->embed_avg);
}

/* Device tensor dev <- the host array host, of dev's dtype and shape. */
static vqc_status upload(vqc_tensor *dev, const void *host) {
  vqc_tensor h = {0};
  VQC_TRY(vqc_tensor_wrap(&h, (void *)host, dev->dtype, dev->ndim,
                          dev->shape));
  /* vqc_tensor_copy moves bytes between any two devices. */
  vqc_status s = vqc_tensor_copy(dev, &h);
  vqc_tensor_free(&h);
  return s;
}

/* The host array host <- device tensor dev, of dev's dtype and shape. */
static vqc_status download(void *host, const vqc_tensor *dev) {
  vqc_tensor h = {0};
  VQC_TRY(vqc_tensor_wrap(&h, host, dev->dtype, dev->ndim, dev->shape));
  vqc_status s = vqc_tensor_copy(&h, dev);
  vqc_tensor_free(&h);
  return s;
}

/* vq_ema.c's update with the kernels, in its order: this rank's counts and
 * sums of the rows x by their codes; all_reduce(SUM) of the counts, then of
 * the sums; cluster_size and embed_avg lerp toward them; E renormalized.
 * The all_reduces: NCCL reduces the device tensors in place; threads and
 * mpi move host memory, so the statistics go through host staging tensors
 * (device -> host, all_reduce in place, host -> device). Either way the
 * ledger sees the same two collectives as on the CPU path, and the reduced
 * tensors are the ones read afterwards. No comm: no collectives, as on the
 * CPU. */
static vqc_status ema_update(vqc_vq_device *g, vqc_comm *comm,
                             const vqc_vq_params *p, int64_t M) {
  const int64_t C = p->codebook_size, D = p->dim;
  float *counts = vqc_tensor_data(&g->counts);
  float *sums = vqc_tensor_data(&g->sums);
  VQC_TRY(vqc_gpu_vq_stats(vqc_tensor_data(&g->x), M, D,
                           vqc_tensor_data(&g->indices), C, counts, sums));
  if (comm && vqc_comm_backend(comm) == VQC_BACKEND_NCCL) {
    VQC_TRY(vqc_all_reduce_tensor(comm, &g->counts, VQC_SUM));
    VQC_TRY(vqc_all_reduce_tensor(comm, &g->sums, VQC_SUM));
  } else if (comm) {
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

vqc_status vqc_vq_device_forward(vqc_vq *vq, vqc_vq_device *g,
                                 const vqc_vq_ctx *ctx, const float *x,
                                 int64_t M, bool train, int64_t *indices,
                                 float *quantized, float *loss) {
  const char *fn = "vq_device_forward";
  if (!vq || !vqc_vq_embed(vq) || !g || !g->embed.storage)
    return vqc_error(VQC_EINVAL, "%s: codebook or its device state not "
                     "initialised", fn);
  VQC_TRY(vq_check_rows(fn, x, M));
  if (M > 0 && (!indices || !quantized))
    return vqc_error(VQC_EINVAL, "%s: NULL indices or quantized", fn);
  /* These two catalogue faults live in vq_ema.c's collectives, which the
   * device update replaces: they could never fire here. */
  if (train && !vq->p.freeze_codebook &&
      (vq->p.fault == VQC_FAULT_LOST_INPLACE_CONTIGUOUS ||
       vq->p.fault == VQC_FAULT_MISMATCHED_COLLECTIVE))
    return vqc_error(VQC_EINVAL, "%s: fault %s lives in the host EMA update "
                     "(vq_ema.c), which the device step replaces: use "
                     "vqc_vq_forward", fn, vqc_fault_name(vq->p.fault));
  const int64_t C = vq->p.codebook_size, D = vq->p.dim;

  /* 1. k-means init has no kernel: it runs on the host copy (with its
   * collectives and draws), and the result goes up. */
  if (vq->p.kmeans_init && !vq->initted) {
    if (vq->before_update) VQC_TRY(vq->before_update(vq->before_update_user));
    VQC_TRY(vqc_vq_kmeans_init(vq, ctx, x, M));
    VQC_TRY(codebook_to_device(g, vq));
  }
  /* 2. nearest codes and quantized = E[indices], before this step's update;
   * both come back for the loss (and for the caller's outputs). */
  if (M != g->rows) VQC_TRY(alloc_rows(g, D, M));
  VQC_TRY(upload(&g->x, x));
  const float *E = vqc_tensor_data(&g->embed);
  VQC_TRY(vqc_gpu_vq_nearest(vqc_tensor_data(&g->x), M, E, C, D,
                             vqc_tensor_data(&g->indices), NULL));
  VQC_TRY(vqc_gpu_vq_gather(E, C, D, vqc_tensor_data(&g->indices), M,
                            vqc_tensor_data(&g->quantized)));
  VQC_TRY(download(indices, &g->indices));
  VQC_TRY(download(quantized, &g->quantized));
  /* 3. the commitment loss: one number, on the host */
  if (loss)
    *loss = train ? vqc_vq_commitment_loss(x, quantized, M, D,
                                           vq->p.commitment_weight)
                  : 0.0f;
  if (!train || vq->p.freeze_codebook) return VQC_OK;
  /* 4. the EMA update with the kernels */
  if (vq->before_update) VQC_TRY(vq->before_update(vq->before_update_user));
  VQC_TRY(ema_update(g, vq_ctx_comm(ctx), &vq->p, M));
  /* 5. the host copy. Dead-code expiry has no kernel either: it runs there
   * and what it replaced goes up. */
  VQC_TRY(codebook_to_host(vq, g));
  int64_t expired = 0;
  VQC_TRY(vqc_vq_expire_codes(vq, ctx, x, M, NULL, &expired));
  return expired > 0 ? codebook_to_device(g, vq) : VQC_OK;
}
