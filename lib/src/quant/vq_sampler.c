/* vq_sampler.c: sampling k rows from a batch sharded across ranks, so every
 * rank ends up with the same k rows (upstream sample_vectors_distributed).
 * Used for k-means initial means and dead-code replacement rows.
 *
 * The split of k across ranks is where upstream lost a row (#142: a float
 * remainder made the shares sum to 9330 for 9331 codes); here the binomial
 * probabilities are ratios of integers and the last rank takes the integer
 * remainder, and every rank checks the gathered count against its own k
 * before writing anything. Between the split and the sampling, a probe
 * ("dead_code" / "kmeans_init", vqc/probe.h) shows the counts to checkers,
 * which may stop every rank before rows move. */
#include <stdlib.h>
#include <string.h>

#include "quant/vq_internal.h"
#include "vqc/probe.h"

static const char *purpose_name(vqc_rng_purpose purpose) {
  return purpose == VQC_RNG_KMEANS ? "k-means init" : "dead-code expiry";
}

vqc_status vqc_vq_split_draws(vqc_rng *r, int size, const int64_t *counts,
                              int64_t k, int64_t *shares) {
  if (!r || !counts || !shares || size < 1 || k < 0)
    return vqc_error(VQC_EINVAL, "split_draws: size %d, k %lld", size,
                     (long long)k);
  int64_t rows_left = 0;
  for (int i = 0; i < size; i++) {
    if (counts[i] < 0)
      return vqc_error(VQC_EINVAL, "split_draws: rank %d has %lld rows", i,
                       (long long)counts[i]);
    rows_left += counts[i];
  }
  if (k > 0 && rows_left == 0)
    return vqc_error(VQC_ESHAPE,
                     "split_draws: %lld rows to sample but every rank's "
                     "batch is empty", (long long)k);
  int64_t left = k;
  for (int i = 0; i < size - 1; i++) {
    int64_t share = 0;
    if (left > 0 && rows_left > 0) {
      /* Conditional binomial: given the draws still to place, rank i gets
       * each with probability (its rows) / (rows of ranks i..size-1). */
      const double p = (double)counts[i] / (double)rows_left;
      VQC_TRY(vqc_rng_binomial(r, left, p, &share));
    }
    shares[i] = share;
    left -= share;
    rows_left -= counts[i];
  }
  shares[size - 1] = left; /* the last rank takes the remainder */
  return VQC_OK;
}

/* The SAMPLER_FLOAT_SPLIT fault (vector-quantize-pytorch #142 a): upstream's
 * sample_multinomial split k draws with float32 probabilities
 * (all_num_samples / all_num_samples.sum()) and drew EVERY rank's share,
 * the last one included, with torch.binomial, so no rank took the integer
 * remainder and the shares summed to k only as far as float32 allowed
 * (9330 rows for 9331 codes). Upstream's conditional probabilities make the
 * loss rare (the last one is 1 to within a few ulps); here each rank's share
 * is drawn from the whole k with its float32 probability, the same defect
 * (nobody takes the remainder) made likely enough that a scenario trips it
 * within a few steps: with a hundred draws the shares sum to k about one
 * time in twenty. The correct split is vqc_vq_split_draws above. */
static vqc_status split_draws_float32(vqc_rng *r, int size,
                                      const int64_t *counts, int64_t k,
                                      int64_t *shares) {
  float total = 0.0f; /* float counts, as upstream's float tensor */
  for (int i = 0; i < size; i++) total += (float)counts[i];
  for (int i = 0; i < size; i++) {
    const float p = total > 0.0f ? (float)counts[i] / total : 0.0f;
    shares[i] = 0;
    if (k > 0 && p > 0.0f)
      VQC_TRY(vqc_rng_binomial(r, k, p > 1.0f ? 1.0 : (double)p, &shares[i]));
  }
  return VQC_OK;
}

/* Default row draw: a randperm prefix without replacement when the pool is
 * large enough, else uniform draws with replacement (upstream
 * sample_vectors). */
static vqc_status default_rows(uint64_t seed, vqc_draw_at at, int64_t n,
                               int64_t k, int64_t *rows) {
  vqc_rng r;
  vqc_rng_init(&r, seed, vqc_rng_stream_for(at.step, at.purpose, at.rank));
  if (n >= k) {
    int64_t *perm = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    if (!perm) return vqc_error(VQC_ENOMEM, "sample rows: permutation of %lld",
                                (long long)n);
    vqc_rng_randperm(&r, n, perm);
    memcpy(rows, perm, (size_t)k * sizeof(int64_t));
    free(perm);
  } else {
    for (int64_t j = 0; j < k; j++) rows[j] = vqc_rng_randint(&r, 0, n);
  }
  return VQC_OK;
}

