/* rfsq.c: residual FSQ over Q layers of one FSQ, quantize dropout with a
 * synced seed, and decoding indices back to codes (see vqc/rfsq.h).
 *
 * Written from vector-quantize-pytorch 1.31's ResidualFSQ as we know it (no
 * golden cases for it yet); the details we are least sure of are marked
 * "UNSURE" below. */
#include "vqc/rfsq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vqc/rvq.h" /* the shared dropout-cutoff steps */

/* As in fsq.c: torch rounds each product to float32 before it is used
 * (q_l = code * s_l is stored, then subtracted), so no fused multiply-add. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

void vqc_rfsq_params_default(vqc_rfsq_params *p, const int32_t *levels, int d,
                             int num_quantizers) {
  memset(p, 0, sizeof *p);
  p->num_quantizers = num_quantizers;
  p->d = d;
  const int n = d < VQC_FSQ_MAX_DIMS ? d : VQC_FSQ_MAX_DIMS;
  for (int i = 0; levels && i < n; i++) p->levels[i] = levels[i];
  p->preserve_symmetry = false;
  p->bound_eps = 1e-3;
  p->quantize_dropout = false;
  p->dropout_cutoff_index = 0;
  p->dropout_multiple_of = 1;
}

vqc_status vqc_rfsq_init(vqc_rfsq *r, const vqc_rfsq_params *p) {
  if (!r || !p) return vqc_error(VQC_EINVAL, "rfsq_init: NULL argument");
  memset(r, 0, sizeof *r);
  const int Q = p->num_quantizers;
  if (Q < 1 || Q > VQC_RFSQ_MAX_QUANTIZERS)
    return vqc_error(VQC_EINVAL, "rfsq_init: num_quantizers %d, expected "
                     "1..%d", Q, VQC_RFSQ_MAX_QUANTIZERS);
  if (p->dropout_cutoff_index < 0 || p->dropout_cutoff_index >= Q ||
      p->dropout_multiple_of < 1)
    return vqc_error(VQC_EINVAL, "rfsq_init: dropout cutoff index %d (must "
                     "be in [0, %d)), multiple_of %d (>= 1)",
                     p->dropout_cutoff_index, Q, p->dropout_multiple_of);
  VQC_TRY(vqc_fsq_init(&r->fsq, p->levels, p->d, 1, p->preserve_symmetry,
                       p->bound_eps));
  r->p = *p;
  /* Upstream: (torch.Tensor(levels) - 1) ** -l, float32. UNSURE: torch
   * computes powf (or 1/x for l = 1); we round the double power to float,
   * which can differ in the last bit only when L-1 is not a power of two and
   * the double result lies within 2^-29 relative of a float midpoint. */
  for (int l = 0; l < Q; l++)
    for (int i = 0; i < p->d; i++) {
      const float s = (float)pow((double)(p->levels[i] - 1), -(double)l);
      if (!(s > 0.0f))
        return vqc_error(VQC_EINVAL, "rfsq_init: scale of layer %d, dim %d "
                         "((%d - 1)^-%d) underflows float32", l, i,
                         (int)p->levels[i], l);
      r->scales[l][i] = s;
    }
  return VQC_OK;
}

vqc_status vqc_rfsq_draw_cutoff(const vqc_rfsq *r, vqc_comm *comm,
                                int64_t local_seed, int *cutoff,
                                int64_t *synced_seed) {
  if (!r || !cutoff)
    return vqc_error(VQC_EINVAL, "rfsq_draw_cutoff: NULL argument");
  int64_t seed = local_seed;
  /* Upstream get_maybe_sync_seed: without this all_reduce the ranks run
   * different numbers of layers (#142); a rank that skips it leaves the
   * others waiting (#198). */
  if (comm) VQC_TRY(vqc_all_reduce(comm, &seed, &seed, 1, VQC_I64, VQC_SUM));
  if (synced_seed) *synced_seed = seed;
  const int c = vqc_dropout_cutoff_from_seed(seed, r->p.dropout_cutoff_index,
                                             r->p.num_quantizers - 1);
  *cutoff = vqc_dropout_round_cutoff(c, r->p.dropout_multiple_of);
  return VQC_OK;
}

/* Shared argument checks of forward and backward; *last receives the last
 * layer that runs. */
