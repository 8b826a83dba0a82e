/* optim.h: SGD (with optional momentum) and Adam over a parameter registry,
 * following PyTorch's single-tensor (foreach=False) update formulas and
 * operation order, float32 element-wise with scalars prepared in double as
 * PyTorch's Python code does.
 *
 * Bit equality with torch is not claimed: PyTorch's vectorised CPU kernels
 * may fuse multiply-adds; ours are plain float operations in the order below.
 *
 * The optimizer's state tensors are registered like parameters (grad NULL),
 * so checkers digest them by name:
 *   SGD with momentum: "<param>.momentum_buffer"
 *   Adam:              "<param>.exp_avg", "<param>.exp_avg_sq"
 *   both:              "optim.step" (int64 scalar, steps taken) */
#ifndef VQC_OPTIM_H
#define VQC_OPTIM_H

#include <stdint.h>

#include "vqc/nn.h"
#include "vqc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { VQC_OPTIM_SGD = 0, VQC_OPTIM_ADAM = 1 } vqc_optim_kind;
const char *vqc_optim_kind_name(vqc_optim_kind k);                /* "sgd" */
vqc_status vqc_optim_kind_from_name(const char *name, vqc_optim_kind *out);

typedef struct vqc_optim_config {
  vqc_optim_kind kind;
  double lr;
  double momentum; /* SGD only; 0 = plain SGD */
  double beta1;    /* Adam; torch default 0.9 */
  double beta2;    /* Adam; torch default 0.999 */
  double eps;      /* Adam; torch default 1e-8 */
} vqc_optim_config;

/* Configs with PyTorch's defaults for the fields not given. */
vqc_optim_config vqc_optim_sgd(double lr, double momentum);
vqc_optim_config vqc_optim_adam(double lr);

typedef struct vqc_optim vqc_optim;

/* An optimizer over the trainable entries of `params` (grad != NULL; others
 * are skipped). It keeps the entries' pointers: the model must outlive it.
 * State starts at zero, step at 0. Free with vqc_optim_destroy. */
vqc_status vqc_optim_create(const vqc_optim_config *cfg,
                            const vqc_param_list *params, vqc_optim **out);
void vqc_optim_destroy(vqc_optim *o); /* accepts NULL */

/* One update of every parameter from its current grad (grads unchanged).
 *
 * SGD:  if momentum != 0:  buf = g on the first step, else
 *                          buf = buf * momentum + g;   d = buf
 *       else d = g
 *       p = p + (-lr) * d
 * Adam (t = step count after increment):
 *       m = lerp(m, g, 1 - beta1)      lerp(a, b, w) = w < 0.5 ? a + w (b - a)
 *                                                              : b - (b - a)(1 - w)
 *       v = v * beta2;  v = v + ((1 - beta2) * g) * g
 *       bc1 = 1 - beta1^t, bc2 = 1 - beta2^t, step_size = lr / bc1  (double)
 *       denom = sqrt(v) / sqrt(bc2) + eps
 *       p = p + ((-step_size) * m) / denom
 * Scalars are computed in double and rounded to float where they meet a
 * tensor, as PyTorch does with Python floats. */
vqc_status vqc_optim_step(vqc_optim *o);

/* Steps taken so far. */
int64_t vqc_optim_steps(const vqc_optim *o);
/* The state tensors (see the names above), owned by the optimizer. */
const vqc_param_list *vqc_optim_state(const vqc_optim *o);

#ifdef __cplusplus
}
#endif
#endif /* VQC_OPTIM_H */
