/* equivalence.c: the gradient equivalence checker.
 *
 * Data-parallel training must compute the gradient of the GLOBAL batch: after
 * DDP averaging, every rank's gradient should equal, up to rounding, the
 * gradient one process computes on the concatenation of all ranks' batches.
 * Bugs that drop a rank's contribution (OpenCLIP's gather without gradient,
 * a skipped gradient all_reduce) keep the ranks in agreement with each other
 * in some cases, so the divergence checker alone can miss them; comparing
 * with a single-process recomputation cannot.
 *
 * At the end of every opts.interval-th step (steps 0, N, 2N, ...), when the
 * runner provides ctx->reference_grads, each rank asks it for the reference
 * gradient of that step's global batch and compares it with the `grad` of
 * every trainable entry of ctx->state (grad != NULL), entry by entry:
 *
 *   rel_error = max_i |a_i - b_i| / max(max_i |b_i|, FLT_MIN)
 *
 * a = the rank's gradient, b = the reference. The denominator is the
 * tensor's largest reference value, so elements whose true gradient cancels
 * to about zero do not blow the error up; FLT_MIN only avoids 0/0 for an
 * entry whose gradient is exactly zero everywhere (then any nonzero value on
 * a rank is a mismatch of size "infinite", which it is).
 *
 * Default tolerance (opts.tolerance <= 0): 1e-4 relative. The distributed and
 * single-process gradients sum the same float32 terms in a different order
 * (per-rank partial sums, then the all_reduce); each order is within about
 * k * 2^-24 * sum|terms| of the exact sum for k summed terms, so for the
 * tiny models here (at most a few thousand terms per element, and terms that
 * do not cancel badly) the difference stays around 1e-6..1e-5 of the largest
 * gradient. A dropped or unaveraged contribution changes the gradient by
 * O(1) relative (a missing rank's share is 1/size of it), so 1e-4 is generous
 * for rounding and still four orders of magnitude below the smallest bug.
 *
 * The per-entry errors are all_gathered over the side channel; for each
 * entry whose error passes the tolerance on any rank, the lowest such rank
 * records one `gradient_mismatch` with ranks = every rank above tolerance.
 * An entry is reported once per run (its first step). */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkers.h"

#define EQUIV_DEFAULT_TOLERANCE 1e-4

/* What each rank sends per trainable entry (float64 words). first_index is a
 * double: exact up to 2^53 elements. */
enum { E_REL, E_MAX_ABS, E_FIRST, E_COUNT };

typedef struct eq_impl {
  int size;
  int nstate;           /* ctx->state->count at attach */
  int ntrain;           /* trainable entries of ctx->state */
  int *state_index;     /* (ntrain) their indices in ctx->state */
  vqc_param_list ref;   /* (ntrain) entries the callback fills: F32 data
                           buffers with the entries' names and shapes */
  float **buffers;      /* (ntrain) owned data of `ref` */
  bool *reported;       /* (ntrain) */
  double *local;        /* (ntrain, E_COUNT) */
  double *all;          /* (size, ntrain, E_COUNT) */
} eq_impl;

static void eq_free(eq_impl *e) {
  if (e == NULL) return;
  for (int i = 0; e->buffers && i < e->ntrain; i++) free(e->buffers[i]);
  free(e->buffers);
  free(e->state_index);
  vqc_param_list_free(&e->ref);
  free(e->reported);
  free(e->local);
  free(e->all);
  free(e);
}

static double tolerance_of(const vqc_check_ctx *ctx) {
  return ctx->opts.tolerance > 0 ? ctx->opts.tolerance
                                 : EQUIV_DEFAULT_TOLERANCE;
}

/* The error of gradient a (n floats) against reference b; first_index is the
 * first element whose difference passes tol times the denominator, -1 if
 * none. A NaN anywhere makes the error NaN, which never passes "<= tol". */
