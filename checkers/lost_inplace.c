/* lost_inplace.c: collective results that never reach the code that wanted
 * them (bug catalogue #1, `lost_inplace`).
 *
 * Two shapes of the same bug:
 *   (a) vector-quantize-pytorch #101: all_reduce(embed_sum.contiguous()).
 *       embed_sum was strided, so .contiguous() made a temporary copy; the
 *       collective summed the copy, the copy was dropped, and embed_sum kept
 *       its rank-local value. In vqcheck the copy is a vqc_tensor whose
 *       `origin` names the strided view it came from.
 *   (b) Megatron-LM #5337 / LFQ maybe_distributed_mean: an out-of-place
 *       collective whose output is never read.
 *
 * How it is seen (C cannot watch raw loads, so the tensor API counts them,
 * see "access tracking" in vqc/tensor.h):
 *   1. AFTER a successful tensor collective (ev->tensor set) whose buffer is
 *      a copy of a strided tensor, or whose output is separate from its
 *      input, the checker keeps a view of the result (so the storage outlives
 *      the user's free) and of the origin, and notes the storage's access
 *      count. In-place reductions of a tensor that is not a copy are the
 *      normal case and are not kept.
 *   2. At the next step end (and at finish), a kept result whose access
 *      count has not moved was never used through the API. For a copy that
 *      is the bug unless its values reached the origin some other way (the
 *      origin's bytes equal the copy's); for an out-of-place output it is
 *      the bug. Then the views are released.
 * Each call site is reported once per run. The decision is local to the
 * rank; on the threads backend the rank threads share one findings list, so
 * a rank that finds a site already reported adds itself to that finding's
 * ranks instead of adding a second finding. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkers.h"
#include "ledger_analysis.h" /* vqc_live_finding */
#include "vqc/ledger.h"
#include "vqc/tensor.h"

/* One collective result awaiting the step-end verdict. */
typedef struct kept_result {
  vqc_tensor result;   /* view of the collective's output (holds a ref) */
  vqc_tensor origin;   /* view of the strided source; empty when none */
  uint64_t accesses;   /* result storage's access count right after it */
  bool used;           /* set by the verdict: the count has moved */
  bool out_of_place;   /* output buffer != input buffer */
  uint64_t seq;
  vqc_coll_op op;
  vqc_redop redop;
  vqc_dtype dtype;
  size_t count;
  vqc_site site;       /* string literals of the calling program */
  /* The registered name of the tensor the result was meant for (the origin,
   * or the output), looked up while the collective's caller still holds it;
   * "" when it is not registered state. */
  char name[VQC_PARAM_NAME_MAX];
} kept_result;

typedef struct lost_impl {
  vqc_check_ctx *ctx;
  vqc_comm *comm;      /* where the handler is subscribed; NULL if none */
  kept_result *kept;   /* results of collectives since the last verdict */
  int nkept, capkept;
  vqc_site *reported;  /* call sites already reported by this rank */
  int nreported, capreported;
  int64_t last_step;   /* the last step_end seen; -1 before the first */
} lost_impl;

/* Serialises "is this site already in the shared findings list? then add
 * my rank, else add the finding" across the rank threads of one process. */
static pthread_mutex_t record_lock = PTHREAD_MUTEX_INITIALIZER;

static bool same_site(vqc_site a, vqc_site b) {
  return a.line == b.line && a.file && b.file && strcmp(a.file, b.file) == 0;
}

static bool site_reported(const lost_impl *li, vqc_site site) {
  for (int i = 0; i < li->nreported; i++)
    if (same_site(li->reported[i], site)) return true;
  return false;
}

static vqc_status remember_site(lost_impl *li, vqc_site site) {
  if (li->nreported == li->capreported) {
    int cap = li->capreported ? 2 * li->capreported : 8;
    vqc_site *p = realloc(li->reported, (size_t)cap * sizeof *p);
    if (!p) return vqc_error(VQC_ENOMEM, "lost_inplace: %d call sites", cap);
    li->reported = p;
    li->capreported = cap;
  }
  li->reported[li->nreported++] = site;
  return VQC_OK;
}

