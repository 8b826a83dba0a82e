/* vq.h: the reference VQ codebook (Euclidean, EMA updates, k-means init,
 * dead-code expiry) and the distributed row sampler it uses.
 *
 * Semantics: docs/spec/quantizers.md, which follows
 * lucidrains/vector-quantize-pytorch 1.31.0 (golden cases in
 * tests/fixtures/vqpt). All codebook arithmetic is float32.
 *
 * Shapes: x is (M, D) row-major float32 (batch and sequence flattened);
 * a codebook has C codes of D floats. Inputs and outputs are caller-owned
 * plain arrays; the codebook state lives in vqc_tensor objects so that the
 * harness can digest it and the comm layer can see what gets reduced.
 *
 * Distributed: every function that takes a vqc_vq_ctx runs its collectives
 * through ctx->comm (NULL, or a NULL ctx, means one process). All ranks must
 * call the same functions in the same order with replicated codebook state;
 * the local batches may differ in size, including zero rows.
 *
 * Randomness: every draw (k-means initial rows, dead-code replacement rows,
 * the split of those rows across ranks, RVQ dropout seed and cutoff) goes
 * through a vqc_draws table so tests and the conformance harness can inject
 * recorded draws; a NULL table (or NULL member) draws from vqc_rng keyed by
 * (params.seed, ctx->step, purpose, rank). */
#ifndef VQC_VQ_H
#define VQC_VQ_H

#include <stdbool.h>
#include <stdint.h>

#include "vqc/comm.h"
#include "vqc/fault.h"
#include "vqc/rng.h"
#include "vqc/status.h"
#include "vqc/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The clamp under the square root of the distance (upstream cdist eps). */
#define VQC_VQ_DIST_CLAMP 1e-8f

/* ---- parameters */

typedef struct vqc_vq_params {
  int64_t dim;           /* D */
  int64_t codebook_size; /* C */
  /* EMA: the weight is float32(1 - decay) computed in double, as upstream
   * does with a Python float (float32 arithmetic on 0.8f would give a
   * weight one ulp away from 0.2f). */
  double decay;          /* default 0.8 */
  double eps;            /* Laplace smoothing, default 1e-5 */
  /* Dead-code expiry runs after each training EMA when > 0: codes whose EMA
   * count is < threshold are replaced by sampled batch rows. */
  double threshold_ema_dead_code; /* default 0 (off) */
  /* cluster_size given to a replaced code; < 0 means "= threshold". */
  double reset_cluster_size;      /* default -1 */
  bool kmeans_init;      /* default false: the codebook starts initted */
  int kmeans_iters;      /* default 10; >= 1 when kmeans_init */
  double commitment_weight;       /* default 1.0 */
  /* Train mode still returns the commitment loss but never updates state
   * (upstream freeze_codebook=True). */
  bool freeze_codebook;  /* default false */
  uint64_t seed;         /* keys the default draws and the random init */
  /* A bug of the catalogue (fault.h) to switch on in this codebook's code,
   * VQC_FAULT_NONE (the default) for the correct code. The codebook acts on
   * LOST_INPLACE_CONTIGUOUS and MISMATCHED_COLLECTIVE (vq_ema.c) and
   * SAMPLER_FLOAT_SPLIT (vq_sampler.c, dead-code expiry); it ignores the
   * others. Tests and the scenario runner set it; nothing else should. */
  vqc_fault fault;       /* default VQC_FAULT_NONE */
} vqc_vq_params;

/* Fills *p with the defaults above for a (codebook_size, dim) codebook. */
void vqc_vq_params_default(vqc_vq_params *p, int64_t dim,
                           int64_t codebook_size);

/* ---- draws (injectable randomness) */

/* Where a draw is made, handed to every draw callback. */
typedef struct vqc_draw_at {
  vqc_rng_purpose purpose; /* VQC_RNG_KMEANS, _DEAD_CODE, _DROPOUT */
  uint64_t step;           /* ctx->step */
  int rank;                /* this rank (0 without a comm) */
  int layer;               /* RVQ layer (ctx->layer), 0 for a lone VQ */
} vqc_draw_at;

/* Each member may be NULL (then the default below is used). A callback
 * returns VQC_OK or an error that the calling function propagates. */
