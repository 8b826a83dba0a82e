/* shape.c: dead-code replacement counts, locally and across ranks (bug
 * catalogue #2, `shape_mismatch`).
 *
 * vector-quantize-pytorch #142 crashed in `embed[mask] = sampled` with
 * "value tensor of shape [9330, 512] cannot be broadcast to indexing result
 * of shape [9331, 512]", by two mechanisms: (a) the distributed sampler's
 * split lost a draw, so k-1 rows came back for k expired codes; (b) ranks
 * disagreed on the expired set because their replicated state had diverged.
 *
 * The VQ library raises a probe (vqc/probe.h) where it decides how many
 * codes to fill: "dead_code" (keys expired, sampled, local_rows, layer) once
 * with sampled = -1 right after counting the expired codes, and once with
 * the split's total right before rows are sampled and written;
 * "kmeans_init" the same way with key codes. On each probe every rank
 * exchanges its counts over the side channel. If any rank's sampled rows
 * differ from its count, or the ranks disagree on the count (or are not even
 * at the same step and layer), the lowest rank records `shape_mismatch` with
 * every rank's counts and the root cause vqcheck can see, and every rank
 * answers VQC_ESHAPE, so the library writes nothing on any rank instead of
 * corrupting the codebook or crashing.
 *
 * Root cause: the earliest `divergence` finding recorded so far (the
 * divergence checker runs at step end, so it names the tensor and the step
 * it first differed at); failing that, the ranks digest their replicated
 * state now and compare over the side channel; if that agrees too, the
 * state is not to blame and the sampler lost rows. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkers.h"
#include "utf8.h"
#include "vqc/probe.h"

typedef struct shape_impl {
  vqc_check_ctx *ctx;
  vqc_comm *comm; /* where the handler is subscribed; NULL if none */
} shape_impl;

/* What each rank contributes to the exchange, in this order. */
enum { F_WANTED, F_SAMPLED, F_LOCAL_ROWS, F_LAYER, F_STEP, F_COUNT };

/* Appends printf output to buf (of n bytes) at *pos, truncating safely. */
static void append(char *buf, size_t n, size_t *pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t n, size_t *pos, const char *fmt, ...) {
  if (*pos >= n) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(buf + *pos, n - *pos, fmt, ap);
  va_end(ap);
  if (w > 0) *pos += (size_t)w;
  if (*pos >= n) *pos = n - 1;
}

/* ---- root cause */

typedef struct root_cause {
  char text[256];   /* one clause for the message and detail.root_cause */
  char tensor[128]; /* "" when no tensor is to blame */
  int64_t step;     /* since when; -1 when unknown */
} root_cause;

/* The earliest divergence finding in the list, if any. */
static bool earliest_divergence(vqc_findings *f, root_cause *rc) {
  bool found = false;
  pthread_mutex_lock(&f->lock);
  for (int i = 0; i < f->count; i++) {
    const vqc_finding *g = &f->items[i];
    if (g->kind != VQC_FINDING_DIVERGENCE) continue;
    if (!found || g->step < rc->step) {
      found = true;
      rc->step = g->step;
      snprintf(rc->tensor, sizeof rc->tensor, "%s", g->tensor);
    }
  }
  pthread_mutex_unlock(&f->lock);
  if (found)
    snprintf(rc->text, sizeof rc->text,
             "%s differs across ranks since step %" PRId64
             " (divergence finding)",
             rc->tensor[0] ? rc->tensor : "replicated state", rc->step);
  return found;
}

/* Every rank digests every replicated tensor and the digests are compared
 * over the side channel; the first tensor whose digests differ is named.
 * Collective: every rank calls it (the decision to call it is made from the
 * exchanged counts, which every rank holds). */
