/* equiv_cases.h: distributed-equals-serial test bodies shared by every comm
 * backend (threads from Criterion, MPI from tests/mpi/mpi_equiv.c).
 *
 * Each case trains on the comm's W ranks, rank r on its own shard of each
 * step's global batch (data.h: drawn from (seed, step, rank), uneven
 * shards), and at the same time, on every rank, replays the single-process
 * run on the concatenated global batch, which each rank can regenerate
 * locally. At every step it checks, on every rank:
 *   - the codes chosen for this rank's rows equal the single-process codes
 *     of those rows (exactly);
 *   - every replicated tensor has the same digest as on rank 0 (exchanged
 *     over the side channel, which does not share fate with the comm under
 *     test);
 *   - codebook state (embed, cluster_size, embed_avg) within
 *     VQC_EQUIV_CODEBOOK_TOL (relative, see below) of the single-process
 *     run, and model weights within VQC_EQUIV_WEIGHT_TOL (absolute).
 * A case returns this rank's failed checks (each printed to stderr with the
 * rank) and fills a report with the measured figures, reduced over all
 * ranks (so every rank holds the same report). Cases are collective: every
 * rank must run the same cases in the same order. Any W >= 1 works.
 *
 * Random draws (k-means rows, dead-code rows, the RVQ dropout seed) are
 * injected so that both runs draw the same global rows: a fixed permutation
 * P of the global batch per (step, purpose, layer); a sample of k rows is
 * P's first k entries in ascending order, and rank r's share is those that
 * fall in its shard. The library's sampler still does the work (the counts
 * all_gather, rank 0's split broadcast, the rank-order all_gatherv). The
 * dropout seed of rank r is f(step, r); the single-process run is given
 * sum_r f(step, r), which is what the all_reduce must produce. */
#ifndef VQC_EQUIV_CASES_H
#define VQC_EQUIV_CASES_H

#include <stddef.h>
#include <stdint.h>

#include "vqc/comm.h"
#include "vqc/ddp.h"

/* Codebook state: |dist - single| <= TOL * max(|single|, floor), floor 1,
 * except for residual layers l >= 1 of an RVQ, whose floor is the largest
 * |value| of layer 0's tensor of the same name. The two runs differ only in
 * reduction order: per-rank partial sums (EMA sums, k-means partial means)
 * rounded to float and summed over ranks, against one sum over all rows.
 * Each such step errs by a few float32 ulps (~1e-7 relative) and the EMA's
 * lerp with w = 0.2 damps rather than accumulates it. A residual layer
 * quantizes x minus the earlier codes, so it inherits those errors as
 * absolute errors at the scale of x in a smaller residual: measured against
 * the residual itself they reached 2e-6 in layer 1, against layer 0's scale
 * they stay near 2e-7 like everything else. */
#define VQC_EQUIV_CODEBOOK_TOL 1e-6
/* Trainable weights (SGD with momentum, lr 0.05, a handful of steps): the
 * averaged gradients differ from the single-process gradients by summation
 * order, a few 1e-7 of their size, moving weights of size ~0.3 by ~1e-8 per
 * step; as in test_ddp we allow 1e-6 absolute. */
#define VQC_EQUIV_WEIGHT_TOL 1e-6

typedef struct vqc_equiv_report {
  int world;                 /* ranks */
  int steps;                 /* training steps run */
  double codebook_rel;       /* max |dist - single| / max(|single|, 1) over
                                codebook state, all steps; -1 if none */
  double weight_abs;         /* max |dist - single| over trainable weights,
                                all steps; -1 if the case has none */
  int64_t index_checked;     /* codes compared with the single-process run */
  int64_t index_mismatches;  /* ... that differed */
  int64_t digest_checked;    /* (rank, step, tensor) digests compared */
  int64_t digest_mismatches; /* ... that differed from rank 0's */
  int64_t expired;           /* dead codes replaced in the single run */
  int64_t dropped_steps;     /* RVQ: steps that dropped layers */
  int64_t distinct_cutoffs;  /* RVQ: different cutoffs seen */
} vqc_equiv_report;

/* Which quantizer sits in the autoencoder's bottleneck. */
typedef enum {
  VQC_EQUIV_BN_VQ = 0,
  VQC_EQUIV_BN_RVQ = 1,
  VQC_EQUIV_BN_FSQ = 2,
} vqc_equiv_bn;

/* (a) VQ codebook: k-means init, EMA and dead-code expiry over several
 * steps; one step in three leaves rank 1 (W > 1) with an empty shard. */
int vqc_equiv_vq_codebook(vqc_comm *c, vqc_equiv_report *rep);
/* (b) RVQ with quantize dropout (seed synced by all_reduce), k-means init,
 * EMA and dead-code expiry per layer. */
int vqc_equiv_rvq_dropout(vqc_comm *c, vqc_equiv_report *rep);
/* (c) The autoencoder with a quantizer bottleneck, trained with DDP
 * gradient averaging (vqc_ddp_loss_scale for the uneven shards) and SGD with
 * momentum; weights, optimizer state, gradients and bottleneck state are
 * digested. Every rank starts from a different init and the DDP broadcast
 * must make them replicas. `fault` is passed to vqc_ddp_average_grads (tests
 * use VQC_DDP_FAULT_SKIP_GRAD_SYNC to see the checks fail). Shards are never
 * empty here: the autoencoder skips its bottleneck on an empty shard, which
 * would leave that rank out of the EMA collectives (see bottleneck.h). */
int vqc_equiv_autoencoder(vqc_comm *c, vqc_equiv_bn kind, vqc_ddp_fault fault,
                          vqc_equiv_report *rep);

/* One line of figures, e.g. "W=3 steps=6 codebook_rel=2.1e-08 ...". */
void vqc_equiv_format(const vqc_equiv_report *rep, char *buf, size_t n);

typedef int (*vqc_equiv_case_fn)(vqc_comm *c, vqc_equiv_report *rep);
typedef struct vqc_equiv_case {
  const char *name;
  vqc_equiv_case_fn fn;
} vqc_equiv_case;

/* vq_codebook, rvq_dropout, autoencoder_vq, autoencoder_rvq,
 * autoencoder_fsq (the last three without a fault). */
extern const vqc_equiv_case vqc_equiv_cases[];
extern const int vqc_equiv_case_count;

#endif /* VQC_EQUIV_CASES_H */
