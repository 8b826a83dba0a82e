/* clip.h: a CLIP-style symmetric contrastive loss over the GLOBAL batch of
 * a data-parallel job, with the feature gather done two ways: the correct
 * autograd-aware gather, and the OpenCLIP bug of spec/bugs.md #5.
 *
 * Each rank holds (rows, D) image and text features; rows may differ per
 * rank. The features of all ranks are all_gathered in rank order into the
 * global batch (N rows), rows are L2-normalised (x / max(|x|, 1e-12), like
 * F.normalize), and
 *
 *   S = logit_scale * I T^T                            (N, N)
 *   loss = sum over anchors a of w * (CE(S[a, :], a) + CE(S[:, a], a))
 *
 * where CE(s, a) = logsumexp(s) - s[a]. Anchors and weight:
 *   global loss (local_loss false, OpenCLIP's default): every a < N,
 *     w = 1 / (2N); every rank computes the same value, the global loss;
 *   local loss (local_loss true, OpenCLIP's --local-loss): only this rank's
 *     rows, w = W / (2N), so that the mean of the ranks' losses is the global
 *     loss (with even shards, w = 1 / (2 rows): OpenCLIP's mean).
 *
 * Gradients for this rank's own feature rows, as autograd would leave them on
 * the rank before DDP averages parameter gradients (divides by W):
 *   VQC_GATHER_WITH_GRAD (torch.distributed.nn.all_gather): the gathered
 *     features stay in the graph; each rank computes d loss_r / d(all rows)
 *     (N, D), the backward of the gather sums these over ranks (here one
 *     vqc_all_reduce SUM per modality of the full (N, D) gradient, in place of
 *     a reduce-scatter) and the rank keeps its own rows. After DDP's 1/W
 *     average this equals the single-process gradient of the global loss.
 *   VQC_GATHER_NO_GRAD (torch.distributed.all_gather, OpenCLIP's
 *     gather_with_grad=False): other ranks' rows are constants; only the
 *     rank's own rows (put back in place, as OpenCLIP does) carry gradient,
 *     and nothing is communicated in backward. Averaged, this is 1/W of the
 *     right gradient for the global loss, and wrong in direction too for the
 *     local loss (the terms where this rank's rows are the negatives of other
 *     ranks' anchors are lost).
 *
 * Arithmetic: features are gathered as float32; normalisation, logits,
 * softmax and their backward run in double, and the gradient is rounded to
 * float32 before the gather's backward reduces it (as a float32 autograd
 * gradient would be). Deterministic: the same inputs give bit-identical
 * results on every rank. */
#ifndef VQC_CLIP_H
#define VQC_CLIP_H

#include <stdbool.h>
#include <stdint.h>

#include "vqc/comm.h"
#include "vqc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  VQC_GATHER_WITH_GRAD = 0, /* correct: torch.distributed.nn.all_gather */
  VQC_GATHER_NO_GRAD = 1,   /* spec/bugs.md #5: torch.distributed.all_gather */
} vqc_gather_mode;
const char *vqc_gather_mode_name(vqc_gather_mode m); /* "with_grad", "no_grad" */
vqc_status vqc_gather_mode_from_name(const char *name, vqc_gather_mode *out);

typedef struct vqc_clip_config {
  vqc_gather_mode gather;
  bool local_loss;
  float logit_scale; /* CLIP's exp(t); 1 / 0.07 at CLIP's initialisation */
} vqc_clip_config;

/* img, txt: this rank's (rows, dim) features (rows may be 0). Writes *loss
 * (this rank's loss, see above) and ADDS this rank's gradients to dimg, dtxt
 * (rows, dim) and, when dscale is not NULL, the gradient for logit_scale to
 * *dscale. comm NULL: a single process (W = 1) on these rows alone.
 * Collectives per call, on every rank whatever its row count: one all_gather
 * of the row counts, two all_gatherv of the features, and with
 * VQC_GATHER_WITH_GRAD two all_reduce of the (N, dim) gradients. */
vqc_status vqc_clip_loss(vqc_comm *c, const vqc_clip_config *cfg,
                         const float *img, const float *txt, int64_t rows,
                         int64_t dim, double *loss, float *dimg, float *dtxt,
                         float *dscale);

#ifdef __cplusplus
}
#endif
#endif /* VQC_CLIP_H */
