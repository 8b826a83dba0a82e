/* model_trained.c: DDP + Adam + the single-process twin, for the models
 * trained by gradient (see model_trained.h). */
#include "model_trained.h"

#include <stdlib.h>
#include <string.h>

#include "vqc/ddp.h"
#include "vqc/optim.h"

typedef struct trained {
  const vqc_net_ops *net;
  void *main;              /* trained, with the fault */
  void *twin;              /* single-process reference, no fault */
  vqc_optim *opt;
  void *snapshot;          /* bytes of every main entry, in order */
  size_t snapshot_bytes;
  bool snapshot_kmeans;    /* main's k-means flag at the copy */
  int64_t snap_step;       /* the step the snapshot is the start of; -1 */
  float *gx, *gx2;         /* (global_rows, D) the global batch */
} trained;

void vqc_trained_destroy(vqc_run_model *m) {
  trained *t = m->impl;
  if (!t) return;
  vqc_optim_destroy(t->opt);
  t->net->destroy(t->main);
  t->net->destroy(t->twin);
  free(t->snapshot);
  free(t->gx);
  free(t->gx2);
  free(t);
  m->impl = NULL;
}

vqc_status vqc_trained_create(vqc_run_model *m, const vqc_net_ops *net) {
  const vqc_scenario *sc = m->sc;
  trained *t = calloc(1, sizeof *t);
  if (!t) return vqc_error(VQC_ENOMEM, "runner: no memory for the model");
  m->impl = t;
  t->net = net;
  t->snap_step = -1;
  /* Weights from their own stream (step 1 of the INIT purpose), distinct
   * from a codebook's (step 0), the same on every rank. */
  vqc_rng init;
  vqc_rng_init(&init, sc->seed, vqc_rng_stream_for(1, VQC_RNG_INIT, -1));
  vqc_rng twin_init = init;
  /* The twin runs where the trained net does (fsq's device quantizer), so
   * the equivalence checker compares one function with itself. */
  VQC_TRY(net->create(sc, &init, true, m->device, &t->main));
  VQC_TRY(net->create(sc, &twin_init, false, m->device, &t->twin));
  const vqc_param_list *params = net->params(t->main);
  vqc_optim_config oc = vqc_optim_adam(VQC_TRAINED_ADAM_LR);
  VQC_TRY(vqc_optim_create(&oc, params, &t->opt));
  VQC_TRY(vqc_param_list_extend(&m->state, params, ""));
  VQC_TRY(vqc_param_list_extend(&m->state, vqc_optim_state(t->opt), ""));
  for (int i = 0; i < params->count; i++) {
    const vqc_param *p = &params->items[i];
    t->snapshot_bytes += (size_t)p->numel * vqc_dtype_size(p->dtype);
  }
  t->snapshot = malloc(t->snapshot_bytes + 1);
  const size_t g = (size_t)(m->global_rows > 0 ? m->global_rows : 1);
  t->gx = malloc(g * (size_t)sc->dim * sizeof(float));
  t->gx2 = malloc(g * (size_t)sc->dim * sizeof(float));
  if (!t->snapshot || !t->gx || !t->gx2)
    return vqc_error(VQC_ENOMEM, "runner: global batch of %lld rows",
                     (long long)m->global_rows);
  return VQC_OK;
}

/* Zeroes the grads, then the net's forward and backward. */
static vqc_status forward_backward(const trained *t, void *net,
                                   vqc_comm *comm, int64_t step,
                                   const float *x, const float *x2,
                                   int64_t rows, float grad_scale,
                                   double *loss) {
  vqc_param_list_zero_grad(t->net->params(net));
  return t->net->forward_backward(net, comm, step, x, x2, rows, grad_scale,
                                  loss);
}

/* Copies every entry of the trained net aside (the state `step` starts
 * from), for the reference. */
static void take_snapshot(trained *t, int64_t step) {
  char *dst = t->snapshot;
  const vqc_param_list *l = t->net->params(t->main);
  for (int i = 0; i < l->count; i++) {
    const size_t n =
        (size_t)l->items[i].numel * vqc_dtype_size(l->items[i].dtype);
    memcpy(dst, l->items[i].data, n);
    dst += n;
  }
  t->snapshot_kmeans =
      t->net->kmeans_flag ? *t->net->kmeans_flag(t->main) : false;
  t->snap_step = step;
}