static void release_kept(lost_impl *li) {
  for (int i = 0; i < li->nkept; i++) {
    vqc_tensor_free(&li->kept[i].result);
    vqc_tensor_free(&li->kept[i].origin);
  }
  li->nkept = 0;
}

/* ---- 1. after each collective: keep what may be lost */

/* The registered name of the state whose data starts at t's first element,
 * or NULL. */
static const char *state_name(const vqc_check_ctx *ctx, const vqc_tensor *t) {
  if (!ctx->state || !t->storage) return NULL;
  const void *addr = vqc_tensor_data_untracked(t);
  for (int i = 0; i < ctx->state->count; i++)
    if (ctx->state->items[i].data == addr) return ctx->state->items[i].name;
  return NULL;
}

static vqc_status on_collective(const vqc_coll_event *ev, void *user) {
  lost_impl *li = user;
  const vqc_ledger_record *rec = ev->record;
  if (ev->phase != VQC_EVENT_AFTER || !ev->tensor || !rec ||
      rec->state != VQC_REC_DONE)
    return VQC_OK;
  const bool has_origin = vqc_tensor_has_origin(ev->tensor);
  const bool out_of_place = rec->sendbuf != rec->recvbuf;
  /* An in-place reduction of the tensor itself is the normal, correct use. */
  if (!has_origin && !out_of_place) return VQC_OK;
  if (site_reported(li, rec->site)) return VQC_OK;

  if (li->nkept == li->capkept) {
    int cap = li->capkept ? 2 * li->capkept : 8;
    kept_result *p = realloc(li->kept, (size_t)cap * sizeof *p);
    if (!p) return vqc_error(VQC_ENOMEM, "lost_inplace: %d kept results", cap);
    li->kept = p;
    li->capkept = cap;
  }
  kept_result *k = &li->kept[li->nkept];
  memset(k, 0, sizeof *k);
  VQC_TRY(vqc_tensor_view(ev->tensor, &k->result));
  if (has_origin) {
    vqc_status s = vqc_tensor_origin_view(ev->tensor, ev->tensor->dtype,
                                          &k->origin);
    if (s != VQC_OK) {
      vqc_tensor_free(&k->result);
      return s;
    }
  }
  k->accesses = vqc_tensor_access_count(&k->result);
  k->out_of_place = out_of_place;
  k->seq = rec->seq;
  k->op = rec->op;
  k->redop = rec->redop;
  k->dtype = rec->dtype;
  k->count = rec->count;
  k->site = rec->site;
  const char *name = state_name(li->ctx, has_origin ? &k->origin : &k->result);
  snprintf(k->name, sizeof k->name, "%s", name ? name : "");
  li->nkept++;
  return VQC_OK;
}

/* ---- 2. the verdict */

/* Whether a (the copy) and b (its origin) hold the same bytes, element by
 * element. Both are brought to contiguous host copies, so any strides and
 * either device work; the cost is paid only for results nobody read. */
static vqc_status same_values(const vqc_tensor *a, const vqc_tensor *b,
                              bool *same) {
  vqc_tensor ha = {0}, hb = {0};
  vqc_status s = vqc_tensor_to(a, VQC_DEVICE_CPU, &ha);
  if (s == VQC_OK) s = vqc_tensor_to(b, VQC_DEVICE_CPU, &hb);
  if (s == VQC_OK) {
    const size_t n = vqc_tensor_nbytes(&ha);
    *same = n == vqc_tensor_nbytes(&hb) &&
            memcmp(vqc_tensor_data_untracked(&ha),
                   vqc_tensor_data_untracked(&hb), n) == 0;
  }
  vqc_tensor_free(&ha);
  vqc_tensor_free(&hb);
  return s;
}

