/* model_registry.c: the models' ops tables by vqc_model_kind (model.h).
 * The rows are scenario.h's VQC_MODEL_LIST: model_<name>.c defines
 * vqc_model_<name> for each. */
#include "model.h"

static const vqc_model_ops *const models[VQC_MODEL_COUNT] = {
#define VQC_MODEL_ROW(e, name, sizes, defaults) \
  [VQC_MODEL_##e] = &vqc_model_##name,
    VQC_MODEL_LIST(VQC_MODEL_ROW)
#undef VQC_MODEL_ROW
};

const vqc_model_ops *vqc_model_ops_of(vqc_model_kind kind) {
  return (unsigned)kind < VQC_MODEL_COUNT ? models[kind] : NULL;
}