typedef struct vqc_draws {
  void *user; /* passed back to every callback */
  /* This rank's share of sampled rows: fill rows[0..k) with indices into
   * the local pool of n rows (0 <= rows[j] < n). Default: the first k
   * entries of a random permutation of 0..n-1 when n >= k (no replacement),
   * else k uniform draws from 0..n-1 (with replacement), as upstream's
   * sample_vectors. */
  vqc_status (*rows)(void *user, vqc_draw_at at, int64_t n, int64_t k,
                     int64_t *rows);
  /* Rank 0 only: split k draws over `size` ranks whose local pools hold
   * counts[r] rows; fill shares[0..size). Default: vqc_vq_split_draws. */
  vqc_status (*split)(void *user, vqc_draw_at at, int size,
                      const int64_t *counts, int64_t k, int64_t *shares);
  /* RVQ quantize dropout: this rank's contribution to the seed that is then
   * all_reduce(SUM)'d (upstream get_maybe_sync_seed). Default: uniform in
   * [0, 10000) from (seed, step, VQC_RNG_DROPOUT, rank). */
  vqc_status (*dropout_seed)(void *user, vqc_draw_at at, int64_t *seed);
  /* RVQ quantize dropout: the cutoff in [lo, hi] derived from the synced
   * seed (before rounding up to multiple_of). Default: upstream's
   * random.Random(synced_seed).randrange(lo, hi + 1) (py_random.h), a pure
   * function of the synced seed. */
  vqc_status (*dropout_cutoff)(void *user, vqc_draw_at at, int64_t synced_seed,
                               int lo, int hi, int *cutoff);
} vqc_draws;

/* Per-call context. A NULL ctx means: one process, step 0, default draws. */
typedef struct vqc_vq_ctx {
  vqc_comm *comm;          /* NULL: single process, no collectives */
  uint64_t step;           /* keys the default draws */
  const vqc_draws *draws;  /* NULL: all defaults */
  int layer;               /* informational, passed to draw callbacks */
} vqc_vq_ctx;

/* ---- the codebook */

typedef struct vqc_vq {
  vqc_vq_params p;
  vqc_tensor embed;        /* (C, D) f32: the codebook E */
  vqc_tensor cluster_size; /* (C,)   f32: EMA counts */
  vqc_tensor embed_avg;    /* (C, D) f32: EMA sums */
  bool initted;            /* false until k-means init ran (kmeans_init) */
  /* Optional: called by vqc_vq_forward right before it first writes the
   * state above in a call (k-means init, EMA update), so a checker reading
   * the state in the background can finish first (vqcheck's overlapped
   * digest). A non-OK return stops the forward. NULL: none. */
  vqc_status (*before_update)(void *user);
  void *before_update_user;
} vqc_vq;

/* Builds a fresh codebook: cluster_size = 1, embed_avg = E. `embed` (C, D)
 * is copied when given; otherwise E is zero with kmeans_init or uniform in
 * [-sqrt(6/D), sqrt(6/D)) from (seed, 0, VQC_RNG_INIT, -1). initted is
 * !kmeans_init (k-means, when on, replaces whatever E holds).
 * Free with vqc_vq_free (also on failure the struct is left freeable). */
vqc_status vqc_vq_init(vqc_vq *vq, const vqc_vq_params *p, const float *embed);
/* Frees the state tensors; accepts NULL and zeroed structs. */
void vqc_vq_free(vqc_vq *vq);

/* Views of the state (valid while vq lives). */
float *vqc_vq_embed(vqc_vq *vq);        /* (C, D) */
float *vqc_vq_cluster_size(vqc_vq *vq); /* (C,) */
float *vqc_vq_embed_avg(vqc_vq *vq);    /* (C, D) */

/* ---- building blocks (pure functions) */

/* torch.lerp for float32, bit for bit: w < 0.5 ? a + w*(b-a)
 * : b - (b-a)*(1-w). */
float vqc_lerp_f32(float a, float b, float w);

/* Nearest code of each row: d(i,c) = sqrt(max(|x_i|^2 + |E_c|^2
 * - 2 x_i.E_c, 1e-8)) in float32, in this expanded form, evaluated as
 * (x2 + e2) + (-2 dot); the dot product and both squared norms are
 * sequential fused multiply-add chains over d (acc = fmaf(a[d], b[d], acc)
 * from acc = 0), so that the scalar reference and the SIMD kernels chosen
 * at run time give identical bits. The lowest index wins ties (after the
 * clamp and sqrt). x (M, D), E (C, D); indices (M) out; neg_dist (M, C)
 * receives -d when not NULL (upstream's -cdist). One thread. */
vqc_status vqc_vq_nearest(const float *x, int64_t M, const float *E,
                          int64_t C, int64_t D, int64_t *indices,
                          float *neg_dist);

/* commitment_weight * mean((q - x)^2) over M*D elements (float32 result;
 * the sum is accumulated in double). 0 when M*D == 0. */
float vqc_vq_commitment_loss(const float *x, const float *q, int64_t M,
                             int64_t D, double commitment_weight);

/* Backward of the training forward: out = x + sg(q - x) (identity gradient
 * to x) and loss = w * mean((sg(q) - x)^2):
 *   grad_x = grad_out + grad_loss * w * 2 (x - q) / (M*D).
 * grad_out (M, D) may be NULL (zero). grad_x (M, D) out. */
