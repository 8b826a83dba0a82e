/* bottleneck.h: the reference quantizers (vq.h, rvq.h, fsq.h) as autoencoder
 * bottlenecks (the vqc_bottleneck interface of autoencoder.h).
 *
 * Each adapter is a struct you own: initialise it, set its run fields (comm,
 * step, train) before every forward, and hand vqc_*_bottleneck_iface(&b) to
 * vqc_autoencoder_create. The struct must outlive the autoencoder and must
 * not move while the autoencoder holds it (the interface keeps its address).
 *
 *   vqc_vq_bottleneck b;
 *   vqc_vq_bottleneck_init(&b, &params, NULL);
 *   vqc_bottleneck bn = vqc_vq_bottleneck_iface(&b);
 *   vqc_autoencoder_create(&cfg, &init, &bn, &ae);
 *   for each step s:  b.comm = comm; b.step = s; b.train = true;
 *                     vqc_autoencoder_forward(ae, ...); ... backward ...
 *   vqc_autoencoder_destroy(ae); vqc_vq_bottleneck_free(&b);
 *
 * Semantics (docs/spec/quantizers.md):
 *   VQ   q = E[nearest(z)] (the codebook before this step's EMA update);
 *        row_loss = commitment_weight * mean over d of (q - z)^2 in train
 *        mode, 0 in eval mode (as vqc_vq_forward's loss); gradient
 *        dz = dq + dloss_row * w * 2 (z - q) / dim (straight-through plus the
 *        commitment term, vqc_straight_through_backward).
 *   RVQ  layers l = 0..cutoff run on residual_l (residual_0 = z,
 *        residual_{l+1} = residual_l - sg(q_l)), q = sum of the layers' codes;
 *        row_loss = sum over the layers that ran of w * mean_d
 *        (q_l - residual_l)^2 (0 in eval mode). Each layer's output is
 *        straight-through to its own residual, and every residual has
 *        identity gradient to z, so, as upstream ResidualVQ does,
 *        dz = n * dq + dloss_row * w * 2 / dim * sum_l (residual_l - q_l)
 *        with n the number of layers that ran (not dq alone).
 *   FSQ  q = the FSQ codes of z (width num_codebooks * d must equal the
 *        latent dim); no loss (row_loss = 0, as upstream FSQ returns no
 *        auxiliary loss) and no state; dz = vqc_fsq_backward (the rounding
 *        passes the gradient, tanh does not).
 *
 * Replicated state registered for digests (grad NULL), which the autoencoder
 * prefixes with "bottleneck.":
 *   VQ   "embed" (C, D), "cluster_size" (C), "embed_avg" (C, D)
 *   RVQ  "layers.<l>.embed", "layers.<l>.cluster_size", "layers.<l>.embed_avg"
 *   FSQ  nothing (its codebook is implicit).
 *
 * Distributed: the VQ and RVQ forwards run their collectives (k-means init,
 * EMA, dead-code sampling, the dropout seed sync) on `comm` in train mode, so
 * every rank must run a forward at every step, with the same `step` and
 * `train`. Note that vqc_autoencoder_forward does not call the bottleneck on
 * a rank whose shard is empty (rows == 0); with a VQ or RVQ bottleneck in
 * train mode that rank would then skip the EMA collectives, so shards must
 * not be empty. */
#ifndef VQC_BOTTLENECK_H
#define VQC_BOTTLENECK_H

#include <stdbool.h>
#include <stdint.h>

#include "vqc/autoencoder.h"
#include "vqc/comm.h"
#include "vqc/fsq.h"
#include "vqc/rvq.h"
#include "vqc/status.h"
#include "vqc/vq.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- VQ codebook (EMA) ---- */