static vqc_status digest_cause(const vqc_check_ctx *ctx, vqc_comm *side,
                               int64_t step, bool lost_rows, root_cause *rc) {
  const int size = ctx->size;
  const vqc_param_list *st = ctx->state;
  int64_t n = st ? st->count : 0;
  int64_t *counts = calloc((size_t)size, sizeof *counts);
  uint64_t *mine = calloc((size_t)n + 1, sizeof *mine);
  uint64_t *all = NULL;
  vqc_status s = VQC_OK;
  if (!counts || !mine) {
    s = vqc_error(VQC_ENOMEM, "shape: digests of %" PRId64 " tensors", n);
    goto done;
  }
  if ((s = vqc_all_gather(side, &n, counts, 1, VQC_I64))) goto done;
  for (int r = 1; r < size; r++) {
    if (counts[r] != counts[0]) {
      snprintf(rc->text, sizeof rc->text,
               "the ranks register different replicated state (rank 0: %"
               PRId64 " tensors, rank %d: %" PRId64 ")",
               counts[0], r, counts[r]);
      goto done;
    }
  }
  if (n == 0) {
    snprintf(rc->text, sizeof rc->text,
             "no replicated state is registered to compare");
    goto done;
  }
  for (int64_t i = 0; i < n; i++)
    if ((s = vqc_param_digest(&st->items[i], &mine[i]))) goto done;
  all = calloc((size_t)(n * size) + 1, sizeof *all);
  if (!all) {
    s = vqc_error(VQC_ENOMEM, "shape: digests of %" PRId64 " tensors x %d "
                  "ranks", n, size);
    goto done;
  }
  /* Digests travel as int64: the bits are what is compared. */
  if ((s = vqc_all_gather(side, mine, all, (size_t)n, VQC_I64))) goto done;
  for (int64_t i = 0; i < n; i++) {
    for (int r = 1; r < size; r++) {
      if (all[(size_t)r * (size_t)n + (size_t)i] != all[i]) {
        snprintf(rc->tensor, sizeof rc->tensor, "%s", st->items[i].name);
        rc->step = step;
        snprintf(rc->text, sizeof rc->text,
                 "%s differs across ranks (rank 0 vs rank %d, seen when the "
                 "counts disagreed at step %" PRId64 ")",
                 st->items[i].name, r, step);
        goto done;
      }
    }
  }
  snprintf(rc->text, sizeof rc->text, "%s",
           lost_rows ? "replicated state agrees: the sampler lost rows"
                     : "replicated state agrees: the ranks counted "
                       "differently from the same state");
done:
  free(counts);
  free(mine);
  free(all);
  return s;
}

/* ---- the probe handler */

/* Most common value of field f over the ranks (ties: the lowest rank's). */
static int64_t majority(const int64_t *all, int size, int f) {
  int best = 0, best_n = 0;
  for (int r = 0; r < size; r++) {
    int m = 0;
    for (int q = 0; q < size; q++)
      m += all[q * F_COUNT + f] == all[r * F_COUNT + f];
    if (m > best_n) {
      best_n = m;
      best = r;
    }
  }
  return all[best * F_COUNT + f];
}

