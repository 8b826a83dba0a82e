/* divergence.c: the divergence and nonfinite checker.
 *
 * Replicated state (every entry of ctx->state: weights, codebooks, EMA
 * buffers, optimizer moments, step counters) must be bit-identical on every
 * rank after every step. At the end of every opts.interval-th step (steps 0,
 * N, 2N, ..., so initialisation bugs show at step 0) and at the last step the
 * runner reported when the run ends cleanly, each rank:
 *
 *   1. digests every entry (the tensor digest of vqc/digest.h, the value
 *      vqc_param_digest gives) and counts NaN and Inf in float entries, in one
 *      pass over the bytes;
 *   2. appends one line per entry to run_dir/rank-<r>.trace.jsonl (trace.h)
 *      and flushes it, so a killed job keeps its trace;
 *   3. agrees with the other ranks in ONE all_reduce over the SIDE channel
 *      whose size does not depend on the number of ranks (two-phase
 *      agreement): per entry the minimum and maximum digest (the maximum is
 *      sent as the minimum of ~digest, so one MIN reduction carries both),
 *      and one word saying whether some rank holds non-finite values not yet
 *      reported: 8 (2T + 1) bytes per rank per check for T entries, however
 *      many ranks (vqc_comm_get_stats counts them; test_divergence checks it
 *      stays flat from 2 to 1024 ranks).
 *   4. only when that shows a problem, a second, localising exchange: the
 *      digests of the first newly differing entry (8 bytes per rank), the
 *      ranks' non-finite summaries (32 bytes per rank), then the entry's
 *      layout and bytes (below). A clean check never pays for it.
 *
 * The registry itself (names, dtypes, order) is compared once, at the first
 * check, with a 4-word all_reduce; a mismatch names the odd rank.
 *
 * Every rank then holds the same table and takes the same decisions, so the
 * extra exchanges below happen in lockstep without further agreement, and
 * exactly one rank records each finding (the threads backend shares one
 * findings list; N copies would be noise).
 *
 * Divergence: the first entry in registry order whose digests differ and that
 * has not been reported yet is localised; entries that start to differ at the
 * same step are listed in its detail (also_differing) and not reported later,
 * since they are usually downstream of the first (weights, then their Adam
 * moments). A tensor that starts to differ at a later step gets its own
 * finding. Localising: ranks are grouped by digest. When one group is
 * strictly larger than every other (the majority) it is the reference and
 * the other ranks are the outliers. Without a majority (3 ranks, 3 digests;
 * any 1-1 or 2-2 split) no rank is blamed by a tie-break: the finding names
 * every rank and says "no majority: ranks {0} and {1} differ", its detail
 * has "majority": false and no reference or outliers, and the bytes are
 * compared against the lowest rank's ("base_rank") only to show where they
 * differ. The reference group's lowest rank broadcasts the tensor's bytes in
 * pieces (at most 1 MiB, less with many ranks, so the threads backend, where
 * every rank's copy lives in one process, holds at most 64 MiB of them) and
 * every outlier compares its own copy with them: first
 * differing flat index and its coordinates, the two values there, the number
 * of differing elements (bitwise, like the digest), max abs diff, max rel diff
 * (|a - b| / max(|a|, |b|) over differing elements, so 1 means one of them is
 * zero), and the max ULP distance for float dtypes (distance between the
 * ordered integer forms of the bit patterns; +0 and -0 are 0 apart). The
 * outliers' summaries are all_gathered (one small struct per rank) and the
 * reference rank records the finding with ranks = the outliers (every rank
 * without a majority).
 *
 * Nonfinite: for each rank, the first check at which any float entry holds a
 * NaN or Inf gives one `nonfinite` finding for the first such entry in
 * registry order (count, NaN/Inf split, first index). Ranks whose first
 * non-finite entry and step coincide share one finding (recorded by the
 * lowest of them), with per-rank counts in the detail.
 *
 * Detail values that are not finite numbers (a NaN compared with a number)
 * are written as the strings "nan", "inf", "-inf": JSON has no such
 * numbers.
 *
 * The code is split by job (divergence_internal.h declares what the files
 * share): divergence_exchange.c holds steps 1 to 3, divergence_locate.c
 * step 4 and the findings; this file the synchronous and overlapped checks
 * and the checker ops. */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "divergence_internal.h"

