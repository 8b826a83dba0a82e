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
 * For each entry whose error passes the tolerance on any rank, the lowest
 * such rank records one `gradient_mismatch` with ranks = every rank above
 * tolerance. An entry is reported once per run (its first step).
 *
 * The exchange, over the side channel, does not grow with the rank count
 * on a step where nothing is wrong: one all_reduce (MAX) of one int64 per
 * trainable entry, each rank sending size - rank where its error passes
 * the tolerance (0 otherwise), gives every rank the lowest rank above
 * tolerance per entry. (An all_gather of every rank's errors cost each
 * rank 24 bytes x entries x ranks per step: 240 MiB in all per step at
 * 1024 ranks and 10 entries.) Only on the step an entry is first found
 * does a second all_reduce (SUM) carry, per such entry, a bitmask of the
 * ranks above tolerance (size / 64 words; disjoint bits, so the sum is
 * their union) and the errors of the first DETAIL_RANKS of them (each
 * slot written by one rank, zeros elsewhere: sums of one value and zeros
 * are exact). */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkers.h"

#define EQUIV_DEFAULT_TOLERANCE 1e-4
/* The ranks above tolerance whose errors a finding's detail lists (its
 * "ranks" names them all). */
#define DETAIL_RANKS 16

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
  int64_t *key;         /* (ntrain) size - rank when above tolerance, else 0 */
  int64_t *lowest;      /* (ntrain) the MAX of key over the ranks */
} eq_impl;

