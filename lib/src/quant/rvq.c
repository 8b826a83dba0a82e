/* rvq.c: residual VQ over Q codebooks, quantize dropout with a seed synced
 * across ranks, and decoding indices back to codes (see rvq.h). */
#include <stdlib.h>
#include <string.h>

#include "quant/vq_internal.h"
#include "vqc/py_random.h"
#include "vqc/rvq.h"

/* Upstream draws the per-rank dropout seed with torch.randint(0, 10000). */
#define RVQ_SEED_RANGE 10000

void vqc_rvq_params_default(vqc_rvq_params *p, int num_quantizers, int64_t dim,
                            int64_t codebook_size) {
  memset(p, 0, sizeof *p);
  p->num_quantizers = num_quantizers;
  vqc_vq_params_default(&p->layer, dim, codebook_size);
  p->quantize_dropout = false;
  p->dropout_cutoff_index = 0;
  p->dropout_multiple_of = 1;
}

/* A distinct seed per layer (SplitMix64 finaliser of seed + golden * (l+1)),
 * so the layers' default draws never coincide. */
static uint64_t layer_seed(uint64_t seed, int l) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (uint64_t)(l + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

vqc_status vqc_rvq_init(vqc_rvq *r, const vqc_rvq_params *p,
                        const float *codebooks) {
  if (!r || !p) return vqc_error(VQC_EINVAL, "rvq_init: NULL argument");
  memset(r, 0, sizeof *r);
  const int Q = p->num_quantizers;
  if (Q < 1 || p->dropout_cutoff_index < 0 || p->dropout_cutoff_index >= Q ||
      p->dropout_multiple_of < 1)
    return vqc_error(VQC_EINVAL, "rvq_init: num_quantizers %d, dropout cutoff "
                     "index %d (must be in [0, Q)), multiple_of %d (>= 1)", Q,
                     p->dropout_cutoff_index, p->dropout_multiple_of);
  r->p = *p;
  r->layers = calloc((size_t)Q, sizeof(vqc_vq));
  if (!r->layers) return vqc_error(VQC_ENOMEM, "rvq_init: %d layers", Q);
  const int64_t CD = p->layer.codebook_size * p->layer.dim;
  for (int l = 0; l < Q; l++) {
    vqc_vq_params lp = p->layer;
    lp.seed = layer_seed(p->layer.seed, l);
    vqc_status s = vqc_vq_init(&r->layers[l], &lp,
                               codebooks ? codebooks + l * CD : NULL);
    if (s != VQC_OK) {
      vqc_rvq_free(r);
      return s;
    }
  }
  return VQC_OK;
}

void vqc_rvq_free(vqc_rvq *r) {
  if (!r || !r->layers) return;
  for (int l = 0; l < r->p.num_quantizers; l++) vqc_vq_free(&r->layers[l]);
  free(r->layers);
  r->layers = NULL;
}

vqc_status vqc_rvq_draw_cutoff(const vqc_rvq *r, const vqc_vq_ctx *ctx,
                               int *cutoff, int64_t *synced_seed) {
  if (!r || !r->layers || !cutoff)
    return vqc_error(VQC_EINVAL, "rvq_draw_cutoff: NULL argument");
  const vqc_draws *draws = vq_ctx_draws(ctx);
  vqc_draw_at at = vq_draw_at(ctx, VQC_RNG_DROPOUT);
  const int lo = r->p.dropout_cutoff_index, hi = r->p.num_quantizers - 1;

  int64_t seed = 0; /* this rank's contribution, then the sum over ranks */
  if (draws && draws->dropout_seed) {
    VQC_TRY(draws->dropout_seed(draws->user, at, &seed));
  } else {
    vqc_rng g;
    vqc_rng_init(&g, r->p.layer.seed,
                 vqc_rng_stream_for(at.step, VQC_RNG_DROPOUT, at.rank));
    seed = vqc_rng_randint(&g, 0, RVQ_SEED_RANGE);
  }
  vqc_comm *comm = vq_ctx_comm(ctx);
  /* The seed sync: a rank that skips it leaves the others waiting (#198);
   * ranks that do not sync run different layer counts (#142). */
  if (comm && r->p.fault == VQC_FAULT_UNSYNCED_DROPOUT_SEED) {
    /* The UNSYNCED_DROPOUT_SEED fault (vector-quantize-pytorch #142 b):
     * the all_reduce is missing, so each rank derives the cutoff from its
     * own seed and the ranks run different numbers of layers; their
     * codebook collectives then pair with another layer's. */
  } else if (comm) {
    VQC_TRY(vqc_all_reduce(comm, &seed, &seed, 1, VQC_I64, VQC_SUM));
  }
  if (synced_seed) *synced_seed = seed;

  int c = lo;
  if (draws && draws->dropout_cutoff) {
    VQC_TRY(draws->dropout_cutoff(draws->user, at, seed, lo, hi, &c));
    if (c < lo || c > hi)
      return vqc_error(VQC_EINVAL, "rvq: injected dropout cutoff %d outside "
                       "[%d, %d]", c, lo, hi);
  } else {
    c = vqc_dropout_cutoff_from_seed(seed, lo, hi);
  }
  *cutoff = vqc_dropout_round_cutoff(c, r->p.dropout_multiple_of);
  return VQC_OK;
}

int vqc_dropout_cutoff_from_seed(int64_t synced_seed, int lo, int hi) {
  /* A pure function of the synced seed, so identical on every rank, and
   * equal to upstream's cutoff for the same seed. */
  vqc_py_random g;
  vqc_py_random_seed(&g, synced_seed);
  return (int)vqc_py_random_randrange(&g, lo, (int64_t)hi + 1);
}

int vqc_dropout_round_cutoff(int cutoff, int multiple_of) {
  if (multiple_of <= 1) return cutoff;
  return ((cutoff + 1 + multiple_of - 1) / multiple_of) * multiple_of - 1;
}

vqc_status vqc_rvq_forward(vqc_rvq *r, const vqc_vq_ctx *ctx, const float *x,
                           int64_t M, bool train, int64_t *indices,
                           float *quantized, float *losses, int *cutoff) {
  if (!r || !r->layers)
    return vqc_error(VQC_EINVAL, "rvq_forward: not initialised");
  VQC_TRY(vq_check_rows("rvq_forward", x, M));
  if (M > 0 && (!indices || !quantized))
    return vqc_error(VQC_EINVAL, "rvq_forward: NULL indices or quantized");
  const int Q = r->p.num_quantizers;
  const int64_t D = r->p.layer.dim;

  if (train && r->p.quantize_dropout && Q > 1 &&
      r->p.fault == VQC_FAULT_SEED_SYNC_SOME_RANKS &&
      vq_ctx_rank(ctx) % 2 == 1) {
    /* The SEED_SYNC_SOME_RANKS fault (vector-quantize-pytorch #198): the
     * odd ranks run this forward as an inference forward (PyTorch Lightning
     * ran such forwards, gradients off, on some ranks only). Upstream then
     * skips quantize dropout, and with it get_maybe_sync_seed's all_reduce,
     * which the training ranks enter and wait in forever; an inference
     * forward updates no codebook either. */
    train = false;
  }
  int last = Q - 1;
  if (train && r->p.quantize_dropout && Q > 1)
    VQC_TRY(vqc_rvq_draw_cutoff(r, ctx, &last, NULL));
  if (cutoff) *cutoff = last;

  const size_t nrow = (size_t)(M > 0 ? M : 1);
  float *residual = malloc(nrow * (size_t)D * sizeof(float)); /* (M, D) */
  float *q = malloc(nrow * (size_t)D * sizeof(float));        /* (M, D) */
  int64_t *idx = malloc(nrow * sizeof(int64_t));              /* (M,) */
  vqc_status s = VQC_OK;
  if (!residual || !q || !idx) {
    s = vqc_error(VQC_ENOMEM, "rvq_forward: %lld rows", (long long)M);
    goto done;
  }
  if (M > 0) memcpy(residual, x, (size_t)(M * D) * sizeof(float));
  for (int64_t j = 0; j < M * D; j++) quantized[j] = 0.0f;

  vqc_vq_ctx lctx = ctx ? *ctx : (vqc_vq_ctx){0};
  for (int l = 0; l < Q; l++) {
    if (l > last) { /* dropped: no state change and no collectives */
      for (int64_t i = 0; i < M; i++) indices[i * Q + l] = -1;
      if (losses) losses[l] = 0.0f;
      continue;
    }
    lctx.layer = l;
    float loss = 0.0f;
    if ((s = vqc_vq_forward(&r->layers[l], &lctx, residual, M, train, idx, q,
                            &loss)))
      goto done;
    if (losses) losses[l] = loss;
    for (int64_t i = 0; i < M; i++) indices[i * Q + l] = idx[i];
    for (int64_t j = 0; j < M * D; j++) {
      residual[j] -= q[j];
      quantized[j] += q[j];
    }
  }
done:
  free(residual);
  free(q);
  free(idx);
  return s;
}

vqc_status vqc_rvq_codes_from_indices(const vqc_rvq *r, const int64_t *indices,
                                      int64_t M, int q_given, float *codes) {
  if (!r || !r->layers || M < 0 || (M > 0 && (!indices || !codes)))
    return vqc_error(VQC_EINVAL, "rvq_codes_from_indices: bad argument");
  const int Q = r->p.num_quantizers;
  const int64_t C = r->p.layer.codebook_size, D = r->p.layer.dim;
  if (q_given < 0 || q_given > Q)
    return vqc_error(VQC_ESHAPE, "rvq_codes_from_indices: %d index columns "
                     "for %d quantizers", q_given, Q);
  if (q_given < Q && !r->p.quantize_dropout)
    return vqc_error(VQC_ESHAPE, "rvq_codes_from_indices: %d index columns "
                     "for %d quantizers; padding missing quantizers needs "
                     "quantize_dropout (as upstream)", q_given, Q);
  for (int64_t i = 0; i < M; i++)
    for (int l = 0; l < q_given; l++) {
      const int64_t c = indices[i * q_given + l];
      if (c < -1 || c >= C)
        return vqc_error(VQC_EINVAL, "rvq_codes_from_indices: index %lld at "
                         "row %lld, quantizer %d is outside [-1, %lld)",
                         (long long)c, (long long)i, l, (long long)C);
    }
  for (int l = 0; l < Q; l++) {
    const float *E = vqc_tensor_data(&r->layers[l].embed);
    for (int64_t i = 0; i < M; i++) {
      float *dst = codes + ((int64_t)l * M + i) * D;
      const int64_t c = l < q_given ? indices[i * q_given + l] : -1;
      if (c < 0)
        memset(dst, 0, (size_t)D * sizeof(float));
      else
        memcpy(dst, E + c * D, (size_t)D * sizeof(float));
    }
  }
  return VQC_OK;
}

vqc_status vqc_rvq_output_from_indices(const vqc_rvq *r,
                                       const int64_t *indices, int64_t M,
                                       int q_given, float *out) {
  if (!r || !r->layers || M < 0 || (M > 0 && !out))
    return vqc_error(VQC_EINVAL, "rvq_output_from_indices: bad argument");
  const int Q = r->p.num_quantizers;
  const int64_t D = r->p.layer.dim;
  float *codes = malloc((size_t)((M > 0 ? M : 1) * D * Q) * sizeof(float));
  if (!codes)
    return vqc_error(VQC_ENOMEM, "rvq_output_from_indices: %lld rows",
                     (long long)M);
  vqc_status s = vqc_rvq_codes_from_indices(r, indices, M, q_given, codes);
  if (s == VQC_OK) {
    for (int64_t j = 0; j < M * D; j++) {
      float acc = 0.0f;
      for (int l = 0; l < Q; l++) acc += codes[(int64_t)l * M * D + j];
      out[j] = acc;
    }
  }
  free(codes);
  return s;
}