static json_t *dims_json(int ndim, const int64_t *v) {
  json_t *a = json_array();
  for (int d = 0; d < ndim; d++) json_array_append_new(a, json_integer(v[d]));
  return a;
}

/* Adds the finding, or this rank to the finding another rank thread already
 * added for the same site (threads backend: one shared list). */
static vqc_status record(lost_impl *li, vqc_finding *f) {
  vqc_findings *all = li->ctx->findings;
  /* On this rank's record as this rank saw it, merged or not: the reader
   * merges the same way (findings_record.h). */
  vqc_live_finding(li->ctx->live, f);
  pthread_mutex_lock(&record_lock);
  bool merged = false;
  pthread_mutex_lock(&all->lock);
  for (int i = 0; i < all->count && !merged; i++) {
    vqc_finding *g = &all->items[i];
    if (g->kind == VQC_FINDING_LOST_INPLACE && strcmp(g->site, f->site) == 0) {
      vqc_finding_add_rank(g, li->ctx->rank);
      merged = true;
    }
  }
  pthread_mutex_unlock(&all->lock);
  vqc_status s = VQC_OK;
  if (merged)
    json_decref(f->detail);
  else
    s = vqc_findings_add(all, f);
  pthread_mutex_unlock(&record_lock);
  return s;
}

static vqc_status report(lost_impl *li, const kept_result *k, int64_t step) {
  const vqc_check_ctx *ctx = li->ctx;
  const bool copy = k->origin.storage != NULL;
  const char *func = k->site.func ? k->site.func : "?";
  const char *file = k->site.file ? k->site.file : "?";
  const char *slash = strrchr(file, '/');
  const char *base = slash ? slash + 1 : file;
  const char *name = k->name[0] ? k->name : NULL;
  const char *reason =
      copy ? "reduced a contiguous temporary of a strided tensor; the result "
             "never reached it"
           : "out-of-place collective result never read";

  vqc_finding f;
  if (copy) {
    char shape[96];
    vqc_tensor_shape_str(&k->origin, shape, sizeof shape);
    vqc_finding_init(
        &f, VQC_FINDING_LOST_INPLACE, step,
        "%s at %s:%d (%s) reduced a contiguous temporary copy of the strided "
        "%s tensor %s; the copy was never read or written back, so the "
        "tensor kept its rank-local value: reduce the tensor itself or write "
        "the copy back (vqc_tensor_copy_to_origin)",
        vqc_coll_name(k->op), base, k->site.line, func, shape,
        name ? name : "it came from");
  } else {
    vqc_finding_init(
        &f, VQC_FINDING_LOST_INPLACE, step,
        "%s at %s:%d (%s) wrote its result into a separate output that was "
        "never read, so the caller went on with its rank-local input: use "
        "the output (or reduce in place)",
        vqc_coll_name(k->op), base, k->site.line, func);
  }
  vqc_finding_set_site(&f, k->site);
  vqc_finding_add_rank(&f, ctx->rank);
  snprintf(f.tensor, sizeof f.tensor, "%s", name ? name : func);

  json_t *d = f.detail;
  json_object_set_new(d, "seq", json_integer((json_int_t)k->seq));
  json_object_set_new(d, "op", json_string(vqc_coll_name(k->op)));
  if (k->op == VQC_COLL_ALL_REDUCE)
    json_object_set_new(d, "redop", json_string(vqc_redop_name(k->redop)));
  json_object_set_new(d, "dtype", json_string(vqc_dtype_name(k->dtype)));
  json_object_set_new(d, "count", json_integer((json_int_t)k->count));
  json_object_set_new(d, "out_of_place", json_boolean(k->out_of_place));
  /* The same words as the Python bridge's findings (vqcheck._bridge):
   * "temporary" (an in-place result written into a copy nobody reads),
   * "discarded" (an out-of-place result never read), "not waited". */
  json_object_set_new(d, "result",
                      json_string(copy ? "temporary" : "discarded"));
  if (copy) {
    json_object_set_new(d, "origin_shape",
                        dims_json(k->origin.ndim, k->origin.shape));
    json_object_set_new(d, "origin_strides",
                        dims_json(k->origin.ndim, k->origin.strides));
  }
  json_object_set_new(d, "reason", json_string(reason));
  return record(li, &f);
}