static void eq_free(eq_impl *e) {
  if (e == NULL) return;
  for (int i = 0; e->buffers && i < e->ntrain; i++) free(e->buffers[i]);
  free(e->buffers);
  free(e->state_index);
  vqc_param_list_free(&e->ref);
  free(e->reported);
  free(e->local);
  free(e->key);
  free(e->lowest);
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

/* The step an entry is first found above tolerance (nflag entries, the
 * same on every rank): who is above, then the errors of the first
 * DETAIL_RANKS of them, in two all_reduces (SUM) of F64 words laid out per
 * flagged entry as [mask (words), detail (DETAIL_RANKS x E_COUNT)]. A
 * mask word holds 32 ranks' bits as a double: distinct powers of two below
 * 2^32, so every sum is exact. */
static vqc_status report_step(eq_impl *e, vqc_check_ctx *ctx, int64_t step,
                              double tol, int nflag) {
  const int size = e->size, rank = ctx->rank;
  const int words = (size + 31) / 32;
  const size_t per = (size_t)words + DETAIL_RANKS * E_COUNT;
  double *mine = calloc((size_t)nflag * per, sizeof *mine);
  double *sum = calloc((size_t)nflag * per, sizeof *sum);
  int *flagged = calloc((size_t)nflag, sizeof *flagged);
  int *ranks = calloc((size_t)size, sizeof *ranks);
  vqc_status s = VQC_OK;
  if (!mine || !sum || !flagged || !ranks) {
    s = vqc_error(VQC_ENOMEM, "equivalence: no memory to report %d entries",
                  nflag);
    goto done;
  }
  int k = 0;
  for (int i = 0; i < e->ntrain; i++)
    if (!e->reported[i] && e->lowest[i] > 0) flagged[k++] = i;
  /* First pass: the masks, so that every rank learns who is above. */
  for (int f = 0; f < nflag; f++) {
    const double *w = e->local + (size_t)flagged[f] * E_COUNT;
    if (above(w[E_REL], tol))
      mine[(size_t)f * per + (size_t)(rank / 32)] =
          (double)((uint32_t)1 << (rank % 32));
  }
  s = vqc_all_reduce(vqc_comm_side(ctx->comm), mine, sum,
                     (size_t)nflag * per, VQC_F64, VQC_SUM);
  if (s != VQC_OK) goto done;
  /* Second pass: each rank above writes its errors at its place among the
   * ranks above (the first DETAIL_RANKS places only). */
  memset(mine, 0, (size_t)nflag * per * sizeof *mine);
  for (int f = 0; f < nflag; f++) {
    const double *w = e->local + (size_t)flagged[f] * E_COUNT;
    if (!above(w[E_REL], tol)) continue;
    const double *m = sum + (size_t)f * per;
    int place = 0;
    for (int r = 0; r < rank && place < DETAIL_RANKS; r++)
      if ((uint32_t)m[r / 32] & ((uint32_t)1 << (r % 32))) place++;
    if (place >= DETAIL_RANKS) continue;
    memcpy(mine + (size_t)f * per + words + (size_t)place * E_COUNT, w,
           E_COUNT * sizeof *w);
  }
  double *masks = sum;
  sum = NULL;
  double *detail = calloc((size_t)nflag * per, sizeof *detail);
  if (!detail) {
    free(masks);
    s = vqc_error(VQC_ENOMEM, "equivalence: no memory to report %d entries",
                  nflag);
    goto done;
  }
  s = vqc_all_reduce(vqc_comm_side(ctx->comm), mine, detail,
                     (size_t)nflag * per, VQC_F64, VQC_SUM);
  if (s != VQC_OK) {
    free(masks);
    free(detail);
    goto done;
  }

  /* On every rank, whatever happens below: they all saw the same sums,
   * and the next step's exchange sizes depend on it. */
  for (int f = 0; f < nflag; f++) e->reported[flagged[f]] = true;
  for (int f = 0; f < nflag && s == VQC_OK; f++) {
    const int i = flagged[f];
    const int lowest = size - (int)e->lowest[i];
    if (rank != lowest) continue;
    const double *m = masks + (size_t)f * per;
    const double *d = detail + (size_t)f * per + words;
    int n = 0;
    for (int r = 0; r < size; r++)
      if ((uint32_t)m[r / 32] & ((uint32_t)1 << (r % 32))) ranks[n++] = r;
    const vqc_param *p = &ctx->state->items[e->state_index[i]];
    const double *w = e->local + (size_t)i * E_COUNT;
    char others[256] = "";
    if (n > 1) {
      char list[200];
      vqc_rank_ranges_text(ranks, n, list, sizeof list);
      snprintf(others, sizeof others, "; %d ranks in all: %s", n, list);
    }
    vqc_finding x;
    vqc_finding_init(&x, VQC_FINDING_GRADIENT_MISMATCH, step,
                     "gradient of '%s' on rank %d differs from the "
                     "single-process gradient of the global batch at step %"
                     PRId64 ": relative error %.3g > tolerance %.3g (max abs "
                     "diff %.3g, first at flat index %.0f)%s",
                     p->name, lowest, step, w[E_REL], tol, w[E_MAX_ABS],
                     w[E_FIRST], others);
    snprintf(x.tensor, sizeof x.tensor, "%s", p->name);
    for (int q = 0; q < n; q++) vqc_finding_add_rank(&x, ranks[q]);
    json_t *per_rank = json_array();
    for (int q = 0; q < n && q < DETAIL_RANKS; q++) {
      const double *y = d + (size_t)q * E_COUNT;
      json_array_append_new(
          per_rank, json_pack("{s:i,s:o,s:o,s:I}", "rank", ranks[q],
                              "rel_error", json_num(y[E_REL]), "max_abs_diff",
                              json_num(y[E_MAX_ABS]), "first_index",
                              (json_int_t)y[E_FIRST]));
    }
    json_object_set_new(x.detail, "rel_error", json_num(w[E_REL]));
    json_object_set_new(x.detail, "tolerance", json_real(tol));
    json_object_set_new(x.detail, "max_abs_diff", json_num(w[E_MAX_ABS]));
    json_object_set_new(x.detail, "first_index",
                        json_integer((json_int_t)w[E_FIRST]));
    json_object_set_new(x.detail, "numel", json_integer(p->numel));
    /* The first DETAIL_RANKS ranks above tolerance, and how many in all. */
    json_object_set_new(x.detail, "ranks", per_rank);
    json_object_set_new(x.detail, "ranks_above", json_integer(n));
    s = vqc_check_report(ctx, -1, &x);
    if (s != VQC_OK) json_decref(x.detail);
  }
  free(masks);
  free(detail);
done:
  free(mine);
  free(sum);
  free(flagged);
  free(ranks);
  return s;
}

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
  /* Which entries some rank finds above tolerance, and the lowest such
   * rank: the same answer on every rank. */
  vqc_comm *side = vqc_comm_side(ctx->comm);
  for (int i = 0; i < e->ntrain; i++)
    e->key[i] = above(e->local[(size_t)i * E_COUNT + E_REL], tol)
                    ? (int64_t)(e->size - ctx->rank)
                    : 0;
  VQC_TRY(vqc_all_reduce(side, e->key, e->lowest, (size_t)e->ntrain, VQC_I64,
                         VQC_MAX));
  int nflag = 0;
  for (int i = 0; i < e->ntrain; i++)
    if (!e->reported[i] && e->lowest[i] > 0) nflag++;
  if (nflag == 0) return VQC_OK;
  return report_step(e, ctx, step, tol, nflag);
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
  e->key = calloc(nt + 1, sizeof *e->key);
  e->lowest = calloc(nt + 1, sizeof *e->lowest);
  if (!e->state_index || !e->buffers || !e->reported || !e->local ||
      !e->key || !e->lowest)
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