typedef struct vqc_vq_bottleneck {
  vqc_vq vq;              /* the codebook, owned */
  /* Run fields, set by the caller before each forward. */
  vqc_comm *comm;         /* NULL: one process */
  uint64_t step;          /* keys the default draws; the same on every rank */
  bool train;             /* train: EMA, k-means, dead codes, commitment loss */
  const vqc_draws *draws; /* NULL: the library's draws */
  /* Written by each forward (owned): the codes chosen for its rows. */
  int64_t *indices;       /* (rows,) */
  int64_t rows;           /* rows of the last forward; -1 before the first */
  int64_t capacity;       /* allocated rows of the scratch arrays */
  float weight;           /* commitment weight the last forward applied
                             (0 in eval mode): what backward differentiates */
} vqc_vq_bottleneck;

/* Builds the codebook as vqc_vq_init(p, embed) does (embed (C, D) copied
 * when not NULL); run fields start at comm NULL, step 0, train true. The
 * struct is left freeable on failure. */
vqc_status vqc_vq_bottleneck_init(vqc_vq_bottleneck *b, const vqc_vq_params *p,
                                  const float *embed);
/* Frees the codebook and scratch; accepts NULL and zeroed structs. */
void vqc_vq_bottleneck_free(vqc_vq_bottleneck *b);
/* The interface over b (name "vq"). */
vqc_bottleneck vqc_vq_bottleneck_iface(vqc_vq_bottleneck *b);

/* ---- residual VQ ---- */

typedef struct vqc_rvq_bottleneck {
  vqc_rvq rvq;            /* Q codebooks, owned */
  vqc_comm *comm;         /* run fields as in vqc_vq_bottleneck */
  uint64_t step;
  bool train;
  const vqc_draws *draws;
  /* Written by each forward (owned). */
  int64_t *indices;       /* (rows, Q), -1 for dropped layers */
  int cutoff;             /* last layer that ran */
  int64_t rows;           /* -1 before the first forward */
  int64_t capacity;
  float weight;           /* as in vqc_vq_bottleneck */
  /* Scratch kept for backward: sum over the layers that ran of
   * (residual_l - q_l), the commitment gradient's direction. */
  float *commit_dir;      /* (rows, D) */
  float *residual;        /* (rows, D) forward scratch */
  float *layer_q;         /* (rows, D) forward scratch */
  int64_t *layer_idx;     /* (rows,) forward scratch */
} vqc_rvq_bottleneck;

/* Builds the layers as vqc_rvq_init(p, codebooks) does; run fields as for
 * VQ. Left freeable on failure. */
vqc_status vqc_rvq_bottleneck_init(vqc_rvq_bottleneck *b,
                                   const vqc_rvq_params *p,
                                   const float *codebooks);
void vqc_rvq_bottleneck_free(vqc_rvq_bottleneck *b); /* accepts NULL */
/* The interface over b (name "rvq"). Its forward follows vqc_rvq_forward
 * step for step (same draws, same collectives in the same order) and keeps
 * what backward needs. */
vqc_bottleneck vqc_rvq_bottleneck_iface(vqc_rvq_bottleneck *b);

/* ---- FSQ ---- */

typedef struct vqc_fsq_bottleneck {
  vqc_fsq fsq;       /* a plain value: nothing to free */
  /* Written by each forward (owned). */
  int32_t *indices;  /* (rows, num_codebooks) */
  int64_t rows;      /* -1 before the first forward */
  int64_t capacity;
} vqc_fsq_bottleneck;

/* Sets up the quantizer as vqc_fsq_init does. */
vqc_status vqc_fsq_bottleneck_init(vqc_fsq_bottleneck *b,
                                   const int32_t *levels, int d,
                                   int num_codebooks, bool preserve_symmetry,
                                   double bound_eps);
void vqc_fsq_bottleneck_free(vqc_fsq_bottleneck *b); /* accepts NULL */
/* The interface over b (name "fsq"). The forward fails with VQC_ESHAPE
 * when the latent dim is not num_codebooks * d. */
vqc_bottleneck vqc_fsq_bottleneck_iface(vqc_fsq_bottleneck *b);

#ifdef __cplusplus
}
#endif
#endif /* VQC_BOTTLENECK_H */
