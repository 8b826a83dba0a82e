/* model_codebook.c: the EMA codebook as the vq, rvq and autoencoder models
 * use it (model.h "the EMA codebook"): its parameters from a scenario, the
 * faults that live in its code, and its entries in the state list. */
#include "model.h"

#include <stdio.h>

void vqc_codebook_params(const vqc_scenario *sc, int64_t dim, vqc_fault fault,
                         vqc_vq_params *p) {
  vqc_vq_params_default(p, dim, sc->codebook_size);
  p->threshold_ema_dead_code = sc->threshold_dead_code;
  p->kmeans_init = sc->kmeans_init;
  p->seed = sc->seed;
  p->fault = fault;
}

bool vqc_codebook_has_fault(const vqc_scenario *sc, vqc_fault f) {
  switch (f) {
    case VQC_FAULT_LOST_INPLACE_CONTIGUOUS: /* vq_ema.c */
    case VQC_FAULT_MISMATCHED_COLLECTIVE:
      return true;
    case VQC_FAULT_SAMPLER_FLOAT_SPLIT:
      /* vq_sampler.c: rows are sampled across ranks only by dead-code
       * expiry and k-means init. */
      return sc->threshold_dead_code > 0.0 || sc->kmeans_init;
    default:
      return false;
  }
}

vqc_status vqc_codebook_register(vqc_param_list *l, vqc_vq *vq,
                                 const char *prefix) {
  const vqc_tensor *t[3] = {&vq->embed, &vq->cluster_size, &vq->embed_avg};
  const char *names[3] = {"embed", "cluster_size", "embed_avg"};
  for (int i = 0; i < 3; i++) {
    char name[VQC_PARAM_NAME_MAX];
    snprintf(name, sizeof name, "%s%s", prefix, names[i]);
    VQC_TRY(vqc_param_list_add(l, name, t[i]->dtype,
                               vqc_tensor_data_untracked(t[i]), NULL,
                               t[i]->ndim, t[i]->shape));
  }
  return VQC_OK;
}