static vqc_status record_mismatch(const shape_impl *sh, const vqc_probe *p,
                                  const char *what, const char *wanted_key,
                                  const int64_t *all, const char *message,
                                  const root_cause *rc) {
  const vqc_check_ctx *ctx = sh->ctx;
  const int size = ctx->size;
  vqc_finding f;
  vqc_finding_init(&f, VQC_FINDING_SHAPE_MISMATCH, p->step, "%s", message);
  vqc_finding_set_site(&f, p->site);
  snprintf(f.tensor, sizeof f.tensor, "%s", rc->tensor);
  const int64_t want = majority(all, size, F_WANTED);
  json_t *ranks = json_array();
  for (int r = 0; r < size; r++) {
    const int64_t *a = all + r * F_COUNT;
    if (a[F_WANTED] != want || (a[F_SAMPLED] >= 0 && a[F_SAMPLED] != a[F_WANTED]))
      vqc_finding_add_rank(&f, r);
    json_t *o = json_object();
    json_object_set_new(o, "rank", json_integer(r));
    json_object_set_new(o, wanted_key, json_integer(a[F_WANTED]));
    json_object_set_new(o, "sampled", a[F_SAMPLED] >= 0
                                          ? json_integer(a[F_SAMPLED])
                                          : json_null());
    json_object_set_new(o, "local_rows", json_integer(a[F_LOCAL_ROWS]));
    json_object_set_new(o, "layer", json_integer(a[F_LAYER]));
    json_object_set_new(o, "step", json_integer(a[F_STEP]));
    json_array_append_new(ranks, o);
  }
  json_t *d = f.detail;
  json_object_set_new(d, "what", json_string(what));
  json_object_set_new(d, "probe", vqc_json_text(p->name, strlen(p->name)));
  json_object_set_new(d, "layer", json_integer(p->layer));
  json_object_set_new(d, "ranks", ranks);
  json_object_set_new(d, "root_cause", vqc_json_text(rc->text, strlen(rc->text)));
  json_object_set_new(d, "root_cause_tensor",
                      rc->tensor[0] ? vqc_json_text(rc->tensor, strlen(rc->tensor)) : json_null());
  json_object_set_new(d, "root_cause_step",
                      rc->step >= 0 ? json_integer(rc->step) : json_null());
  return vqc_check_report(ctx, -1, &f);
}

static vqc_status on_probe(vqc_comm *c, const vqc_probe *p, void *user) {
  shape_impl *sh = user;
  const char *what, *wanted_key;
  if (p->name && strcmp(p->name, "dead_code") == 0) {
    what = "dead-code replacement";
    wanted_key = "expired";
  } else if (p->name && strcmp(p->name, "kmeans_init") == 0) {
    what = "k-means init";
    wanted_key = "codes";
  } else {
    return VQC_OK;
  }
  const vqc_check_ctx *ctx = sh->ctx;
  const int size = ctx->size;
  vqc_comm *side = vqc_comm_side(c);
  int64_t mine[F_COUNT] = {0, -1, -1, p->layer, p->step};
  if (!vqc_probe_get(p, wanted_key, &mine[F_WANTED]))
    return vqc_error(VQC_EINVAL, "shape: probe '%s' has no key '%s'", p->name,
                     wanted_key);
  vqc_probe_get(p, "sampled", &mine[F_SAMPLED]);
  vqc_probe_get(p, "local_rows", &mine[F_LOCAL_ROWS]);

  int64_t *all = calloc((size_t)size * F_COUNT, sizeof *all);
  if (!all) return vqc_error(VQC_ENOMEM, "shape: counts of %d ranks", size);
  vqc_status s = vqc_all_gather(side, mine, all, F_COUNT, VQC_I64);
  if (s != VQC_OK) goto done;

  /* Which rule broke, judged from the exchanged counts only, so every rank
   * reaches the same verdict (and the same collectives below). */
  int where = -1, lost = -1, counts = -1;
  for (int r = 1; r < size; r++) {
    const int64_t *a = all + r * F_COUNT;
    if (where < 0 && (a[F_LAYER] != all[F_LAYER] || a[F_STEP] != all[F_STEP]))
      where = r;
    if (counts < 0 && a[F_WANTED] != all[F_WANTED]) counts = r;
  }
  for (int r = 0; r < size; r++) {
    const int64_t *a = all + r * F_COUNT;
    if (lost < 0 && a[F_SAMPLED] >= 0 && a[F_SAMPLED] != a[F_WANTED]) lost = r;
  }
  if (where < 0 && counts < 0 && lost < 0) goto done; /* consistent */

  root_cause rc = {.step = -1};
  s = digest_cause(ctx, side, p->step, counts < 0 && where < 0, &rc);
  if (s != VQC_OK) goto done;
  earliest_divergence(ctx->findings, &rc); /* preferred when there is one */

  char msg[512];
  size_t pos = 0;
  append(msg, sizeof msg, &pos, "%s at step %" PRId64 " layer %d: ", what,
         p->step, p->layer);
  if (where >= 0) {
    append(msg, sizeof msg, &pos, "the ranks reached it at different places "
           "(rank 0: step %" PRId64 " layer %" PRId64 ", rank %d: step %"
           PRId64 " layer %" PRId64 ")", all[F_STEP], all[F_LAYER], where,
           all[where * F_COUNT + F_STEP], all[where * F_COUNT + F_LAYER]);
  } else if (counts >= 0) {
    append(msg, sizeof msg, &pos, "the ranks disagree on how many codes to "
           "fill (");
    for (int r = 0; r < size && r < 8; r++)
      append(msg, sizeof msg, &pos, "%srank %d: %" PRId64, r ? ", " : "", r,
             all[r * F_COUNT + F_WANTED]);
    append(msg, sizeof msg, &pos, "%s)", size > 8 ? ", ..." : "");
    if (lost >= 0)
      append(msg, sizeof msg, &pos, " and %" PRId64 " rows were sampled",
             all[lost * F_COUNT + F_SAMPLED]);
  } else {
    append(msg, sizeof msg, &pos, "rank %d %s %" PRId64 " codes but %" PRId64
           " rows were sampled", lost,
           strcmp(wanted_key, "expired") == 0 ? "expired" : "needs",
           all[lost * F_COUNT + F_WANTED], all[lost * F_COUNT + F_SAMPLED]);
  }
  append(msg, sizeof msg, &pos, "; root cause: %s; nothing was written",
         rc.text);

  if (ctx->rank == 0)
    s = record_mismatch(sh, p, what, wanted_key, all, msg, &rc);
  if (s == VQC_OK) s = vqc_error(VQC_ESHAPE, "%s", msg);

done:
  free(all);
  return s;
}