/* ---- the synchronous check */

static vqc_status check_registry_size(const div_impl *d,
                                      const vqc_check_ctx *ctx, int64_t step) {
  if (ctx->state->count == d->ntensors) return VQC_OK;
  return vqc_error(VQC_EINVAL,
                   "divergence: the registry had %d entries at attach and "
                   "has %d at step %" PRId64 " (register everything first)",
                   d->ntensors, ctx->state->count, step);
}

/* The synchronous check: digest, then exchange. A rank whose digest failed
 * still takes part in the exchange, so its peers do not wait for it. */
static vqc_status check_step(div_impl *d, const vqc_check_ctx *ctx,
                             int64_t step) {
  VQC_TRY(check_registry_size(d, ctx, step));
  d->last_checked = step;
  vqc_status ds = div_digest_state(d, ctx, step);
  if (ds == VQC_OK) return div_exchange(d, ctx, step, false, true);
  char why[512];
  snprintf(why, sizeof why, "%s", vqc_last_error());
  div_exchange(d, ctx, step, false, false);
  return vqc_error(ds, "%s", why);
}

/* ---- the overlapped check */

static void *worker_main(void *arg) {
  div_impl *d = arg;
  d->worker_status = div_digest_state(d, d->worker_ctx, d->pending_step);
  if (d->worker_status != VQC_OK)
    snprintf(d->worker_error, sizeof d->worker_error, "%s", vqc_last_error());
  return NULL;
}

/* Starts digesting `step` on the worker thread; digests in place if no
 * thread can be started. */
static vqc_status start_overlapped(div_impl *d, const vqc_check_ctx *ctx,
                                   int64_t step) {
  VQC_TRY(check_registry_size(d, ctx, step));
  d->last_checked = step;
  d->pending = true;
  d->pending_step = step;
  d->worker_ctx = ctx;
  d->worker_status = VQC_OK;
  d->worker_error[0] = '\0';
  d->insert_at = vqc_findings_count(ctx->findings);
  if (pthread_create(&d->worker, NULL, worker_main, d) == 0) {
    d->worker_running = true;
    return VQC_OK;
  }
  worker_main(d);
  return VQC_OK;
}

static vqc_status settle_pending(div_impl *d, const vqc_check_ctx *ctx,
                                 bool failed) {
  if (!d->pending) return VQC_OK;
  if (d->worker_running) {
    pthread_join(d->worker, NULL);
    d->worker_running = false;
  }
  d->pending = false;
  bool digested = d->worker_status == VQC_OK;
  vqc_status s = div_exchange(d, ctx, d->pending_step, failed, digested);
  d->insert_at = -1;
  if (!digested)
    return vqc_error(d->worker_status, "%s", d->worker_error);
  return s;
}

/* ---- the checker interface */

static void div_free(div_impl *d) {
  if (d == NULL) return;
  vqc_trace_writer_close(d->trace);
  free(d->reported);
  free(d->nonfinite_done);
  free(d->local);
  free(d->agree_send);
  free(d->agree_min);
  free(d);
}

static vqc_status side_hook(void *user);

static vqc_status div_attach(vqc_checker *self, vqc_check_ctx *ctx) {
  if (ctx == NULL || ctx->state == NULL || ctx->comm == NULL ||
      ctx->findings == NULL)
    return vqc_error(VQC_EINVAL, "divergence: ctx needs comm, state, findings");
  vqc_status s = VQC_OK;
  div_impl *d = calloc(1, sizeof *d);
  if (d == NULL) goto nomem;
  d->size = ctx->size;
  d->ntensors = ctx->state->count;
  d->last_seen = d->last_checked = -1;
  d->insert_at = -1;
  size_t nt = (size_t)d->ntensors, nr = (size_t)d->size;
  /* +1: calloc(0) may return NULL, which is not a failure here */
  d->reported = calloc(nt + 1, sizeof *d->reported);
  d->nonfinite_done = calloc(nr + 1, sizeof *d->nonfinite_done);
  d->local = calloc(nt * W_COUNT + 1, sizeof *d->local);
  d->agree_send = calloc(AGREE_WORDS(nt), sizeof *d->agree_send);
  d->agree_min = calloc(AGREE_WORDS(nt), sizeof *d->agree_min);
  if (!d->reported || !d->nonfinite_done || !d->local || !d->agree_send ||
      !d->agree_min)
    goto nomem;
  if (ctx->run_dir != NULL) {
    char path[4096];
    if ((s = vqc_trace_path(ctx->run_dir, ctx->rank, path, sizeof path)) !=
            VQC_OK ||
        (s = vqc_trace_writer_open(path, &d->trace)) != VQC_OK)
      goto fail;
  }
  if (ctx->opts.overlap &&
      (s = vqc_comm_set_before_collective(vqc_comm_side(ctx->comm), side_hook,
                                          d)) != VQC_OK)
    goto fail;
  d->hooked = ctx->opts.overlap;
  self->impl = d;
  return VQC_OK;

nomem:
  s = vqc_error(VQC_ENOMEM, "divergence: no memory for %d tensors x %d ranks",
                ctx->state->count, ctx->size);
fail:
  div_free(d);
  return s;
}

