/* nn_linear.c: the float32 linear layer, activations and MSE loss of nn.h,
 * forward and hand-written backward. Loops run in one fixed order (rows, then
 * outputs, then inputs) so every rank computes bit-identical results. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vqc/nn.h"

vqc_status vqc_linear_init(vqc_linear *l, int64_t din, int64_t dout,
                           vqc_rng *init) {
  memset(l, 0, sizeof *l);
  if (din <= 0 || dout <= 0 || init == NULL)
    return vqc_error(VQC_EINVAL, "linear_init: din %lld, dout %lld, rng %p",
                     (long long)din, (long long)dout, (void *)init);
  size_t nw = (size_t)(din * dout), nb = (size_t)dout;
  l->din = din;
  l->dout = dout;
  l->w = malloc(nw * sizeof(float));
  l->b = malloc(nb * sizeof(float));
  l->dw = calloc(nw, sizeof(float));
  l->db = calloc(nb, sizeof(float));
  if (l->w == NULL || l->b == NULL || l->dw == NULL || l->db == NULL) {
    vqc_linear_free(l);
    return vqc_error(VQC_ENOMEM, "linear_init: (%lld, %lld)", (long long)dout,
                     (long long)din);
  }
  /* torch.nn.Linear's default (kaiming_uniform with a = sqrt(5)) reduces to
   * U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the weight and the bias alike. */
  float bound = (float)(1.0 / sqrt((double)din));
  vqc_rng_uniform(init, l->w, (int64_t)nw, -bound, bound);
  vqc_rng_uniform(init, l->b, (int64_t)nb, -bound, bound);
  return VQC_OK;
}

void vqc_linear_free(vqc_linear *l) {
  if (l == NULL) return;
  free(l->w);
  free(l->b);
  free(l->dw);
  free(l->db);
  memset(l, 0, sizeof *l);
}

vqc_status vqc_linear_register(vqc_linear *l, const char *prefix,
                               vqc_param_list *list) {
  char name[VQC_PARAM_NAME_MAX];
  int64_t wshape[2] = {l->dout, l->din};
  int n = snprintf(name, sizeof name, "%sweight", prefix);
  if (n < 0 || n >= (int)sizeof name)
    return vqc_error(VQC_EINVAL, "linear_register: prefix '%s' too long", prefix);
  VQC_TRY(vqc_param_list_add(list, name, VQC_F32, l->w, l->dw, 2, wshape));
  snprintf(name, sizeof name, "%sbias", prefix);
  return vqc_param_list_add(list, name, VQC_F32, l->b, l->db, 1, &l->dout);
}

void vqc_linear_forward(const vqc_linear *l, const float *x, int64_t batch,
                        float *y) {
  const int64_t din = l->din, dout = l->dout;
  for (int64_t r = 0; r < batch; r++) {
    const float *xr = x + r * din;
    for (int64_t o = 0; o < dout; o++) {
      const float *wo = l->w + o * din;
      float acc = 0.0f;
      for (int64_t i = 0; i < din; i++) acc += xr[i] * wo[i];
      y[r * dout + o] = acc + l->b[o];
    }
  }
}

void vqc_linear_backward(vqc_linear *l, const float *x, const float *dy,
                         int64_t batch, float *dx) {
  const int64_t din = l->din, dout = l->dout;
  /* dW and db gather one row of the batch at a time, in row order, so the
   * sum over the batch has a fixed order. */
  for (int64_t r = 0; r < batch; r++) {
    const float *xr = x + r * din;
    for (int64_t o = 0; o < dout; o++) {
      float g = dy[r * dout + o];
      float *dwo = l->dw + o * din;
      for (int64_t i = 0; i < din; i++) dwo[i] += g * xr[i];
      l->db[o] += g;
    }
  }
  if (dx == NULL) return;
  for (int64_t r = 0; r < batch; r++) {
    const float *dyr = dy + r * dout;
    for (int64_t i = 0; i < din; i++) {
      float acc = 0.0f;
      for (int64_t o = 0; o < dout; o++) acc += dyr[o] * l->w[o * din + i];
      dx[r * din + i] += acc;
    }
  }
}

const char *vqc_act_name(vqc_act a) {
  switch (a) {
  case VQC_ACT_NONE: return "none";
  case VQC_ACT_RELU: return "relu";
  case VQC_ACT_TANH: return "tanh";
  }
  return "?";
}

void vqc_act_forward(vqc_act a, const float *x, int64_t n, float *y) {
  for (int64_t i = 0; i < n; i++) {
    switch (a) {
    case VQC_ACT_RELU: y[i] = x[i] > 0.0f ? x[i] : 0.0f; break;
    case VQC_ACT_TANH: y[i] = tanhf(x[i]); break;
    default: y[i] = x[i]; break;
    }
  }
}

void vqc_act_backward(vqc_act a, const float *y, const float *dy, int64_t n,
                      float *dx) {
  for (int64_t i = 0; i < n; i++) {
    switch (a) {
    case VQC_ACT_RELU: dx[i] += y[i] > 0.0f ? dy[i] : 0.0f; break;
    case VQC_ACT_TANH: dx[i] += dy[i] * (1.0f - y[i] * y[i]); break;
    default: dx[i] += dy[i]; break;
    }
  }
}

double vqc_mse_loss(const float *pred, const float *target, int64_t n,
                    float scale, float *dpred) {
  if (n <= 0) return 0.0;
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) {
    double d = (double)pred[i] - (double)target[i];
    sum += d * d;
  }
  if (dpred != NULL) {
    float coef = (float)(2.0 * (double)scale / (double)n);
    for (int64_t i = 0; i < n; i++) dpred[i] += coef * (pred[i] - target[i]);
  }
  return sum / (double)n;
}