/* ---- the checker interface */

static void shape_free(shape_impl *sh) {
  if (!sh) return;
  if (sh->comm) vqc_probe_unsubscribe(sh->comm, on_probe, sh);
  free(sh);
}

static vqc_status shape_attach(vqc_checker *self, vqc_check_ctx *ctx) {
  if (!ctx || !ctx->comm || !ctx->findings)
    return vqc_error(VQC_EINVAL, "shape: ctx needs comm and findings");
  shape_impl *sh = calloc(1, sizeof *sh);
  if (!sh) return vqc_error(VQC_ENOMEM, "shape: no memory");
  sh->ctx = ctx;
  vqc_status s = vqc_probe_subscribe(ctx->comm, on_probe, sh);
  if (s != VQC_OK) {
    shape_free(sh);
    return s;
  }
  sh->comm = ctx->comm;
  self->impl = sh;
  return VQC_OK;
}

/* The work happens in the probe handler, mid-step, where the counts are. */
static vqc_status shape_step_end(vqc_checker *self, vqc_check_ctx *ctx,
                                 int64_t step) {
  (void)ctx;
  (void)step;
  return self->impl ? VQC_OK
                    : vqc_error(VQC_EINVAL, "shape: not attached");
}

static vqc_status shape_finish(vqc_checker *self, vqc_check_ctx *ctx,
                               vqc_status run_status) {
  (void)self;
  (void)ctx;
  (void)run_status;
  return VQC_OK;
}

static void shape_destroy(vqc_checker *self, vqc_check_ctx *ctx) {
  (void)ctx;
  if (!self) return;
  shape_free(self->impl);
  self->impl = NULL;
}

vqc_status vqc_checker_shape(vqc_checker *out) {
  if (!out) return vqc_error(VQC_EINVAL, "shape: out is NULL");
  memset(out, 0, sizeof *out);
  out->name = "shape";
  out->attach = shape_attach;
  out->step_end = shape_step_end;
  out->finish = shape_finish;
  out->destroy = shape_destroy;
  return VQC_OK;
}