vqc_status vq_emit_fill_probe(const vqc_vq_ctx *ctx, vqc_rng_purpose purpose,
                              int64_t wanted, int64_t sampled,
                              int64_t local_rows, vqc_site site) {
  vqc_comm *comm = vq_ctx_comm(ctx);
  const bool dead = purpose != VQC_RNG_KMEANS;
  vqc_probe p = {.name = dead ? "dead_code" : "kmeans_init",
                 .step = (int64_t)vq_ctx_step(ctx),
                 .layer = ctx ? ctx->layer : 0};
  /* Four keys never overflow the probe's eight: these cannot fail. */
  vqc_probe_set(&p, dead ? "expired" : "codes", wanted);
  vqc_probe_set(&p, "sampled", sampled);
  vqc_probe_set(&p, "local_rows", local_rows);
  vqc_probe_set(&p, "layer", p.layer);
  return vqc_probe_emit_site(comm, &p, site);
}

/* Rank 0's split, validated: a split that cannot be sampled (a negative
 * share, or rows asked of an empty batch) is replaced by -1s so that the
 * broadcast tells every rank to stop instead of leaving it waiting. A split
 * that is well formed but does not sum to k (#142 a) is broadcast as it is:
 * every rank then sees the counts disagree (the probe, and the check after
 * the gather) and writes nothing. */
static vqc_status split_on_root(const vqc_vq_ctx *ctx, vqc_rng_purpose purpose,
                                uint64_t seed, vqc_fault fault, int size,
                                const int64_t *counts, int64_t k,
                                int64_t *shares) {
  const vqc_draws *draws = vq_ctx_draws(ctx);
  vqc_draw_at at = vq_draw_at(ctx, purpose);
  vqc_status s;
  if (draws && draws->split) {
    s = draws->split(draws->user, at, size, counts, k, shares);
  } else {
    /* Dead code splits from its own purpose; k-means, which runs once,
     * splits from the KMEANS purpose's rank -1 stream (rows use ranks >= 0). */
    const vqc_rng_purpose sp =
        purpose == VQC_RNG_DEAD_CODE ? VQC_RNG_DEAD_CODE_SPLIT : purpose;
    vqc_rng r;
    vqc_rng_init(&r, seed, vqc_rng_stream_for(at.step, sp, -1));
    s = fault == VQC_FAULT_SAMPLER_FLOAT_SPLIT
            ? split_draws_float32(&r, size, counts, k, shares)
            : vqc_vq_split_draws(&r, size, counts, k, shares);
  }
  for (int i = 0; s == VQC_OK && i < size; i++) {
    if (shares[i] < 0 || (shares[i] > 0 && counts[i] == 0))
      s = vqc_error(VQC_ESHAPE, "%s: split gives rank %d %lld rows from a "
                    "batch of %lld", purpose_name(purpose), i,
                    (long long)shares[i], (long long)counts[i]);
  }
  if (s != VQC_OK)
    for (int i = 0; i < size; i++) shares[i] = -1;
  return s;
}

vqc_status vqc_vq_sample_rows(const vqc_vq_ctx *ctx, vqc_rng_purpose purpose,
                              uint64_t seed, const float *x, int64_t n_local,
                              int64_t D, int64_t k, float *out) {
  return vq_sample_rows(ctx, purpose, seed, VQC_FAULT_NONE, x, n_local, D, k,
                        out);
}

