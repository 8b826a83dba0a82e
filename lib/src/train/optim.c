/* optim.c: SGD and Adam of optim.h, PyTorch's single-tensor formulas in
 * PyTorch's operation order, with their state registered by name. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vqc/optim.h"

struct vqc_optim {
  vqc_optim_config cfg;
  vqc_param_list params; /* copies of the trainable entries (not owned data) */
  vqc_param_list state;  /* named views of buf1/buf2 and step */
  float **buf1;          /* per param: momentum_buffer (SGD) or exp_avg */
  float **buf2;          /* per param: exp_avg_sq (Adam); NULL otherwise */
  int64_t step;
};

const char *vqc_optim_kind_name(vqc_optim_kind k) {
  switch (k) {
  case VQC_OPTIM_SGD: return "sgd";
  case VQC_OPTIM_ADAM: return "adam";
  }
  return "?";
}

vqc_status vqc_optim_kind_from_name(const char *name, vqc_optim_kind *out) {
  if (name != NULL && strcmp(name, "sgd") == 0) {
    *out = VQC_OPTIM_SGD;
    return VQC_OK;
  }
  if (name != NULL && strcmp(name, "adam") == 0) {
    *out = VQC_OPTIM_ADAM;
    return VQC_OK;
  }
  return vqc_error(VQC_EINVAL, "unknown optimizer '%s' (expected sgd or adam)",
                   name ? name : "(null)");
}

vqc_optim_config vqc_optim_sgd(double lr, double momentum) {
  vqc_optim_config c = {VQC_OPTIM_SGD, lr, momentum, 0.9, 0.999, 1e-8};
  return c;
}

vqc_optim_config vqc_optim_adam(double lr) {
  vqc_optim_config c = {VQC_OPTIM_ADAM, lr, 0.0, 0.9, 0.999, 1e-8};
  return c;
}

void vqc_optim_destroy(vqc_optim *o) {
  if (o == NULL) return;
  for (int i = 0; i < o->params.count; i++) {
    if (o->buf1 != NULL) free(o->buf1[i]);
    if (o->buf2 != NULL) free(o->buf2[i]);
  }
  free(o->buf1);
  free(o->buf2);
  vqc_param_list_free(&o->params);
  vqc_param_list_free(&o->state);
  free(o);
}

/* Allocates a zeroed state buffer like p and registers it as
 * "<p.name><suffix>". */
static vqc_status add_state(vqc_optim *o, const vqc_param *p,
                            const char *suffix, float **buf) {
  char name[VQC_PARAM_NAME_MAX];
  int n = snprintf(name, sizeof name, "%s%s", p->name, suffix);
  if (n < 0 || n >= (int)sizeof name)
    return vqc_error(VQC_EINVAL, "optim: state name '%s%s' is too long",
                     p->name, suffix);
  *buf = calloc((size_t)(p->numel > 0 ? p->numel : 1), sizeof(float));
  if (*buf == NULL)
    return vqc_error(VQC_ENOMEM, "optim: state for '%s'", p->name);
  return vqc_param_list_add(&o->state, name, VQC_F32, *buf, NULL, p->ndim,
                            p->shape);
}