static void compare_grad(const float *a, const float *b, int64_t n, double tol,
                         double *rel, double *max_abs, int64_t *first_index) {
  double scale = 0, worst = 0;
  bool nan = false;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]);
    if (isnan(d)) nan = true;
    if (d > worst) worst = d;
    if (fabs((double)b[i]) > scale) scale = fabs((double)b[i]);
  }
  double denom = scale > FLT_MIN ? scale : FLT_MIN;
  *max_abs = nan ? NAN : worst;
  *rel = nan ? NAN : worst / denom;
  *first_index = -1;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]);
    if (!(d <= tol * denom)) {
      *first_index = i;
      break;
    }
  }
}

static json_t *json_num(double v) {
  if (isfinite(v)) return json_real(v);
  if (isnan(v)) return json_string("nan");
  return json_string(v > 0 ? "inf" : "-inf");
}

static bool above(double rel, double tol) { return !(rel <= tol); }

static vqc_status check_step(eq_impl *e, vqc_check_ctx *ctx, int64_t step) {
  const vqc_param_list *state = ctx->state;
  double tol = tolerance_of(ctx);
  if (state->count != e->nstate)
    return vqc_error(VQC_EINVAL,
                     "equivalence: the registry had %d entries at attach and "
                     "has %d at step %" PRId64 " (register everything first)",
                     e->nstate, state->count, step);
  for (int i = 0; i < e->ntrain; i++)
    memset(e->buffers[i], 0, (size_t)e->ref.items[i].numel * sizeof(float));
  vqc_status s = ctx->reference_grads(ctx->reference_user, step, &e->ref);
  if (s != VQC_OK) return s;

  for (int i = 0; i < e->ntrain; i++) {
    const vqc_param *p = &state->items[e->state_index[i]];
    int64_t first = -1;
    double *w = e->local + (size_t)i * E_COUNT;
    compare_grad(p->grad, e->buffers[i], p->numel, tol, &w[E_REL],
                 &w[E_MAX_ABS], &first);
    w[E_FIRST] = (double)first;
  }
  VQC_TRY(vqc_all_gather(vqc_comm_side(ctx->comm), e->local, e->all,
                         (size_t)e->ntrain * E_COUNT, VQC_F64));

  for (int i = 0; i < e->ntrain; i++) {
    if (e->reported[i]) continue;
    int ranks[VQC_FINDING_MAX_RANKS], n = 0, lowest = -1;
    for (int r = 0; r < e->size; r++) {
      const double *w = e->all + ((size_t)r * e->ntrain + i) * E_COUNT;
      if (!above(w[E_REL], tol)) continue;
      if (lowest < 0) lowest = r;
      if (n < VQC_FINDING_MAX_RANKS) ranks[n++] = r;
    }
    if (lowest < 0) continue;
    e->reported[i] = true; /* on every rank: they all saw the same table */
    if (ctx->rank != lowest) continue;

    const vqc_param *p = &state->items[e->state_index[i]];
    const double *w = e->local + (size_t)i * E_COUNT;
    vqc_finding f;
    vqc_finding_init(&f, VQC_FINDING_GRADIENT_MISMATCH, step,
                     "gradient of '%s' on rank %d differs from the "
                     "single-process gradient of the global batch at step %"
                     PRId64 ": relative error %.3g > tolerance %.3g (max abs "
                     "diff %.3g, first at flat index %.0f)%s",
                     p->name, lowest, step, w[E_REL], tol, w[E_MAX_ABS],
                     w[E_FIRST], n > 1 ? "; other ranks too" : "");
    snprintf(f.tensor, sizeof f.tensor, "%s", p->name);
    for (int k = 0; k < n; k++) vqc_finding_add_rank(&f, ranks[k]);
    json_t *per = json_array();
    for (int k = 0; k < n; k++) {
      const double *x = e->all + ((size_t)ranks[k] * e->ntrain + i) * E_COUNT;
      json_array_append_new(
          per, json_pack("{s:i,s:o,s:o,s:I}", "rank", ranks[k], "rel_error",
                         json_num(x[E_REL]), "max_abs_diff",
                         json_num(x[E_MAX_ABS]), "first_index",
                         (json_int_t)x[E_FIRST]));
    }
    json_object_set_new(f.detail, "rel_error", json_num(w[E_REL]));
    json_object_set_new(f.detail, "tolerance", json_real(tol));
    json_object_set_new(f.detail, "max_abs_diff", json_num(w[E_MAX_ABS]));
    json_object_set_new(f.detail, "first_index",
                        json_integer((json_int_t)w[E_FIRST]));
    json_object_set_new(f.detail, "numel", json_integer(p->numel));
    json_object_set_new(f.detail, "ranks", per);
    VQC_TRY(vqc_findings_add(ctx->findings, &f));
  }
  return VQC_OK;
}