/* DDP's fault switch for this step: the scenario's fault, where it lives in
 * ddp.c, and from which step on. */
static vqc_ddp_fault ddp_fault(const vqc_scenario *sc, int64_t step) {
  switch (sc->fault) {
    case VQC_FAULT_SKIP_WEIGHT_SYNC:
      /* PyTorch/XLA: the replicas agree at first, one drifts from step 1. */
      return step >= 1 ? VQC_DDP_FAULT_SKIP_GRAD_SYNC_LAST_RANK
                       : VQC_DDP_FAULT_NONE;
    case VQC_FAULT_DISCARDED_OUT_OF_PLACE_RESULT:
      return VQC_DDP_FAULT_DISCARD_MEAN;
    default:
      return VQC_DDP_FAULT_NONE;
  }
}

bool vqc_trained_has_fault(vqc_fault f) {
  return f == VQC_FAULT_SKIP_WEIGHT_SYNC ||
         f == VQC_FAULT_DISCARDED_OUT_OF_PLACE_RESULT;
}

vqc_status vqc_trained_step(vqc_run_model *m, int64_t step, double *loss) {
  trained *t = m->impl;
  /* The state is first written by the bottleneck's forward, or else by
   * Adam: the hook runs once, right before (run_models.h). */
  if (t->net->update_in_forward) VQC_TRY(vqc_model_before_update(m));
  take_snapshot(t, step);
  /* The loss is a mean over this rank's rows; this scale makes DDP's 1/W
   * average the global-batch mean with uneven shards (ddp.h). A global
   * loss (clip's) is already the global batch's on every rank. */
  const float scale =
      t->net->loss_is_global
          ? 1.0f
          : vqc_ddp_loss_scale(m->rows, m->global_rows, m->size);
  VQC_TRY(forward_backward(t, t->main, m->comm, step, m->x, m->x2, m->rows,
                           scale, loss));
  const vqc_ddp_options opt = {0, ddp_fault(m->sc, step)};
  VQC_TRY(vqc_ddp_average_grads(m->comm, t->net->params(t->main), &opt));
  if (!t->net->update_in_forward) VQC_TRY(vqc_model_before_update(m));
  return vqc_optim_step(t->opt);
}

vqc_status vqc_trained_reference_grads(vqc_run_model *m, int64_t step,
                                       vqc_param_list *grads) {
  trained *t = m->impl;
  if (!t || !t->twin || !grads)
    return vqc_error(VQC_EINVAL, "runner: no reference for this model");
  if (step != t->snap_step)
    return vqc_error(VQC_EINVAL, "runner: reference asked for step %lld but "
                     "the last step trained is %lld", (long long)step,
                     (long long)t->snap_step);
  /* The twin starts from the state the step started from. */
  const char *src = t->snapshot;
  const vqc_param_list *tl = t->net->params(t->twin);
  for (int i = 0; i < tl->count; i++) {
    const size_t n =
        (size_t)tl->items[i].numel * vqc_dtype_size(tl->items[i].dtype);
    memcpy(tl->items[i].data, src, n);
    src += n;
  }
  if (t->net->kmeans_flag) *t->net->kmeans_flag(t->twin) = t->snapshot_kmeans;
  VQC_TRY(vqc_model_global_batch(m, step, t->gx, t->gx2));
  double loss;
  VQC_TRY(forward_backward(t, t->twin, NULL, step, t->gx, t->gx2,
                           m->global_rows, 1.0f, &loss));
  for (int i = 0; i < grads->count; i++) {
    vqc_param *g = &grads->items[i];
    const vqc_param *p = vqc_param_list_find(tl, g->name);
    if (!p || !p->grad || p->numel != g->numel || g->dtype != VQC_F32)
      return vqc_error(VQC_EINVAL, "runner: the reference has no gradient "
                       "'%s' of %lld floats", g->name, (long long)g->numel);
    memcpy(g->data, p->grad, (size_t)p->numel * sizeof(float));
  }
  return VQC_OK;
}
