/* ddp.h: data-parallel training over a comm, the way PyTorch DDP does it:
 * broadcast the replicated state from rank 0 once at the start, then after
 * every backward average the gradients across ranks (all_reduce SUM, then
 * divide by the world size) so every rank takes the same optimizer step.
 *
 * A NULL comm means a single process: every function is then a no-op, so
 * the same training loop runs with and without ranks. */
#ifndef VQC_DDP_H
#define VQC_DDP_H

#include <stddef.h>
#include <stdint.h>

#include "vqc/comm.h"
#include "vqc/fault.h"
#include "vqc/nn.h"
#include "vqc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fault switch for spec/bugs.md #4 (PyTorch/XLA DDP: replicas updated their
 * weights from gradients that were never made identical across ranks). With
 * VQC_DDP_FAULT_SKIP_GRAD_SYNC, vqc_ddp_average_grads returns without
 * communicating, exactly where the all_reduce would be, so each rank steps
 * on its own local gradient and the weights drift apart. */
typedef enum {
  VQC_DDP_FAULT_NONE = 0,
  VQC_DDP_FAULT_SKIP_GRAD_SYNC = 1,
  /* spec/bugs.md #1, second form (Megatron-LM #5337, LFQ's
   * maybe_distributed_mean): the bucket average goes through
   * vqc_distributed_mean with VQC_FAULT_DISCARDED_OUT_OF_PLACE_RESULT, so
   * the out-of-place all_reduce's result is dropped and every rank steps on
   * local / W. */
  VQC_DDP_FAULT_DISCARD_MEAN = 2,
  /* spec/bugs.md #4 on one replica: the LAST rank still joins the
   * all_reduce (so the collectives stay matched and nothing hangs) but
   * keeps its local gradient instead of the average, the PyTorch/XLA
   * replica that stepped on its own gradients while the others stayed in
   * sync. The caller chooses from which step on by passing it then. */
  VQC_DDP_FAULT_SKIP_GRAD_SYNC_LAST_RANK = 3,
} vqc_ddp_fault;

typedef struct vqc_ddp_options {
  /* Gradients are packed into flat buckets of at most this many floats (in
   * registration order, a parameter never split) and each bucket is
   * all_reduced with one call. 0 means VQC_DDP_DEFAULT_BUCKET_ELEMS. A
   * parameter larger than the cap gets a bucket of its own. */
  size_t bucket_elems;
  vqc_ddp_fault fault;
} vqc_ddp_options;

#define VQC_DDP_DEFAULT_BUCKET_ELEMS ((size_t)1 << 20) /* 4 MiB of float32 */

/* Copies every entry of `params` (weights and optimizer state alike, any
 * dtype) from rank 0 to all ranks, one broadcast per entry in registration
 * order. */
vqc_status vqc_ddp_broadcast(vqc_comm *c, const vqc_param_list *params);

/* The mean over the ranks of a contiguous float32 tensor, written back into
 * t: an out-of-place all_reduce(SUM) into a temporary
 * (vqc_all_reduce_tensor_out), then t = sum / W (float division), the way
 * LFQ's maybe_distributed_mean averages. fault: VQC_FAULT_NONE, or
 * VQC_FAULT_DISCARDED_OUT_OF_PLACE_RESULT for the bug (the collective runs
 * but its result is never read, so t becomes local / W). A NULL comm leaves
 * t unchanged. */
vqc_status vqc_distributed_mean_at(vqc_comm *c, vqc_tensor *t,
                                   vqc_fault fault, vqc_site site);
/* The ledger names the caller as the collective's call site. */
#define vqc_distributed_mean(c, t, fault) \
  vqc_distributed_mean_at((c), (t), (fault), VQC_SITE)

/* Averages the grads of the trainable entries (grad != NULL) across ranks:
 * per bucket, copy grads in, vqc_distributed_mean, write back
 * sum / W (float division). Every rank must call it with the same list
 * layout. opt may be NULL (defaults). With the threads backend the sum runs
 * in rank order, so every rank ends with bit-identical gradients. */
vqc_status vqc_ddp_average_grads(vqc_comm *c, const vqc_param_list *params,
                                 const vqc_ddp_options *opt);

/* The factor to pass as grad_scale to a backward whose loss is a mean over
 * this rank's `local_rows`, so that DDP's average over `world` ranks equals
 * the gradient of the mean over all `global_rows`: world * local / global.
 * (With even shards it is 1, as in PyTorch DDP; PyTorch gives no such
 * correction for uneven shards.) Returns 0 when global_rows is 0. */
float vqc_ddp_loss_scale(int64_t local_rows, int64_t global_rows, int world);

#ifdef __cplusplus
}
#endif
#endif /* VQC_DDP_H */
