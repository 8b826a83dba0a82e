/* model_trained.h: what the models trained by gradient share (fsq, clip,
 * autoencoder): DDP's gradient average, Adam, and a single-process twin
 * that recomputes the step's averaged gradient on the global batch (the
 * equivalence checker's reference). Internal to harness/models/.
 *
 * A family gives its network as a vqc_net_ops (what differs: how it is
 * built and how its forward and backward run); model_trained.c does the
 * rest. The family's vqc_model_ops then reads
 *   .create = <its create, calling vqc_trained_create(m, &its_net)>,
 *   .step = vqc_trained_step, .reference_grads = vqc_trained_reference_grads,
 *   .destroy = vqc_trained_destroy.
 *
 * Every rank builds the same net from the same stream (no broadcast: a
 * divergence at step 0 must be a bug in the step, not hidden by a copy);
 * the twin is built the same way without the fault (it is the correct math
 * by definition) and without a comm. Before each step the trained net's
 * entries are copied aside, and the reference is the twin's gradient on the
 * global batch from that copy. */
#ifndef VQC_MODEL_TRAINED_H
#define VQC_MODEL_TRAINED_H

#include "model.h"
#include "vqc/rng.h"

typedef struct vqc_net_ops {
  /* Builds the net of sc with weights drawn from init. with_fault: whether
   * sc's fault goes in (false for the twin). device: where a part with a
   * device path runs (fsq's quantizer). *out: free with destroy. */
  vqc_status (*create)(const vqc_scenario *sc, vqc_rng *init, bool with_fault,
                       vqc_device device, void **out);
  void (*destroy)(void *net); /* accepts NULL */
  /* The net's entries (weights with their grads), in a fixed order. */
  const vqc_param_list *(*params)(const void *net);
  /* Forward and backward on x (rows, D) (and, for paired data, x2): the
   * gradient of grad_scale * loss lands in the entries' grads, which the
   * caller has zeroed. comm NULL: one process (the twin). */
  vqc_status (*forward_backward)(void *net, vqc_comm *comm, int64_t step,
                                 const float *x, const float *x2,
                                 int64_t rows, float grad_scale,
                                 double *loss);
  /* NULL, or the one piece of state outside params the twin must copy:
   * a VQ bottleneck's "k-means init done" flag. */
  bool *(*kmeans_flag)(void *net);
  /* The loss is already the global batch's on every rank (clip's
   * contrastive loss): no DDP loss scale. */
  bool loss_is_global;
  /* The net writes replicated state in its forward (the autoencoder's
   * EMA bottleneck): the before-update hook runs before the forward
   * rather than before the optimizer step. */
  bool update_in_forward;
} vqc_net_ops;

/* Builds m->impl for `net`: the trained net (with the fault) and its twin
 * from stream (1, VQC_RNG_INIT), Adam, the snapshot and global-batch
 * buffers; adds the net's entries, then Adam's state, to m->state. */
vqc_status vqc_trained_create(vqc_run_model *m, const vqc_net_ops *net);
/* Snapshot, forward, backward, DDP average (with sc's DDP fault), hook,
 * Adam step. */
vqc_status vqc_trained_step(vqc_run_model *m, int64_t step, double *loss);
vqc_status vqc_trained_reference_grads(vqc_run_model *m, int64_t step,
                                       vqc_param_list *grads);
void vqc_trained_destroy(vqc_run_model *m);

/* Whether f lives in DDP (ddp.c): every model trained by gradient. */
bool vqc_trained_has_fault(vqc_fault f);

/* The memory of an autoencoder net (fsq, autoencoder) with latent width
 * `lat` on a rank of B rows in a global batch of G, trained and twin
 * (model_autoencoder.c has the formula). */
uint64_t vqc_autoencoder_net_bytes(const vqc_scenario *sc, uint64_t B,
                                   uint64_t G, uint64_t lat);

/* Adam's step size for every model trained by gradient: large enough that a
 * few steps move the weights visibly, small enough to stay finite. */
#define VQC_TRAINED_ADAM_LR 1e-2

#endif /* VQC_MODEL_TRAINED_H */