void vqc_vq_backward(const float *x, const float *q, int64_t M, int64_t D,
                     double commitment_weight, const float *grad_out,
                     float grad_loss, float *grad_x);

/* Rank 0's split of k draws over `size` ranks holding counts[r] rows:
 * sequential binomials shares[r] ~ Binomial(k_left, counts[r] / rows_left)
 * (the probability from integers, so it is exact), the LAST rank taking the
 * remainder, so sum(shares) == k always. rows_left == 0 gives share 0.
 * VQC_ESHAPE when k > 0 but every pool is empty. */
vqc_status vqc_vq_split_draws(vqc_rng *r, int size, const int64_t *counts,
                              int64_t k, int64_t *shares);

/* The distributed sampler (upstream sample_vectors_distributed): samples k
 * rows of D floats from the union of the ranks' local pools x (n_local, D)
 * and writes the same k rows, in rank order, to out (k, D) on every rank.
 *   1. all_gather the local row counts;
 *   2. rank 0 splits k (draws->split or vqc_vq_split_draws) and broadcasts
 *      the split (an invalid split is broadcast as -1s so no rank hangs);
 *   3. each rank samples its share of its local rows (draws->rows);
 *   4. all_gatherv of the sampled rows in rank order.
 * `k` is this rank's own count; if the broadcast split does not sum to it
 * (ranks disagree on k), every rank still finishes the collectives, writes
 * nothing, and returns VQC_ESHAPE naming both counts. `purpose` selects
 * the streams (dead code or k-means). `seed` keys the default draws. */
vqc_status vqc_vq_sample_rows(const vqc_vq_ctx *ctx, vqc_rng_purpose purpose,
                              uint64_t seed, const float *x, int64_t n_local,
                              int64_t D, int64_t k, float *out);

/* One or more Lloyd iterations (upstream kmeans), distributed when ctx has a
 * comm: assign by vqc_vq_nearest, bins = global bincount (all_reduce SUM,
 * int64), means = (segment sum / max(bins, 1)) all_reduce(SUM)'d, keeping
 * the old mean where bins == 0. means (C, D) is updated in place (it holds
 * the initial means on entry); bins (C) receives the last assignment's
 * global counts. iters >= 1. */
vqc_status vqc_vq_kmeans(const vqc_vq_ctx *ctx, const float *x, int64_t M,
                         int64_t D, int64_t C, int iters, float *means,
                         int64_t *bins);

/* ---- codebook operations */

/* k-means init (upstream init_embed_): initial means are C rows drawn by
 * vqc_vq_sample_rows (purpose VQC_RNG_KMEANS), then p.kmeans_iters
 * iterations; cluster_size = bins, embed_avg = means * bins, E recomputed
 * with the EMA smoothing (empty clusters get zero rows); initted = true. */
vqc_status vqc_vq_kmeans_init(vqc_vq *vq, const vqc_vq_ctx *ctx,
                              const float *x, int64_t M);

/* The batch statistics of one EMA update, in one fixed summation order that
 * the CPU and the device (vqc_gpu_vq_stats) share: counts (C) f32 and sums
 * S (C, D) of the rows x (M, D) that indices (M) assign to each code.
 *   counts[c] = the number of rows of code c as float, saturating at 2^24
 *     (upstream's float += 1, exact up to there);
 *   sums[c]: code c's rows, in increasing row order, are cut into chunks of
 *     VQC_VQ_STATS_CHUNK rows (the last may be shorter); each chunk is
 *     summed in double from 0 in row order, the chunks' double sums are
 *     added in chunk order from 0, and the total is rounded once to float.
 * The chunks are what lets a GPU sum a code that most rows fell into (a
 * collapsing codebook) in parallel and still produce these bits; a code
 * with at most one chunk of rows is the plain row-order double sum.
 * sums is written at sums[c * stride_c + d * stride_d], so the caller picks
 * the layout (vq_ema.c's S is a transposed view). VQC_EINVAL names the
 * first row whose index is outside [0, C); VQC_ENOMEM. */
#define VQC_VQ_STATS_CHUNK 256
vqc_status vqc_vq_batch_stats(const float *x, int64_t M, int64_t D,
                              const int64_t *indices, int64_t C,
                              float *counts, float *sums, int64_t stride_c,
                              int64_t stride_d);

/* EMA update with this forward's rows and codes, in the spec's order:
 * counts n then sums S (both vqc_tensor, all_reduce(SUM)'d in place),
 * cluster_size = lerp(cluster_size, n, w), embed_avg = lerp(embed_avg, S, w),
 * E = embed_avg / smoothed. x (M, D), indices (M). */