vqc_status vqc_optim_create(const vqc_optim_config *cfg,
                            const vqc_param_list *params, vqc_optim **out) {
  *out = NULL;
  if (cfg == NULL || params == NULL)
    return vqc_error(VQC_EINVAL, "optim_create: NULL config or params");
  if (cfg->kind != VQC_OPTIM_SGD && cfg->kind != VQC_OPTIM_ADAM)
    return vqc_error(VQC_EINVAL, "optim_create: unknown kind %d", (int)cfg->kind);
  if (!(cfg->lr >= 0.0) || !(cfg->momentum >= 0.0) ||
      (cfg->kind == VQC_OPTIM_ADAM &&
       !(cfg->beta1 >= 0.0 && cfg->beta1 < 1.0 && cfg->beta2 >= 0.0 &&
         cfg->beta2 < 1.0 && cfg->eps >= 0.0)))
    return vqc_error(VQC_EINVAL,
                     "optim_create: lr %g, momentum %g, betas (%g, %g), eps %g "
                     "out of range", cfg->lr, cfg->momentum, cfg->beta1,
                     cfg->beta2, cfg->eps);

  vqc_optim *o = calloc(1, sizeof *o);
  if (o == NULL) return vqc_error(VQC_ENOMEM, "optim_create");
  o->cfg = *cfg;
  vqc_param_list_init(&o->params);
  vqc_param_list_init(&o->state);
  vqc_status s = VQC_OK;
  for (int i = 0; i < params->count && s == VQC_OK; i++) {
    const vqc_param *p = &params->items[i];
    if (p->grad != NULL)
      s = vqc_param_list_add(&o->params, p->name, p->dtype, p->data, p->grad,
                             p->ndim, p->shape);
  }
  if (s != VQC_OK) goto fail;

  int np = o->params.count;
  o->buf1 = calloc((size_t)(np > 0 ? np : 1), sizeof *o->buf1);
  o->buf2 = calloc((size_t)(np > 0 ? np : 1), sizeof *o->buf2);
  if (o->buf1 == NULL || o->buf2 == NULL) {
    s = vqc_error(VQC_ENOMEM, "optim_create: %d state slots", np);
    goto fail;
  }
  for (int i = 0; i < np && s == VQC_OK; i++) {
    const vqc_param *p = &o->params.items[i];
    if (cfg->kind == VQC_OPTIM_SGD) {
      if (cfg->momentum != 0.0) s = add_state(o, p, ".momentum_buffer", &o->buf1[i]);
    } else {
      s = add_state(o, p, ".exp_avg", &o->buf1[i]);
      if (s == VQC_OK) s = add_state(o, p, ".exp_avg_sq", &o->buf2[i]);
    }
  }
  if (s == VQC_OK)
    s = vqc_param_list_add(&o->state, "optim.step", VQC_I64, &o->step, NULL, 0,
                           NULL);
  if (s != VQC_OK) goto fail;
  *out = o;
  return VQC_OK;
fail:
  vqc_optim_destroy(o);
  return s;
}

static void sgd_update(const vqc_optim *o, float *p, const float *g, float *buf,
                       int64_t n) {
  const float neg_lr = (float)(-o->cfg.lr);
  if (buf == NULL) {
    for (int64_t i = 0; i < n; i++) p[i] = p[i] + neg_lr * g[i];
    return;
  }
  /* torch: buf = clone(grad) on the first step, then
   * buf.mul_(momentum).add_(grad) (dampening 0). */
  const float mom = (float)o->cfg.momentum;
  for (int64_t i = 0; i < n; i++) {
    buf[i] = o->step == 1 ? g[i] : buf[i] * mom + g[i];
    p[i] = p[i] + neg_lr * buf[i];
  }
}

static void adam_update(const vqc_optim *o, float *p, const float *g, float *m,
                        float *v, int64_t n) {
  const double beta1 = o->cfg.beta1, beta2 = o->cfg.beta2;
  const double t = (double)o->step;
  /* The Python-side scalars of torch's _single_tensor_adam, in double. */
  const double bias_correction1 = 1.0 - pow(beta1, t);
  const double bias_correction2 = 1.0 - pow(beta2, t);
  const double step_size = o->cfg.lr / bias_correction1;
  const double bias_correction2_sqrt = sqrt(bias_correction2);
  /* Where they meet a float32 tensor they are rounded to float. */
  const float w1 = (float)(1.0 - beta1);
  const float b2 = (float)beta2;
  const float one_minus_b2 = (float)(1.0 - beta2);
  const float bc2s = (float)bias_correction2_sqrt;
  const float eps = (float)o->cfg.eps;
  const float neg_step = (float)(-step_size);
  for (int64_t i = 0; i < n; i++) {
    /* exp_avg.lerp_(grad, 1 - beta1), torch's two-branch lerp */
    float diff = g[i] - m[i];
    m[i] = w1 < 0.5f ? m[i] + w1 * diff : g[i] - diff * (1.0f - w1);
    /* exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2) */
    v[i] = v[i] * b2;
    v[i] = v[i] + one_minus_b2 * g[i] * g[i];
    /* denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps) */
    float denom = sqrtf(v[i]) / bc2s + eps;
    /* param.addcdiv_(exp_avg, denom, value=-step_size) */
    p[i] = p[i] + neg_step * m[i] / denom;
  }
}

vqc_status vqc_optim_step(vqc_optim *o) {
  if (o == NULL) return vqc_error(VQC_EINVAL, "optim_step: NULL optimizer");
  o->step++;
  for (int i = 0; i < o->params.count; i++) {
    const vqc_param *prm = &o->params.items[i];
    float *p = prm->data;
    if (o->cfg.kind == VQC_OPTIM_SGD)
      sgd_update(o, p, prm->grad, o->buf1[i], prm->numel);
    else
      adam_update(o, p, prm->grad, o->buf1[i], o->buf2[i], prm->numel);
  }
  return VQC_OK;
}

int64_t vqc_optim_steps(const vqc_optim *o) { return o->step; }

const vqc_param_list *vqc_optim_state(const vqc_optim *o) { return &o->state; }
