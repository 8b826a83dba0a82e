/* nn.h: the building blocks of the tiny models the scenarios train: a
 * float32 linear layer with a hand-written backward, ReLU / tanh, an MSE loss,
 * and the parameter registry through which checkers see every replicated
 * tensor of a model (weights, gradients, optimizer state) by name.
 *
 * All arrays are float32, row-major and contiguous; shapes are written beside
 * each argument, e.g. x (B, Din). Nothing here allocates per call: the caller
 * owns every buffer it passes. Arithmetic is plain float32 in a fixed loop
 * order, so the same inputs give bit-identical outputs on every rank and run.
 *
 * Backward convention (like PyTorch's .grad): backward functions ADD into
 * their gradient outputs (dx, dW, db); zero them first (vqc_param_list_zero_grad
 * for parameters) when you want a fresh gradient. */
#ifndef VQC_NN_H
#define VQC_NN_H

#include <stdbool.h>
#include <stdint.h>

#include "vqc/rng.h"
#include "vqc/status.h"
#include "vqc/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- parameter registry ---- */

#define VQC_PARAM_NAME_MAX 64

/* One named replicated tensor. `data` points into memory owned by the model
 * or optimizer that registered it (the registry never frees it). `grad` is
 * the matching float32 gradient for trainable parameters, NULL for state that
 * is not trained by gradient (optimizer moments, step counters, codebooks
 * updated by EMA). */
typedef struct vqc_param {
  char name[VQC_PARAM_NAME_MAX]; /* "encoder.0.weight", "encoder.0.weight.exp_avg" */
  vqc_dtype dtype;               /* F32 for weights; I64 for step counters */
  void *data;                    /* numel elements of dtype */
  float *grad;                   /* numel floats, or NULL (then not trainable) */
  int ndim;
  int64_t shape[VQC_MAX_DIMS];
  int64_t numel;
} vqc_param;

/* A growable array of entries, in registration order (the order is part of
 * the contract: DDP buckets and digest traces follow it). */
typedef struct vqc_param_list {
  vqc_param *items;
  int count;
  int capacity;
} vqc_param_list;

/* An empty list (no allocation until the first add). */
void vqc_param_list_init(vqc_param_list *l);
/* Frees the array (not the tensors it points to); accepts NULL. */
void vqc_param_list_free(vqc_param_list *l);
/* Appends an entry; the name is copied (VQC_EINVAL if empty or longer than
 * VQC_PARAM_NAME_MAX - 1, or if an entry of that name exists). grad may be
 * NULL; a non-NULL grad requires dtype F32. */
vqc_status vqc_param_list_add(vqc_param_list *l, const char *name,
                              vqc_dtype dtype, void *data, float *grad,
                              int ndim, const int64_t *shape);
/* Appends every entry of src, each name prefixed with `prefix` (may be ""). */
vqc_status vqc_param_list_extend(vqc_param_list *l, const vqc_param_list *src,
                                 const char *prefix);
/* The entry named `name`, or NULL. */
const vqc_param *vqc_param_list_find(const vqc_param_list *l, const char *name);
/* Sets every non-NULL grad to zero. */
void vqc_param_list_zero_grad(const vqc_param_list *l);
/* Total elements of the trainable entries (grad != NULL). */
int64_t vqc_param_list_grad_numel(const vqc_param_list *l);
/* The tensor digest (digest.h) of an entry's data, with its dtype and shape. */
vqc_status vqc_param_digest(const vqc_param *p, uint64_t *out);
/* Same for its gradient (VQC_EINVAL when grad is NULL). */
vqc_status vqc_param_grad_digest(const vqc_param *p, uint64_t *out);

/* ---- linear layer: y = x W^T + b ---- */

typedef struct vqc_linear {
  int64_t din, dout;
  float *w;  /* (dout, din), owned */
  float *b;  /* (dout), owned */
  float *dw; /* (dout, din), owned, accumulated by backward */
  float *db; /* (dout), owned, accumulated by backward */
} vqc_linear;

/* Allocates the layer and initialises it like torch.nn.Linear's default:
 * W and b uniform in [-1/sqrt(din), 1/sqrt(din)), drawn from `init` (W row by
 * row, then b), gradients zero. Pass the same cursor state on every rank
 * (e.g. vqc_rng_init(&r, seed, vqc_rng_stream_for(0, VQC_RNG_INIT, -1))) to
 * get replicated weights; the cursor advances by din*dout + dout draws.
 * Free with vqc_linear_free. */
vqc_status vqc_linear_init(vqc_linear *l, int64_t din, int64_t dout,
                           vqc_rng *init);
/* Frees the arrays and zeroes *l; accepts NULL and zeroed layers. */
void vqc_linear_free(vqc_linear *l);
/* Registers "<prefix>weight" (dout, din) and "<prefix>bias" (dout) with their
 * gradients, prefix e.g. "encoder.0.". */
vqc_status vqc_linear_register(vqc_linear *l, const char *prefix,
                               vqc_param_list *list);

/* y (B, dout) = x (B, din) W^T + b. y must not alias x. */
void vqc_linear_forward(const vqc_linear *l, const float *x, int64_t batch,
                        float *y);
/* Given dy (B, dout) and the forward input x (B, din):
 *   dW += dy^T x, db += sum over rows of dy, and, when dx is not NULL,
 *   dx (B, din) += dy W. */
void vqc_linear_backward(vqc_linear *l, const float *x, const float *dy,
                         int64_t batch, float *dx);

/* ---- activations (element-wise over n values) ---- */

typedef enum { VQC_ACT_NONE = 0, VQC_ACT_RELU = 1, VQC_ACT_TANH = 2 } vqc_act;
const char *vqc_act_name(vqc_act a);

/* y = act(x); y may alias x. */
void vqc_act_forward(vqc_act a, const float *x, int64_t n, float *y);
/* dx += dy * act'(x), written with the forward OUTPUT y (ReLU: y > 0, which
 * gives gradient 0 at x = 0 as PyTorch does; tanh: 1 - y^2). */
void vqc_act_backward(vqc_act a, const float *y, const float *dy, int64_t n,
                      float *dx);

/* ---- loss ---- */

/* loss = mean((pred - target)^2) over n values, summed in double in index
 * order. When dpred is not NULL, adds the gradient of scale * loss:
 * dpred += c * (pred - target) with c = 2 scale / n rounded to float once. */
double vqc_mse_loss(const float *pred, const float *target, int64_t n,
                    float scale, float *dpred);

#ifdef __cplusplus
}
#endif
#endif /* VQC_NN_H */
