/* vq_ema.c: the codebook's EMA update (spec: "EMA update, in this order").
 *
 * The per-step counts n and sums S are vqc_tensor objects reduced through
 * the comm API, so the collective ledger and the lost-in-place checker see
 * exactly the buffers whose reduced values are used afterwards.
 *
 * The sums are built the way upstream builds them: upstream's
 * einsum('h n d, h n c -> h c d', x, embed_onehot) hands back a (C, D)
 * tensor that is not contiguous. Here S is likewise a transposed view
 * (C, D) of a (D, C) buffer, so reducing it needs a contiguous copy, and the
 * copy's result has to be written back (vector-quantize-pytorch #101 did
 * all_reduce(embed_sum.contiguous()) and dropped it).
 *
 * The batch statistics it reduces (vqc_vq_batch_stats) are vq_stats.c's.
 *
 * Two catalogue faults live here (vqc_vq_params.fault, off by default):
 * LOST_INPLACE_CONTIGUOUS (#101) and MISMATCHED_COLLECTIVE. */
#include <stdint.h>
#include <stdlib.h>

#include "quant/vq_internal.h"

/* all_reduce(SUM) of the counts n (C,). The MISMATCHED_COLLECTIVE fault
 * makes the last rank reduce only the first C-1 counts (an off-by-one in a
 * length, the classic way ranks end up calling the same collective with
 * different counts); the other ranks pass C. */
static vqc_status reduce_counts(vqc_comm *comm, vqc_fault fault,
                                vqc_tensor *counts) {
  const int64_t C = counts->shape[0];
  if (fault == VQC_FAULT_MISMATCHED_COLLECTIVE &&
      vqc_comm_rank(comm) == vqc_comm_size(comm) - 1) {
    vqc_tensor head = {0}; /* view of n[0 .. C-1) */
    VQC_TRY(vqc_tensor_slice(counts, 0, 0, C > 0 ? C - 1 : 0, 1, &head));
    vqc_status s = vqc_all_reduce_tensor(comm, &head, VQC_SUM);
    vqc_tensor_free(&head);
    return s;
  }
  return vqc_all_reduce_tensor(comm, counts, VQC_SUM);
}

/* all_reduce(SUM) of the strided sums S (C, D), through a contiguous copy.
 * The correct code writes the reduced copy back into S; the
 * LOST_INPLACE_CONTIGUOUS fault is upstream's all_reduce(embed_sum
 * .contiguous()) (vector-quantize-pytorch #101): the copy is reduced, then
 * dropped, and S keeps this rank's local sums. */
static vqc_status reduce_sums(vqc_comm *comm, vqc_fault fault,
                              vqc_tensor *embed_sum) {
  vqc_tensor tmp = {0}; /* (C, D) contiguous copy of S, origin = S */
  VQC_TRY(vqc_tensor_contiguous(embed_sum, &tmp));
  vqc_status s = vqc_all_reduce_tensor(comm, &tmp, VQC_SUM);
  if (s == VQC_OK && fault != VQC_FAULT_LOST_INPLACE_CONTIGUOUS)
    s = vqc_tensor_copy_to_origin(&tmp); /* the #101 fix */
  vqc_tensor_free(&tmp);
  return s;
}

vqc_status vqc_vq_ema_update(vqc_vq *vq, const vqc_vq_ctx *ctx, const float *x,
                             int64_t M, const int64_t *indices) {
  if (!vq || !vqc_vq_embed(vq))
    return vqc_error(VQC_EINVAL, "vq_ema_update: codebook not initialised");
  VQC_TRY(vq_check_rows("vq_ema_update", x, M));
  if (M > 0 && !indices)
    return vqc_error(VQC_EINVAL, "vq_ema_update: indices is NULL");
  const int64_t C = vq->p.codebook_size, D = vq->p.dim;
  vqc_comm *comm = vq_ctx_comm(ctx);

  vqc_tensor counts = {0};    /* (C,) f32: n_c, this rank then all ranks */
  vqc_tensor sums_dc = {0};   /* (D, C) f32: the storage of S, transposed */
  vqc_tensor embed_sum = {0}; /* (C, D) f32 view of sums_dc: S_c (strided) */
  const int64_t shape_dc[2] = {D, C};
  vqc_status s;
  /* Not zeroed: vqc_vq_batch_stats writes every count and sum. */
  if ((s = vqc_tensor_empty(&counts, VQC_F32, 1, &C, VQC_DEVICE_CPU)) ||
      (s = vqc_tensor_empty(&sums_dc, VQC_F32, 2, shape_dc, VQC_DEVICE_CPU)) ||
      (s = vqc_tensor_transpose(&sums_dc, 0, 1, &embed_sum)))
    goto done;

  /* 1. local counts and sums, in the fixed order vqc_vq_batch_stats
   * defines (double sums rounded once, so the result is close to any
   * summation order; upstream uses a BLAS matmul whose order we cannot
   * reproduce). St[d * C + c] = S[c, d]. */
  float *St = vqc_tensor_data(&sums_dc);
  if ((s = vqc_vq_batch_stats(x, M, D, indices, C, vqc_tensor_data(&counts),
                              St, 1, C)))
    goto done;
  float *n = vqc_tensor_data(&counts);

  /* 2. all_reduce(SUM) of n, then of S; the reduced tensors are the ones
   * read below. */
  if (comm) {
    if ((s = reduce_counts(comm, vq->p.fault, &counts))) goto done;
    if ((s = reduce_sums(comm, vq->p.fault, &embed_sum))) goto done;
  }
  n = vqc_tensor_data(&counts);

  /* 3. lerp toward this step's statistics with w = float32(1 - decay). */
  const float w = (float)(1.0 - vq->p.decay);
  float *cs = vqc_vq_cluster_size(vq);
  float *avg = vqc_vq_embed_avg(vq);
  for (int64_t c = 0; c < C; c++) cs[c] = vq_lerp_f32(cs[c], n[c], w);
  /* 16 codes and 64 columns at a time through a tile: St is read a cache
   * line per column instead of a float per 4 KiB page, and the lerps run
   * along contiguous rows of embed_avg (elementwise: the order does not
   * matter). Read column by column, the (D, C) layout made this loop take
   * a tenth of the whole update. */
  float tile[16][64]; /* tile[c - c0][d - d0] = S[c, d] */
  for (int64_t c0 = 0; c0 < C; c0 += 16) {
    const int64_t cn = C - c0 < 16 ? C - c0 : 16;
    for (int64_t d0 = 0; d0 < D; d0 += 64) {
      const int64_t dn = D - d0 < 64 ? D - d0 : 64;
      for (int64_t d = 0; d < dn; d++)
        for (int64_t c = 0; c < cn; c++)
          tile[c][d] = St[(d0 + d) * C + c0 + c];
      for (int64_t c = 0; c < cn; c++) {
        float *a = avg + (c0 + c) * D + d0;
        for (int64_t d = 0; d < dn; d++) a[d] = vq_lerp_f32(a[d], tile[c][d], w);
      }
    }
  }

  /* 4. E = embed_avg / smoothed counts. */
  vq_renormalize(vq);
  s = VQC_OK;
done:
  vqc_tensor_free(&counts);
  vqc_tensor_free(&embed_sum);
  vqc_tensor_free(&sums_dc);
  return s;
}