static vqc_status check_run(const vqc_rfsq *r, const char *what,
                            const float *x, int64_t M, int cutoff, int *last) {
  if (!r || r->p.num_quantizers < 1)
    return vqc_error(VQC_EINVAL, "%s: not initialised", what);
  if (M < 0 || (M > 0 && !x))
    return vqc_error(VQC_EINVAL, "%s: %lld rows, x %p", what, (long long)M,
                     (const void *)x);
  const int Q = r->p.num_quantizers;
  if (cutoff < Q - 1 && !r->p.quantize_dropout)
    return vqc_error(VQC_EINVAL, "%s: cutoff %d drops layers but "
                     "quantize_dropout is off", what, cutoff);
  if (cutoff < Q - 1 && cutoff < r->p.dropout_cutoff_index)
    return vqc_error(VQC_EINVAL, "%s: cutoff %d below dropout_cutoff_index "
                     "%d", what, cutoff, r->p.dropout_cutoff_index);
  *last = cutoff < Q - 1 ? cutoff : Q - 1;
  return VQC_OK;
}

/* z (M, d) = residual / s_l, elementwise per dimension (float32 division,
 * as upstream's residual / scale). */
static void scale_down(const vqc_rfsq *r, int l, const float *residual,
                       int64_t M, float *z) {
  const int d = r->p.d;
  for (int64_t i = 0; i < M; i++)
    for (int k = 0; k < d; k++)
      z[i * d + k] = residual[i * d + k] / r->scales[l][k];
}

vqc_status vqc_rfsq_forward(const vqc_rfsq *r, const float *x, int64_t M,
                            int cutoff, int32_t *indices, float *quantized) {
  int last = 0;
  VQC_TRY(check_run(r, "rfsq_forward", x, M, cutoff, &last));
  if (M > 0 && (!indices || !quantized))
    return vqc_error(VQC_EINVAL, "rfsq_forward: NULL indices or quantized");
  const int Q = r->p.num_quantizers, d = r->p.d;
  const size_t n = (size_t)(M > 0 ? M : 1) * (size_t)d;
  float *residual = malloc(n * sizeof(float)); /* (M, d) */
  float *z = malloc(n * sizeof(float));        /* (M, d) layer input/codes */
  int32_t *idx = malloc((size_t)(M > 0 ? M : 1) * sizeof(int32_t)); /* (M,) */
  vqc_status s = VQC_OK;
  if (!residual || !z || !idx) {
    s = vqc_error(VQC_ENOMEM, "rfsq_forward: %lld rows", (long long)M);
    goto done;
  }
  if (M > 0) memcpy(residual, x, (size_t)(M * d) * sizeof(float));
  /* Upstream starts from the Python float 0. and adds each layer's q. */
  for (int64_t j = 0; j < M * d; j++) quantized[j] = 0.0f;

  for (int l = 0; l < Q; l++) {
    if (l > last) { /* dropped: upstream appends a row of -1 */
      for (int64_t i = 0; i < M; i++) indices[i * Q + l] = -1;
      continue;
    }
    scale_down(r, l, residual, M, z);
    if ((s = vqc_fsq_quantize(&r->fsq, z, M, z, idx))) goto done;
    for (int64_t i = 0; i < M; i++) {
      indices[i * Q + l] = idx[i];
      for (int k = 0; k < d; k++) {
        const float q = z[i * d + k] * r->scales[l][k];
        residual[i * d + k] -= q;
        quantized[i * d + k] += q;
      }
    }
  }
done:
  free(residual);
  free(z);
  free(idx);
  return s;
}

