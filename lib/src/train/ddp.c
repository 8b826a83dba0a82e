/* ddp.c: gradient averaging and the initial weight broadcast of ddp.h,
 * through the public comm API (so every collective lands in the ledger with
 * a call site in this file). */
#include <stdlib.h>
#include <string.h>

#include "vqc/ddp.h"
#include "vqc/tensor.h"

vqc_status vqc_ddp_broadcast(vqc_comm *c, const vqc_param_list *params) {
  if (c == NULL) return VQC_OK;
  for (int i = 0; i < params->count; i++) {
    const vqc_param *p = &params->items[i];
    /* DDP start: every replica begins from rank 0's weights and state. */
    VQC_TRY(vqc_broadcast(c, p->data, (size_t)p->numel, p->dtype, 0));
  }
  return VQC_OK;
}

vqc_status vqc_distributed_mean_at(vqc_comm *c, vqc_tensor *t,
                                   vqc_fault fault, vqc_site site) {
  if (c == NULL) return VQC_OK;
  if (t == NULL || t->storage == NULL || t->dtype != VQC_F32 ||
      !vqc_tensor_is_contiguous(t))
    return vqc_error(VQC_EINVAL, "distributed_mean: needs a contiguous "
                     "float32 tensor");
  vqc_tensor sum = {0}; /* same shape: the reduced result, out of place */
  VQC_TRY(vqc_tensor_empty(&sum, VQC_F32, t->ndim, t->shape,
                           t->storage->device));
  vqc_status s = vqc_all_reduce_tensor_out_at(c, t, &sum, VQC_SUM, site);
  if (s == VQC_OK) {
    float *dst = vqc_tensor_data(t);
    const int64_t n = vqc_tensor_numel(t);
    const float world = (float)vqc_comm_size(c);
    if (fault == VQC_FAULT_DISCARDED_OUT_OF_PLACE_RESULT) {
      /* The bug (Megatron-LM #5337; LFQ's maybe_distributed_mean called
       * dist.nn.all_reduce(t), which returns its result, and went on with
       * t): the reduced tensor is never read, t stays this rank's value. */
      for (int64_t i = 0; i < n; i++) dst[i] = dst[i] / world;
    } else {
      const float *src = vqc_tensor_data(&sum);
      for (int64_t i = 0; i < n; i++) dst[i] = src[i] / world;
    }
  }
  vqc_tensor_free(&sum);
  return s;
}

/* One bucket: params [first, last) of the list, n floats in all. When
 * keep_local (SKIP_GRAD_SYNC on this rank only), the rank takes part in the
 * collective but leaves its gradients as they were. */
static vqc_status reduce_bucket(vqc_comm *c, const vqc_param_list *params,
                                int first, int last, float *bucket, size_t n,
                                vqc_ddp_fault fault, bool keep_local) {
  size_t off = 0;
  for (int i = first; i < last; i++) {
    const vqc_param *p = &params->items[i];
    if (p->grad == NULL) continue;
    memcpy(bucket + off, p->grad, (size_t)p->numel * sizeof(float));
    off += (size_t)p->numel;
  }
  /* THE gradient all_reduce of a bucket (inside vqc_distributed_mean): the
   * one call site per bucket that the ledger and the checkers name. */
  vqc_tensor t = {0}; /* (n,) view of the bucket */
  const int64_t shape[1] = {(int64_t)n};
  VQC_TRY(vqc_tensor_wrap(&t, bucket, VQC_F32, 1, shape));
  vqc_status s = vqc_distributed_mean(
      c, &t, fault == VQC_DDP_FAULT_DISCARD_MEAN
                 ? VQC_FAULT_DISCARDED_OUT_OF_PLACE_RESULT
                 : VQC_FAULT_NONE);
  vqc_tensor_free(&t);
  if (s != VQC_OK) return s;
  /* spec/bugs.md #4 on one rank: the average is computed and dropped. */
  if (keep_local) return VQC_OK;
  off = 0;
  for (int i = first; i < last; i++) {
    const vqc_param *p = &params->items[i];
    if (p->grad == NULL) continue;
    memcpy(p->grad, bucket + off, (size_t)p->numel * sizeof(float));
    off += (size_t)p->numel;
  }
  return VQC_OK;
}

vqc_status vqc_ddp_average_grads(vqc_comm *c, const vqc_param_list *params,
                                 const vqc_ddp_options *opt) {
  if (c == NULL) return VQC_OK;
  vqc_ddp_options o;
  memset(&o, 0, sizeof o);
  if (opt != NULL) o = *opt;
  size_t cap = o.bucket_elems > 0 ? o.bucket_elems : VQC_DDP_DEFAULT_BUCKET_ELEMS;

  if (o.fault == VQC_DDP_FAULT_SKIP_GRAD_SYNC) {
    /* spec/bugs.md #4: the gradients are never made identical across ranks;
     * each rank's optimizer then steps on its local gradient. */
    return VQC_OK;
  }
  const bool keep_local = o.fault == VQC_DDP_FAULT_SKIP_GRAD_SYNC_LAST_RANK &&
                          vqc_comm_rank(c) == vqc_comm_size(c) - 1;

  /* Largest bucket needed: the cap, or one parameter bigger than it. */
  size_t biggest = 0, total = 0;
  for (int i = 0; i < params->count; i++) {
    if (params->items[i].grad == NULL) continue;
    size_t n = (size_t)params->items[i].numel;
    if (n > biggest) biggest = n;
    total += n;
  }
  if (total == 0) return VQC_OK;
  size_t bucket_cap = biggest > cap ? biggest : (total < cap ? total : cap);
  float *bucket = malloc(bucket_cap * sizeof(float));
  if (bucket == NULL)
    return vqc_error(VQC_ENOMEM, "ddp: gradient bucket of %zu floats", bucket_cap);

  vqc_status s = VQC_OK;
  int first = 0;
  size_t filled = 0;
  for (int i = 0; i < params->count && s == VQC_OK; i++) {
    if (params->items[i].grad == NULL) continue;
    size_t n = (size_t)params->items[i].numel;
    if (filled > 0 && filled + n > cap) {
      s = reduce_bucket(c, params, first, i, bucket, filled, o.fault,
                        keep_local);
      first = i;
      filled = 0;
    }
    filled += n;
  }
  if (s == VQC_OK && filled > 0)
    s = reduce_bucket(c, params, first, params->count, bucket, filled, o.fault,
                      keep_local);
  free(bucket);
  return s;
}

float vqc_ddp_loss_scale(int64_t local_rows, int64_t global_rows, int world) {
  if (global_rows <= 0) return 0.0f;
  return (float)((double)world * (double)local_rows / (double)global_rows);
}