static int interval_of(const vqc_check_ctx *ctx) {
  return ctx->opts.interval >= 1 ? ctx->opts.interval : 1;
}

/* With overlap, a check still pending here was not settled before the
 * state changed: that is only sound when nothing was written since (a step
 * that updates nothing); it is settled now, before the next one starts. */
static vqc_status div_step_end(vqc_checker *self, vqc_check_ctx *ctx,
                               int64_t step) {
  div_impl *d = self->impl;
  if (d == NULL) return vqc_error(VQC_EINVAL, "divergence: not attached");
  VQC_TRY(settle_pending(d, ctx, false));
  d->last_seen = step;
  if (step % interval_of(ctx) != 0) return VQC_OK;
  if (ctx->opts.overlap) return start_overlapped(d, ctx, step);
  return check_step(d, ctx, step);
}

/* The side channel's hook (overlap only): a rank's first side collective
 * after step_end settles the pending check first, so ranks that write no
 * state this step (no settle from the model) still exchange in the same
 * order as those that did. A peer's failure learned here is not this
 * collective's error: the collective that follows (the runner's agreement,
 * vqc_instr_finish) reports it in its own words. */
static vqc_status side_hook(void *user) {
  div_impl *d = user;
  vqc_status s = settle_pending(d, d->worker_ctx, false);
  return s == VQC_EABORTED ? VQC_OK : s;
}

static vqc_status div_settle(vqc_checker *self, vqc_check_ctx *ctx,
                             bool failed) {
  div_impl *d = self->impl;
  return d ? settle_pending(d, ctx, failed) : VQC_OK;
}

/* After a clean run, checks the last step if the interval skipped it. After
 * a failure the ranks may have stopped at different points (or one may be
 * gone), so no exchange is attempted: the trace already holds every step
 * that was checked. */
static vqc_status div_finish(vqc_checker *self, vqc_check_ctx *ctx,
                             vqc_status run_status) {
  div_impl *d = self->impl;
  if (d == NULL) return VQC_OK;
  vqc_status s = settle_pending(d, ctx, run_status != VQC_OK);
  if (s == VQC_OK && run_status == VQC_OK && d->last_seen > d->last_checked)
    s = check_step(d, ctx, d->last_seen);
  vqc_trace_writer_close(d->trace);
  d->trace = NULL;
  return s;
}

static void div_destroy(vqc_checker *self, vqc_check_ctx *ctx) {
  if (self == NULL) return;
  div_impl *d = self->impl;
  if (d != NULL && d->worker_running) pthread_join(d->worker, NULL);
  if (d != NULL && d->hooked)
    vqc_comm_set_before_collective(vqc_comm_side(ctx->comm), NULL, NULL);
  div_free(d);
  self->impl = NULL;
}

vqc_status vqc_checker_divergence(vqc_checker *out) {
  if (out == NULL) return vqc_error(VQC_EINVAL, "divergence: out is NULL");
  memset(out, 0, sizeof *out);
  out->name = "divergence";
  out->attach = div_attach;
  out->step_end = div_step_end;
  out->settle = div_settle;
  out->finish = div_finish;
  out->destroy = div_destroy;
  return VQC_OK;
}
