/* nn_params.c: the parameter registry (nn.h): a named list of every
 * replicated tensor of a model and its optimizer, so checkers can digest each
 * one by name and DDP can walk the gradients in a fixed order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vqc/digest.h"
#include "vqc/nn.h"

void vqc_param_list_init(vqc_param_list *l) {
  l->items = NULL;
  l->count = 0;
  l->capacity = 0;
}

void vqc_param_list_free(vqc_param_list *l) {
  if (l == NULL) return;
  free(l->items);
  vqc_param_list_init(l);
}

const vqc_param *vqc_param_list_find(const vqc_param_list *l, const char *name) {
  for (int i = 0; i < l->count; i++)
    if (strcmp(l->items[i].name, name) == 0) return &l->items[i];
  return NULL;
}

vqc_status vqc_param_list_add(vqc_param_list *l, const char *name,
                              vqc_dtype dtype, void *data, float *grad,
                              int ndim, const int64_t *shape) {
  if (l == NULL || name == NULL || data == NULL)
    return vqc_error(VQC_EINVAL, "param_list_add: NULL list, name or data");
  size_t len = strlen(name);
  if (len == 0 || len >= VQC_PARAM_NAME_MAX)
    return vqc_error(VQC_EINVAL,
                     "param_list_add: name '%s' must have 1..%d characters",
                     name, VQC_PARAM_NAME_MAX - 1);
  if (vqc_dtype_size(dtype) == 0)
    return vqc_error(VQC_EDTYPE, "param_list_add: bad dtype for '%s'", name);
  if (grad != NULL && dtype != VQC_F32)
    return vqc_error(VQC_EDTYPE,
                     "param_list_add: '%s' has a gradient, so it must be float32",
                     name);
  if (ndim < 0 || ndim > VQC_MAX_DIMS || (ndim > 0 && shape == NULL))
    return vqc_error(VQC_ESHAPE, "param_list_add: '%s' has ndim %d", name, ndim);
  if (vqc_param_list_find(l, name) != NULL)
    return vqc_error(VQC_EINVAL, "param_list_add: '%s' is already registered",
                     name);

  int64_t numel = 1;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < 0)
      return vqc_error(VQC_ESHAPE, "param_list_add: '%s' dim %d is negative",
                       name, d);
    numel *= shape[d];
  }

  if (l->count == l->capacity) {
    int cap = l->capacity == 0 ? 16 : 2 * l->capacity;
    vqc_param *grown = realloc(l->items, (size_t)cap * sizeof *grown);
    if (grown == NULL)
      return vqc_error(VQC_ENOMEM, "param_list_add: %d entries", cap);
    l->items = grown;
    l->capacity = cap;
  }
  vqc_param *p = &l->items[l->count];
  memset(p, 0, sizeof *p);
  memcpy(p->name, name, len + 1);
  p->dtype = dtype;
  p->data = data;
  p->grad = grad;
  p->ndim = ndim;
  for (int d = 0; d < ndim; d++) p->shape[d] = shape[d];
  p->numel = numel;
  l->count++;
  return VQC_OK;
}

vqc_status vqc_param_list_extend(vqc_param_list *l, const vqc_param_list *src,
                                 const char *prefix) {
  for (int i = 0; i < src->count; i++) {
    const vqc_param *p = &src->items[i];
    char name[VQC_PARAM_NAME_MAX + 64];
    int n = snprintf(name, sizeof name, "%s%s", prefix, p->name);
    if (n < 0 || n >= VQC_PARAM_NAME_MAX)
      return vqc_error(VQC_EINVAL, "param_list_extend: '%s%s' is too long",
                       prefix, p->name);
    VQC_TRY(vqc_param_list_add(l, name, p->dtype, p->data, p->grad, p->ndim,
                               p->shape));
  }
  return VQC_OK;
}

void vqc_param_list_zero_grad(const vqc_param_list *l) {
  for (int i = 0; i < l->count; i++)
    if (l->items[i].grad != NULL)
      memset(l->items[i].grad, 0, (size_t)l->items[i].numel * sizeof(float));
}

int64_t vqc_param_list_grad_numel(const vqc_param_list *l) {
  int64_t n = 0;
  for (int i = 0; i < l->count; i++)
    if (l->items[i].grad != NULL) n += l->items[i].numel;
  return n;
}

vqc_status vqc_param_digest(const vqc_param *p, uint64_t *out) {
  size_t nbytes = (size_t)p->numel * vqc_dtype_size(p->dtype);
  return vqc_digest_buffer(p->data, nbytes, p->dtype, p->ndim, p->shape, out);
}

vqc_status vqc_param_grad_digest(const vqc_param *p, uint64_t *out) {
  if (p->grad == NULL)
    return vqc_error(VQC_EINVAL, "'%s' has no gradient to digest", p->name);
  return vqc_digest_buffer(p->grad, (size_t)p->numel * sizeof(float), VQC_F32,
                           p->ndim, p->shape, out);
}
