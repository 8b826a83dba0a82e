/* run_models.h: the models a scenario trains, as the runner sees them.
 *
 * One vqc_run_model per rank: the replicated state (built identically on
 * every rank from the scenario's seed), this rank's data shard of every step
 * (vqc/data.h, keyed by (seed, step, rank)), one training step, and, for the
 * models trained by gradient, a single-process twin that recomputes the
 * averaged gradient on the global batch (the equivalence checker's
 * reference).
 *
 *   vq           a VQ codebook trained by EMA, with dead-code expiry
 *   rvq          residual VQ with quantize dropout (on from step 1: step 0
 *                is a warm-up without dropout, so every rank agrees on a
 *                baseline before the dropout seed sync first runs)
 *   fsq          autoencoder with an FSQ bottleneck, DDP + Adam
 *   clip         two linear towers + a contrastive loss over the global
 *                batch, DDP + Adam
 *   autoencoder  autoencoder with a VQ bottleneck (EMA), DDP + Adam
 *
 * The scenario's fault is handed to the library code where the real bug
 * lived (vq params, rvq params, DDP options, CLIP gather mode); nothing here
 * decides what a checker finds. */
#ifndef VQC_RUN_MODELS_H
#define VQC_RUN_MODELS_H

#include <stdbool.h>
#include <stdint.h>

#include "scenario.h"
#include "vqc/comm.h"
#include "vqc/nn.h"
#include "vqc/status.h"

typedef struct vqc_run_model vqc_run_model;

/* Whether sc's fault has a code path in sc's model (the fault lives in the
 * code the model runs, and the sizes let it act: sampler_float_split needs
 * dead-code expiry or k-means init, the dropout faults an RVQ of at least
 * two layers, the DDP faults a model trained by gradient, ...). VQC_EINVAL
 * naming the models that can carry it otherwise: a scenario whose fault
 * could never fire would pass or fail for the wrong reason. */
vqc_status vqc_run_check_fault(const vqc_scenario *sc);

/* Builds rank `rank`'s model for scenario sc on comm c (the runner's data
 * comm; its size is the world). sc must outlive the model. VQC_EINVAL when
 * the scenario cannot be trained as given (e.g. an empty shard for a model
 * whose collectives need rows on every rank). Free with
 * vqc_run_model_destroy. */
vqc_status vqc_run_model_create(const vqc_scenario *sc, vqc_comm *c,
                                vqc_run_model **out);
void vqc_run_model_destroy(vqc_run_model *m); /* accepts NULL */

/* Every replicated tensor, by name, in a fixed order (weights and their
 * gradients, bottleneck or codebook state, optimizer state). Owned by m. */
const vqc_param_list *vqc_run_model_state(const vqc_run_model *m);

/* One training step on this rank's shard of `step`: forward, loss,
 * backward, gradient all_reduce, optimizer step, codebook EMA and dead-code
 * expiry, as the model has them. *loss (may be NULL) receives this rank's
 * loss. A collective failure is returned as it came. */
vqc_status vqc_run_model_step(vqc_run_model *m, int64_t step, double *loss);

/* True for the models trained by gradient (fsq, clip, autoencoder). */
bool vqc_run_model_has_reference(const vqc_run_model *m);

/* The equivalence checker's reference (a vqc_reference_grads_fn with user =
 * the model): the gradient a single process computes on the global batch
 * of `step` (every rank's shard, in rank order) from the replicated state
 * as it was when `step` started, averaged as DDP averages. Fills the grads
 * entries by name. VQC_EINVAL for a step other than the last one trained. */
vqc_status vqc_run_model_reference_grads(void *model, int64_t step,
                                         vqc_param_list *grads);

#endif /* VQC_RUN_MODELS_H */