/* ---- the checker interface */

static vqc_status eq_attach(vqc_checker *self, vqc_check_ctx *ctx) {
  if (ctx == NULL || ctx->state == NULL || ctx->comm == NULL ||
      ctx->findings == NULL)
    return vqc_error(VQC_EINVAL, "equivalence: ctx needs comm, state, findings");
  if (ctx->reference_grads == NULL) return VQC_OK; /* disabled: impl NULL */

  vqc_status s = VQC_OK;
  const vqc_param_list *state = ctx->state;
  eq_impl *e = calloc(1, sizeof *e);
  if (e == NULL) goto nomem;
  vqc_param_list_init(&e->ref);
  e->size = ctx->size;
  e->nstate = state->count;
  for (int i = 0; i < state->count; i++) e->ntrain += state->items[i].grad != NULL;
  size_t nt = (size_t)e->ntrain;
  /* +1: calloc(0) may return NULL, which is not a failure here */
  e->state_index = calloc(nt + 1, sizeof *e->state_index);
  e->buffers = calloc(nt + 1, sizeof *e->buffers);
  e->reported = calloc(nt + 1, sizeof *e->reported);
  e->local = calloc(nt * E_COUNT + 1, sizeof *e->local);
  e->all = calloc((size_t)e->size * nt * E_COUNT + 1, sizeof *e->all);
  if (!e->state_index || !e->buffers || !e->reported || !e->local || !e->all)
    goto nomem;
  int k = 0;
  for (int i = 0; i < state->count; i++) {
    const vqc_param *p = &state->items[i];
    if (p->grad == NULL) continue;
    e->state_index[k] = i;
    e->buffers[k] = calloc((size_t)p->numel + 1, sizeof(float));
    if (e->buffers[k] == NULL) goto nomem;
    s = vqc_param_list_add(&e->ref, p->name, VQC_F32, e->buffers[k], NULL,
                           p->ndim, p->shape);
    if (s != VQC_OK) goto fail;
    k++;
  }
  self->impl = e;
  return VQC_OK;

nomem:
  s = vqc_error(VQC_ENOMEM, "equivalence: no memory for the reference "
                "gradients");
fail:
  eq_free(e);
  return s;
}

static vqc_status eq_step_end(vqc_checker *self, vqc_check_ctx *ctx,
                              int64_t step) {
  eq_impl *e = self->impl;
  /* no reference_grads, or nothing trainable: nothing to compare */
  if (e == NULL || e->ntrain == 0) return VQC_OK;
  int interval = ctx->opts.interval >= 1 ? ctx->opts.interval : 1;
  if (step % interval != 0) return VQC_OK;
  return check_step(e, ctx, step);
}

static vqc_status eq_finish(vqc_checker *self, vqc_check_ctx *ctx,
                            vqc_status run_status) {
  (void)self;
  (void)ctx;
  (void)run_status;
  return VQC_OK;
}

static void eq_destroy(vqc_checker *self, vqc_check_ctx *ctx) {
  (void)ctx;
  if (self == NULL) return;
  eq_free(self->impl);
  self->impl = NULL;
}

vqc_status vqc_checker_equivalence(vqc_checker *out) {
  if (out == NULL) return vqc_error(VQC_EINVAL, "equivalence: out is NULL");
  memset(out, 0, sizeof *out);
  out->name = "equivalence";
  out->attach = eq_attach;
  out->step_end = eq_step_end;
  out->finish = eq_finish;
  out->destroy = eq_destroy;
  return VQC_OK;
}