vqc_status vqc_rfsq_backward(const vqc_rfsq *r, const float *x, int64_t M,
                             int cutoff, const float *grad_out, float *grad_x) {
  int last = 0;
  VQC_TRY(check_run(r, "rfsq_backward", x, M, cutoff, &last));
  if (M > 0 && (!grad_out || !grad_x))
    return vqc_error(VQC_EINVAL, "rfsq_backward: NULL grad_out or grad_x");
  const int d = r->p.d;
  const size_t n = (size_t)(M > 0 ? M : 1) * (size_t)d;
  float *residual = malloc(n * sizeof(float)); /* (M, d) */
  float *z = malloc(n * sizeof(float));        /* (M, d) layer input */
  float *g = malloc(n * sizeof(float));        /* (M, d) layer gradient */
  float *acc = malloc(n * sizeof(float));      /* (M, d) sum over layers */
  vqc_status s = VQC_OK;
  if (!residual || !z || !g || !acc) {
    s = vqc_error(VQC_ENOMEM, "rfsq_backward: %lld rows", (long long)M);
    goto done;
  }
  if (M > 0) memcpy(residual, x, (size_t)(M * d) * sizeof(float));
  for (int64_t j = 0; j < M * d; j++) acc[j] = 0.0f;

  /* Replays the forward for residual_l. UNSURE: autograd accumulates the
   * layers' contributions to x in its own order; we add l ascending. */
  for (int l = 0; l <= last; l++) {
    scale_down(r, l, residual, M, z);
    for (int64_t i = 0; i < M; i++)
      for (int k = 0; k < d; k++)
        g[i * d + k] = grad_out[i * d + k] * r->scales[l][k]; /* (q*s)' */
    if ((s = vqc_fsq_backward(&r->fsq, z, g, M, g))) goto done;
    for (int64_t i = 0; i < M; i++)
      for (int k = 0; k < d; k++)
        acc[i * d + k] += g[i * d + k] / r->scales[l][k]; /* (res/s)' */
    /* The next residual, as the forward computes it. */
    if ((s = vqc_fsq_quantize(&r->fsq, z, M, z, NULL))) goto done;
    for (int64_t i = 0; i < M; i++)
      for (int k = 0; k < d; k++)
        residual[i * d + k] -= z[i * d + k] * r->scales[l][k];
  }
  if (M > 0) memcpy(grad_x, acc, (size_t)(M * d) * sizeof(float));
done:
  free(residual);
  free(z);
  free(g);
  free(acc);
  return s;
}

vqc_status vqc_rfsq_codes_from_indices(const vqc_rfsq *r,
                                       const int32_t *indices, int64_t M,
                                       int q_given, float *codes) {
  if (!r || r->p.num_quantizers < 1 || M < 0 ||
      (M > 0 && (!indices || !codes)))
    return vqc_error(VQC_EINVAL, "rfsq_codes_from_indices: bad argument");
  const int Q = r->p.num_quantizers, d = r->p.d;
  if (q_given < 0 || q_given > Q)
    return vqc_error(VQC_ESHAPE, "rfsq_codes_from_indices: %d index columns "
                     "for %d quantizers", q_given, Q);
  if (q_given < Q && !r->p.quantize_dropout)
    return vqc_error(VQC_ESHAPE, "rfsq_codes_from_indices: %d index columns "
                     "for %d quantizers; padding missing quantizers needs "
                     "quantize_dropout (as upstream)", q_given, Q);
  const int64_t C = r->fsq.codebook_size;
  for (int64_t i = 0; i < M; i++)
    for (int l = 0; l < q_given; l++) {
      const int32_t c = indices[i * q_given + l];
      if (c < -1 || c >= C)
        return vqc_error(VQC_EINVAL, "rfsq_codes_from_indices: index %d at "
                         "row %lld, quantizer %d is outside [-1, %lld)",
                         (int)c, (long long)i, l, (long long)C);
    }
  for (int l = 0; l < Q; l++)
    for (int64_t i = 0; i < M; i++) {
      float *dst = codes + ((int64_t)l * M + i) * d;
      const int32_t c = l < q_given ? indices[i * q_given + l] : -1;
      if (c < 0) { /* upstream: masked_fill(0) then * scale, still 0 */
        for (int k = 0; k < d; k++) dst[k] = 0.0f;
        continue;
      }
      VQC_TRY(vqc_fsq_indices_to_codes(&r->fsq, &c, 1, dst));
      for (int k = 0; k < d; k++) dst[k] *= r->scales[l][k];
    }
  return VQC_OK;
}

vqc_status vqc_rfsq_output_from_indices(const vqc_rfsq *r,
                                        const int32_t *indices, int64_t M,
                                        int q_given, float *out) {
  if (!r || r->p.num_quantizers < 1 || M < 0 || (M > 0 && !out))
    return vqc_error(VQC_EINVAL, "rfsq_output_from_indices: bad argument");
  const int Q = r->p.num_quantizers;
  const int64_t Md = M * r->p.d;
  float *codes = malloc((size_t)(Md > 0 ? Md : 1) * (size_t)Q * sizeof(float));
  if (!codes)
    return vqc_error(VQC_ENOMEM, "rfsq_output_from_indices: %lld rows",
                     (long long)M);
  vqc_status s = vqc_rfsq_codes_from_indices(r, indices, M, q_given, codes);
  /* UNSURE: upstream reduces with torch sum over q, whose order for large Q
   * may be pairwise; for Q <= 4 or so it is sequential, as here. */
  if (s == VQC_OK)
    for (int64_t j = 0; j < Md; j++) {
      float acc = 0.0f;
      for (int l = 0; l < Q; l++) acc += codes[(int64_t)l * Md + j];
      out[j] = acc;
    }
  free(codes);
  return s;
}