vqc_status vqc_vq_ema_update(vqc_vq *vq, const vqc_vq_ctx *ctx, const float *x,
                             int64_t M, const int64_t *indices);

/* Dead-code expiry (a no-op when threshold <= 0): expired = cluster_size <
 * threshold (strict, float32); k = count; k rows from vqc_vq_sample_rows
 * (purpose VQC_RNG_DEAD_CODE) go, in ascending code order, into E[c];
 * cluster_size[c] = R; embed_avg[c] = row * R. expired (C) receives the
 * 0/1 mask and num_expired the count (each may be NULL). */
vqc_status vqc_vq_expire_codes(vqc_vq *vq, const vqc_vq_ctx *ctx,
                               const float *x, int64_t M, uint8_t *expired,
                               int64_t *num_expired);

/* One forward of the quantizer on x (M, D):
 *   1. k-means init if p.kmeans_init and not initted (also in eval mode, as
 *      upstream does: the one state change eval can make);
 *   2. indices (M) = nearest codes, quantized (M, D) = E[indices] with the
 *      codebook before this step's update (the straight-through output's
 *      forward value; see vqc_vq_backward for its gradient);
 *   3. *loss = commitment loss in train mode, 0 in eval mode (may be NULL);
 *   4. train mode without freeze_codebook: EMA update, then dead-code
 *      expiry. Eval mode changes no state. */
vqc_status vqc_vq_forward(vqc_vq *vq, const vqc_vq_ctx *ctx, const float *x,
                          int64_t M, bool train, int64_t *indices,
                          float *quantized, float *loss);

/* ---- the codebook on a CUDA device
 *
 * vqc_vq_forward with the codebook state in device memory (vq_device.c):
 * the same steps in the same order, the same collectives through ctx->comm
 * and the same bits (tests/gpu/test_gpu_ema.c compares the two). The
 * nearest code, E[indices], the EMA statistics, the lerps and the
 * renormalisation run as the kernels of vqc/gpu.h, each bit-identical to
 * its CPU twin; k-means init and dead-code expiry have no kernels and run,
 * as the CPU functions themselves, on the host codebook `vq`, which holds
 * an exact copy of the device state between calls (what checkers read) and
 * sends what they change up. The EMA's two all_reduces move the device
 * tensors in place on an nccl comm and go through the host staging tensors
 * on the others (threads, mpi). Without a device (or without CUDA in the
 * build) every call fails: VQC_ENODEVICE or VQC_EUNSUPPORTED. */
typedef struct vqc_vq_device {
  vqc_tensor embed;        /* (C, D) f32, device: the codebook E */
  vqc_tensor cluster_size; /* (C) f32, device */
  vqc_tensor embed_avg;    /* (C, D) f32, device */
  int64_t rows;            /* the batch buffers' rows (resized as needed) */
  vqc_tensor x;            /* (rows, D) f32, device: the batch */
  vqc_tensor indices;      /* (rows) i64, device */
  vqc_tensor quantized;    /* (rows, D) f32, device */
  vqc_tensor counts;       /* (C) f32, device: the step's counts, reduced */
  vqc_tensor sums;         /* (C, D) f32, device: the same for the sums */
  vqc_tensor host_counts;  /* (C) f32, host: staging for threads and mpi */
  vqc_tensor host_sums;    /* (C, D) f32, host: the same */
} vqc_vq_device;

/* Fills *dev (any contents: it is overwritten) with device copies of vq's
 * state and batch buffers for `rows` rows. Free with vqc_vq_device_free,
 * also on failure. */
vqc_status vqc_vq_device_init(vqc_vq_device *dev, const vqc_vq *vq,
                              int64_t rows);
/* Frees the device state and buffers; accepts NULL and zeroed structs. */
void vqc_vq_device_free(vqc_vq_device *dev);

/* One forward as vqc_vq_forward, with dev (from vqc_vq_device_init(dev, vq,
 * ...)) holding the state and vq its host copy: equal on entry (do not
 * change vq between calls), equal on return. x (M, D), indices (M),
 * quantized (M, D) and loss are host memory, as for vqc_vq_forward; the
 * batch buffers grow or shrink when M differs from dev->rows.
 * vq->before_update is called where vqc_vq_forward calls it. The faults
 * LOST_INPLACE_CONTIGUOUS and MISMATCHED_COLLECTIVE live in vq_ema.c's
 * collectives, which this replaces: a training forward with either is
 * VQC_EINVAL. After a failure the two copies may differ. */
vqc_status vqc_vq_device_forward(vqc_vq *vq, vqc_vq_device *dev,
                                 const vqc_vq_ctx *ctx, const float *x,
                                 int64_t M, bool train, int64_t *indices,
                                 float *quantized, float *loss);

#ifdef __cplusplus
}
#endif
#endif /* VQC_VQ_H */