vqc_status vq_sample_rows(const vqc_vq_ctx *ctx, vqc_rng_purpose purpose,
                          uint64_t seed, vqc_fault fault, const float *x,
                          int64_t n_local, int64_t D, int64_t k, float *out) {
  VQC_TRY(vq_check_rows("vq_sample_rows", x, n_local));
  if (D <= 0 || k < 0 || (k > 0 && !out))
    return vqc_error(VQC_EINVAL, "vq_sample_rows: D %lld, k %lld, out %p",
                     (long long)D, (long long)k, (void *)out);
  vqc_comm *comm = vq_ctx_comm(ctx);
  const int size = vq_ctx_size(ctx), rank = vq_ctx_rank(ctx);
  const vqc_draws *draws = vq_ctx_draws(ctx);
  const char *what = purpose_name(purpose);

  int64_t *counts = calloc((size_t)size, sizeof(int64_t)); /* rows per rank */
  int64_t *shares = calloc((size_t)size, sizeof(int64_t)); /* draws per rank */
  size_t *elems = calloc((size_t)size, sizeof(size_t));    /* shares * D */
  int64_t *rows = NULL;   /* (shares[rank],) local row ids */
  float *mine = NULL;     /* (shares[rank], D) this rank's sampled rows */
  float *gathered = NULL; /* (sum shares, D) all ranks' rows, rank order */
  vqc_status s = VQC_OK, root_s = VQC_OK;
  if (!counts || !shares || !elems) {
    s = vqc_error(VQC_ENOMEM, "%s: %d ranks", what, size);
    goto done;
  }

  /* 1. every rank learns every rank's pool size. */
  if (comm) {
    if ((s = vqc_all_gather(comm, &n_local, counts, 1, VQC_I64))) goto done;
  } else {
    counts[0] = n_local;
  }

  /* 2. rank 0 splits k; the split is broadcast (-1s if rank 0 failed). */
  if (rank == 0)
    root_s = split_on_root(ctx, purpose, seed, fault, size, counts, k, shares);
  if (comm && (s = vqc_broadcast(comm, shares, (size_t)size, VQC_I64, 0)))
    goto done;
  if (shares[0] < 0) {
    s = rank == 0 ? root_s
                  : vqc_error(VQC_ESHAPE, "%s: rank 0 could not split %lld "
                              "draws (see rank 0's error)", what, (long long)k);
    goto done;
  }

  /* 3. this rank samples its share of its own rows, unless a checker that
   * saw every rank's counts says they disagree (then every rank gets the
   * same refusal here and no collective is left half-entered). */
  const int64_t my = shares[rank];
  int64_t total = 0;
  for (int i = 0; i < size; i++) {
    total += shares[i];
    elems[i] = (size_t)(shares[i] * D);
  }
  if ((s = vq_emit_fill_probe(ctx, purpose, k, total, n_local, VQC_SITE)))
    goto done;
  rows = malloc((size_t)(my > 0 ? my : 1) * sizeof(int64_t));
  mine = malloc((size_t)(my > 0 ? my * D : 1) * sizeof(float));
  gathered = malloc((size_t)(total > 0 ? total * D : 1) * sizeof(float));
  if (!rows || !mine || !gathered) {
    s = vqc_error(VQC_ENOMEM, "%s: %lld sampled rows", what, (long long)total);
    goto done;
  }
  if (my > 0) {
    vqc_draw_at at = vq_draw_at(ctx, purpose);
    s = draws && draws->rows ? draws->rows(draws->user, at, n_local, my, rows)
                             : default_rows(seed, at, n_local, my, rows);
    if (s != VQC_OK) goto done;
  }
  for (int64_t j = 0; j < my; j++) {
    if (rows[j] < 0 || rows[j] >= n_local) {
      s = vqc_error(VQC_ESHAPE, "%s: sampled row %lld of a batch of %lld rows "
                    "on rank %d", what, (long long)rows[j], (long long)n_local,
                    rank);
      goto done;
    }
    memcpy(mine + j * D, x + rows[j] * D, (size_t)D * sizeof(float));
  }

  /* 4. gather every rank's rows in rank order. */
  if (comm) {
    if ((s = vqc_all_gatherv(comm, mine, (size_t)(my * D), gathered, elems,
                             VQC_F32)))
      goto done;
  } else {
    memcpy(gathered, mine, (size_t)(my * D) * sizeof(float));
  }

  /* The invariant: as many sampled rows as this rank expects (its own k). A
   * rank whose k differs from rank 0's (non-replicated state) ends here,
   * after finishing the collectives, without writing out of bounds. */
  if (total != k) {
    s = vqc_error(VQC_ESHAPE, "%s on rank %d: sampled %lld rows (rank 0's "
                  "split) for %lld codes (this rank's count); the ranks "
                  "disagree on how many codes to fill", what, rank,
                  (long long)total, (long long)k);
    goto done;
  }
  if (k > 0) memcpy(out, gathered, (size_t)(k * D) * sizeof(float));
done:
  free(counts);
  free(shares);
  free(elems);
  free(rows);
  free(mine);
  free(gathered);
  return s;
}