/* Judges and releases every kept result; `step` is the step they belong to. */
static vqc_status verdict(lost_impl *li, int64_t step) {
  /* Snapshot every count before reading anything: the comparison below
   * reads storages (which counts), and two kept results may share one. */
  for (int i = 0; i < li->nkept; i++) {
    kept_result *k = &li->kept[i];
    k->used = vqc_tensor_access_count(&k->result) != k->accesses;
  }
  vqc_status first = VQC_OK;
  for (int i = 0; i < li->nkept; i++) {
    const kept_result *k = &li->kept[i];
    if (k->used) continue;
    if (site_reported(li, k->site)) continue;
    if (k->origin.storage) {
      bool reached = false;
      vqc_status s = same_values(&k->result, &k->origin, &reached);
      if (s != VQC_OK) {
        if (first == VQC_OK) first = s;
        continue;
      }
      if (reached) continue; /* written back some other way */
    }
    vqc_status s = remember_site(li, k->site);
    if (s == VQC_OK) s = report(li, k, step);
    if (s != VQC_OK && first == VQC_OK) first = s;
  }
  release_kept(li);
  return first;
}

/* ---- the checker interface */

static void lost_free(lost_impl *li) {
  if (!li) return;
  if (li->comm) vqc_comm_unsubscribe(li->comm, on_collective, li);
  release_kept(li);
  free(li->kept);
  free(li->reported);
  free(li);
}

static vqc_status lost_attach(vqc_checker *self, vqc_check_ctx *ctx) {
  if (!ctx || !ctx->comm || !ctx->findings)
    return vqc_error(VQC_EINVAL, "lost_inplace: ctx needs comm and findings");
  lost_impl *li = calloc(1, sizeof *li);
  if (!li) return vqc_error(VQC_ENOMEM, "lost_inplace: no memory");
  li->ctx = ctx;
  li->last_step = -1;
  vqc_status s = vqc_comm_subscribe(ctx->comm, on_collective, li);
  if (s != VQC_OK) {
    lost_free(li);
    return s;
  }
  li->comm = ctx->comm;
  self->impl = li;
  return VQC_OK;
}

static vqc_status lost_step_end(vqc_checker *self, vqc_check_ctx *ctx,
                                int64_t step) {
  (void)ctx;
  lost_impl *li = self->impl;
  if (!li) return vqc_error(VQC_EINVAL, "lost_inplace: not attached");
  li->last_step = step;
  return verdict(li, step);
}

/* Results of collectives after the last step end belong to the step that
 * was in progress (last + 1). After a failure the code that would have read
 * them never ran, so they are released without a verdict. */
static vqc_status lost_finish(vqc_checker *self, vqc_check_ctx *ctx,
                              vqc_status run_status) {
  (void)ctx;
  lost_impl *li = self->impl;
  if (!li) return VQC_OK;
  if (run_status != VQC_OK) {
    release_kept(li);
    return VQC_OK;
  }
  return verdict(li, li->last_step >= 0 ? li->last_step + 1 : -1);
}

static void lost_destroy(vqc_checker *self, vqc_check_ctx *ctx) {
  (void)ctx;
  if (!self) return;
  lost_free(self->impl);
  self->impl = NULL;
}

vqc_status vqc_checker_lost_inplace(vqc_checker *out) {
  if (!out) return vqc_error(VQC_EINVAL, "lost_inplace: out is NULL");
  memset(out, 0, sizeof *out);
  out->name = "lost_inplace";
  out->attach = lost_attach;
  out->step_end = lost_step_end;
  out->finish = lost_finish;
  out->destroy = lost_destroy;
  return VQC_OK;
}
