/* test_lost_inplace.c: the lost-in-place checker (checkers/lost_inplace.c)
 * and the tensor access counts it relies on.
 *
 * Each case runs a small pattern on 3 ranks of the threads backend with the
 * checker attached, raising step_end after every step:
 *   - the #101 pattern: strided sums -> vqc_tensor_contiguous ->
 *     vqc_all_reduce_tensor -> drop: flagged at its call site and step, once;
 *   - its fix (vqc_tensor_copy_to_origin), a copy whose result is read, an
 *     in-place reduce of a contiguous tensor: clean;
 *   - an out-of-place result never read: flagged; one that is read: clean;
 *   - the real VQ library with the #101 fault (vq_ema.c): flagged at its
 *     call site; with the fault off: clean.
 * Inputs are small integers, so every reduced value is exact. Rank threads
 * record what they saw; the assertions run on the main thread. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "checkers.h"
#include "vqc/comm.h"
#include "vqc/digest.h"
#include "vqc/fault.h"
#include "vqc/nn.h"
#include "vqc/rng.h"
#include "vqc/tensor.h"
#include "vqc/vq.h"

#define W 3 /* ranks */
#define C 4 /* codes */
#define D 3 /* dims */

/* ---- access counts (the mechanism) */

Test(access_count, readers_count_and_views_and_writes_do_not) {
  vqc_tensor t, v, c;
  const int64_t shape[2] = {2, 3};
  cr_assert_eq(vqc_tensor_zeros(&t, VQC_F32, 2, shape, VQC_DEVICE_CPU), VQC_OK);
  cr_expect_eq(vqc_tensor_access_count(&t), 0);
  cr_assert_eq(vqc_tensor_transpose(&t, 0, 1, &v), VQC_OK); /* a view */
  const int64_t i0[2] = {0, 0};
  vqc_tensor_set(&v, i0, 5.0);                              /* a write */
  (void)vqc_tensor_data_untracked(&t);
  cr_expect_eq(vqc_tensor_access_count(&t), 0);
  cr_expect_eq(vqc_tensor_get(&v, i0), 5.0);                /* a read */
  cr_expect_eq(vqc_tensor_access_count(&t), 1);
  (void)vqc_tensor_data(&t);
  cr_expect_eq(vqc_tensor_access_count(&v), 2); /* shared storage */
  cr_assert_eq(vqc_tensor_contiguous(&v, &c), VQC_OK);      /* reads v */
  cr_expect_eq(vqc_tensor_access_count(&t), 3);
  cr_expect_eq(vqc_tensor_access_count(&c), 0);             /* fresh copy */
  cr_assert_eq(vqc_tensor_copy_to_origin(&c), VQC_OK);      /* reads c */
  cr_expect_eq(vqc_tensor_access_count(&c), 1);
  cr_expect_eq(vqc_tensor_access_count(&t), 3); /* the destination: a write */
  uint64_t h;
  cr_assert_eq(vqc_digest_tensor(&v, &h), VQC_OK); /* strided walk: a read */
  cr_assert_eq(vqc_digest_tensor(&c, &h), VQC_OK); /* contiguous: a read */
  cr_expect_eq(vqc_tensor_access_count(&t), 4);
  cr_expect_eq(vqc_tensor_access_count(&c), 2);
  vqc_tensor_free(&c);
  vqc_tensor_free(&v);
  vqc_tensor_free(&t);
}

/* ---- a 3-rank run with the checker attached */

typedef enum {
  P_BUG_101,       /* reduce a contiguous copy of a strided tensor, drop it */
  P_FIXED_101,     /* ... and write it back (vqc_tensor_copy_to_origin) */
  P_COPY_READ,     /* ... and read the copy's result */
  P_INPLACE,       /* reduce a contiguous tensor in place, never read it */
  P_OUT_DISCARDED, /* out-of-place reduce, output never read */
  P_OUT_READ,      /* out-of-place reduce, output read */
} pattern;

typedef struct run {
  pattern before, after; /* pattern of steps < switch_step, and from it on */
  int steps, switch_step;
  bool step_ends;        /* false: no step_end at all, only finish */
  bool register_state;   /* register the strided sums as "ema.embed_sum" */
  vqc_findings findings;
  int line[2];           /* line of the collective of `before` / `after` */
  /* written by rank r */
  vqc_status status[W];
  char err[W][256];
  double local00[W];     /* S[0][0] after the step, as the code sees it */
  double reduced00[W];   /* the reduced value read where the pattern reads */
} run;

/* Rank r's sums S[c][d] = (r + 1) * (1 + c * D + d), stored like an einsum
 * output: a (D, C) buffer seen through a transpose, so (C, D) is strided.
 * The sum over ranks is (1 + 2 + 3) * (1 + c * D + d). */
static vqc_status make_sums(int r, vqc_tensor *buf, vqc_tensor *sums) {
  const int64_t shape_dc[2] = {D, C};
  VQC_TRY(vqc_tensor_zeros(buf, VQC_F32, 2, shape_dc, VQC_DEVICE_CPU));
  VQC_TRY(vqc_tensor_transpose(buf, 0, 1, sums));
  for (int64_t c = 0; c < C; c++)
    for (int64_t d = 0; d < D; d++) {
      const int64_t idx[2] = {c, d};
      vqc_tensor_set(sums, idx, (double)((r + 1) * (1 + c * D + d)));
    }
  return VQC_OK;
}

/* One step of pattern p on rank r; the collective's line goes to *line. */
static vqc_status run_pattern(run *w, vqc_comm *c, pattern p, int *line,
                              vqc_check_ctx *ctx) {
  const int r = vqc_comm_rank(c);
  const int64_t i00[2] = {0, 0};
  vqc_tensor buf = {0}, sums = {0}, tmp = {0}, in = {0}, out = {0};
  vqc_status s = make_sums(r, &buf, &sums);
  vqc_param_list state;
  vqc_param_list_init(&state);
  if (s == VQC_OK && w->register_state) {
    const int64_t shape_dc[2] = {D, C};
    s = vqc_param_list_add(&state, "ema.embed_sum", VQC_F32,
                           vqc_tensor_data_untracked(&buf), NULL, 2, shape_dc);
    ctx->state = &state;
  }
  if (s != VQC_OK) goto done;
  w->reduced00[r] = -1.0;

  switch (p) {
    case P_BUG_101:
    case P_FIXED_101:
    case P_COPY_READ:
      if ((s = vqc_tensor_contiguous(&sums, &tmp))) goto done;
      *line = __LINE__ + 1;
      if ((s = vqc_all_reduce_tensor(c, &tmp, VQC_SUM))) goto done;
      if (p == P_FIXED_101 && (s = vqc_tensor_copy_to_origin(&tmp))) goto done;
      if (p == P_COPY_READ) w->reduced00[r] = ((float *)vqc_tensor_data(&tmp))[0];
      vqc_tensor_free(&tmp);
      break;
    case P_INPLACE: {
      /* .contiguous() of a contiguous tensor is the tensor itself (no copy,
       * no origin), so reducing it in place is correct. */
      vqc_tensor dense = {0};
      if ((s = vqc_tensor_contiguous(&sums, &dense))) goto done; /* a copy */
      if ((s = vqc_tensor_contiguous(&dense, &tmp))) goto done;  /* a view */
      vqc_tensor_free(&dense);
      *line = __LINE__ + 1;
      if ((s = vqc_all_reduce_tensor(c, &tmp, VQC_SUM))) goto done;
      vqc_tensor_free(&tmp);
      break;
    }
    case P_OUT_DISCARDED:
    case P_OUT_READ: {
      /* LFQ's distributed mean: out = all_reduce(in), then (the bug) the
       * code goes on with `in`. */
      const int64_t shape_cd[2] = {C, D};
      if ((s = vqc_tensor_zeros(&in, VQC_F32, 2, shape_cd, VQC_DEVICE_CPU)) ||
          (s = vqc_tensor_zeros(&out, VQC_F32, 2, shape_cd, VQC_DEVICE_CPU)) ||
          (s = vqc_tensor_copy(&in, &sums)))
        goto done;
      *line = __LINE__ + 1;
      if ((s = vqc_all_reduce_tensor_out(c, &in, &out, VQC_SUM))) goto done;
      if (p == P_OUT_READ) w->reduced00[r] = vqc_tensor_get(&out, i00);
      break;
    }
  }
  w->local00[r] = vqc_tensor_get(&sums, i00); /* what the code goes on with */

done:
  ctx->state = NULL;
  vqc_param_list_free(&state);
  vqc_tensor_free(&tmp);
  vqc_tensor_free(&in);
  vqc_tensor_free(&out);
  vqc_tensor_free(&sums);
  vqc_tensor_free(&buf);
  return s;
}

static vqc_status rank_main(vqc_comm *c, void *arg) {
  run *w = arg;
  const int r = vqc_comm_rank(c);
  vqc_check_ctx ctx = {.comm = c, .rank = r, .size = vqc_comm_size(c),
                       .findings = &w->findings, .opts = {.interval = 1}};
  vqc_checker ch;
  vqc_status s = vqc_checker_lost_inplace(&ch);
  if (s == VQC_OK) s = ch.attach(&ch, &ctx);
  for (int step = 0; s == VQC_OK && step < w->steps; step++) {
    const bool late = step >= w->switch_step;
    int line = 0;
    s = run_pattern(w, c, late ? w->after : w->before, &line, &ctx);
    w->line[late] = line; /* every rank writes the same value */
    if (s == VQC_OK && w->step_ends) s = ch.step_end(&ch, &ctx, step);
  }
  vqc_status f = ch.finish ? ch.finish(&ch, &ctx, s) : VQC_OK;
  if (ch.destroy) ch.destroy(&ch, &ctx);
  if (s == VQC_OK) s = f;
  w->status[r] = s;
  if (s != VQC_OK) snprintf(w->err[r], sizeof w->err[r], "%s", vqc_last_error());
  return s;
}

static void run_world(run *w) {
  vqc_findings_init(&w->findings);
  vqc_status s = vqc_threads_run(W, 30.0, rank_main, w, NULL);
  cr_assert_eq(s, VQC_OK, "%s | %s | %s", w->err[0], w->err[1], w->err[2]);
}

/* "file.c:LINE" must appear in the finding's site. */
static void expect_site(const vqc_finding *f, int line, const char *func) {
  char want[64];
  snprintf(want, sizeof want, "test_lost_inplace.c:%d ", line);
  cr_expect(strstr(f->site, want) != NULL, "site '%s' lacks '%s'", f->site,
            want);
  cr_expect(strstr(f->site, func) != NULL, "site '%s' lacks '%s'", f->site,
            func);
}

static const char *detail_str(const vqc_finding *f, const char *key) {
  return json_string_value(json_object_get(f->detail, key));
}

static int64_t detail_dim(const vqc_finding *f, const char *key, size_t i) {
  return json_integer_value(json_array_get(json_object_get(f->detail, key), i));
}

/* ---- (a) a contiguous temporary of a strided tensor */

Test(lost_inplace, the_101_pattern_is_flagged_at_its_site_and_step_once) {
  static run w = {.before = P_FIXED_101, .after = P_BUG_101, .steps = 5,
                  .switch_step = 2, .step_ends = true, .register_state = true};
  run_world(&w);
  /* The bug is real: the strided sums kept their rank-local value. */
  for (int r = 0; r < W; r++) cr_expect_eq(w.local00[r], (double)(r + 1));

  cr_assert_eq(w.findings.count, 1, "one finding for one call site, got %d",
               w.findings.count);
  const vqc_finding *f = &w.findings.items[0];
  cr_expect_eq(f->kind, VQC_FINDING_LOST_INPLACE);
  cr_expect_eq(f->step, 2, "first step with the bug, got %lld",
               (long long)f->step);
  expect_site(f, w.line[1], "run_pattern");
  cr_expect_str_eq(f->tensor, "ema.embed_sum");
  cr_expect_eq(f->nranks, W, "every rank lost its result");
  cr_expect_str_eq(detail_str(f, "reason"),
                   "reduced a contiguous temporary of a strided tensor; the "
                   "result never reached it");
  cr_expect_str_eq(detail_str(f, "op"), "all_reduce");
  cr_expect_str_eq(detail_str(f, "redop"), "sum");
  cr_expect_eq(json_integer_value(json_object_get(f->detail, "count")), C * D);
  /* 5 steps, 1 collective per step: the bug's first one is seq 2. */
  cr_expect_eq(json_integer_value(json_object_get(f->detail, "seq")), 2);
  cr_expect_eq(detail_dim(f, "origin_shape", 0), C);
  cr_expect_eq(detail_dim(f, "origin_shape", 1), D);
  cr_expect_eq(detail_dim(f, "origin_strides", 0), 1);
  cr_expect_eq(detail_dim(f, "origin_strides", 1), C);
  vqc_findings_free(&w.findings);
}

Test(lost_inplace, without_a_registered_name_the_site_function_names_it) {
  static run w = {.before = P_BUG_101, .after = P_BUG_101, .steps = 1,
                  .switch_step = 1, .step_ends = true};
  run_world(&w);
  cr_assert_eq(w.findings.count, 1);
  cr_expect_str_eq(w.findings.items[0].tensor, "run_pattern");
  cr_expect_eq(w.findings.items[0].step, 0);
  vqc_findings_free(&w.findings);
}

Test(lost_inplace, the_fix_copy_to_origin_is_clean_and_reaches_the_tensor) {
  static run w = {.before = P_FIXED_101, .after = P_FIXED_101, .steps = 3,
                  .switch_step = 3, .step_ends = true, .register_state = true};
  run_world(&w);
  for (int r = 0; r < W; r++) cr_expect_eq(w.local00[r], 6.0); /* 1+2+3 */
  cr_expect_eq(w.findings.count, 0, "first: %s",
               w.findings.count ? w.findings.items[0].message : "");
  vqc_findings_free(&w.findings);
}

Test(lost_inplace, a_copy_whose_result_is_read_is_clean) {
  static run w = {.before = P_COPY_READ, .after = P_COPY_READ, .steps = 2,
                  .switch_step = 2, .step_ends = true};
  run_world(&w);
  for (int r = 0; r < W; r++) cr_expect_eq(w.reduced00[r], 6.0);
  cr_expect_eq(w.findings.count, 0, "first: %s",
               w.findings.count ? w.findings.items[0].message : "");
  vqc_findings_free(&w.findings);
}

Test(lost_inplace, an_inplace_reduce_of_a_contiguous_tensor_is_clean) {
  static run w = {.before = P_INPLACE, .after = P_INPLACE, .steps = 2,
                  .switch_step = 2, .step_ends = true};
  run_world(&w);
  cr_expect_eq(w.findings.count, 0, "first: %s",
               w.findings.count ? w.findings.items[0].message : "");
  vqc_findings_free(&w.findings);
}

/* ---- (b) out-of-place results */

Test(lost_inplace, a_discarded_out_of_place_result_is_flagged) {
  static run w = {.before = P_OUT_READ, .after = P_OUT_DISCARDED, .steps = 4,
                  .switch_step = 1, .step_ends = true};
  run_world(&w);
  cr_assert_eq(w.findings.count, 1, "got %d", w.findings.count);
  const vqc_finding *f = &w.findings.items[0];
  cr_expect_eq(f->kind, VQC_FINDING_LOST_INPLACE);
  cr_expect_eq(f->step, 1);
  expect_site(f, w.line[1], "run_pattern");
  cr_expect_eq(f->nranks, W);
  cr_expect_str_eq(detail_str(f, "reason"),
                   "out-of-place collective result never read");
  cr_expect(json_is_true(json_object_get(f->detail, "out_of_place")));
  cr_expect_str_eq(detail_str(f, "result"), "discarded");
  vqc_findings_free(&w.findings);
}

Test(lost_inplace, an_out_of_place_result_that_is_read_is_clean) {
  static run w = {.before = P_OUT_READ, .after = P_OUT_READ, .steps = 3,
                  .switch_step = 3, .step_ends = true};
  run_world(&w);
  for (int r = 0; r < W; r++) cr_expect_eq(w.reduced00[r], 6.0);
  cr_expect_eq(w.findings.count, 0, "first: %s",
               w.findings.count ? w.findings.items[0].message : "");
  vqc_findings_free(&w.findings);
}

Test(lost_inplace, results_after_the_last_step_end_are_judged_at_finish) {
  /* No step_end at all: finish judges them, with no step known (-1). */
  static run w = {.before = P_OUT_DISCARDED, .after = P_OUT_DISCARDED,
                  .steps = 1, .switch_step = 1, .step_ends = false};
  run_world(&w);
  cr_assert_eq(w.findings.count, 1);
  cr_expect_eq(w.findings.items[0].step, -1);
  vqc_findings_free(&w.findings);
}

/* ---- through the real VQ library (vq_ema.c, fault LOST_INPLACE_CONTIGUOUS) */

#define VQ_ROWS 10
#define VQ_STEPS 3

typedef struct vq_run {
  vqc_fault fault;
  vqc_findings findings;
  vqc_status status[W];
  char err[W][256];
} vq_run;

static vqc_status vq_rank(vqc_comm *c, void *arg) {
  vq_run *v = arg;
  const int r = vqc_comm_rank(c);
  vqc_vq_params p;
  vqc_vq_params_default(&p, 4, 8);
  p.seed = 9;
  p.fault = v->fault;
  vqc_check_ctx ctx = {.comm = c, .rank = r, .size = W,
                       .findings = &v->findings, .opts = {.interval = 1}};
  vqc_checker ch = {0};
  vqc_vq vq;
  float x[VQ_ROWS * 4], q[VQ_ROWS * 4], loss;
  int64_t idx[VQ_ROWS];
  vqc_status s = vqc_vq_init(&vq, &p, NULL);
  if (s == VQC_OK) s = vqc_checker_lost_inplace(&ch);
  if (s == VQC_OK) s = ch.attach(&ch, &ctx);
  for (int st = 0; s == VQC_OK && st < VQ_STEPS; st++) {
    vqc_rng g;
    vqc_rng_init(&g, 3, vqc_rng_stream_for((uint64_t)st, VQC_RNG_TEST, r));
    vqc_rng_normal(&g, x, VQ_ROWS * 4, 0.0f, 1.0f);
    const vqc_vq_ctx vctx = {c, (uint64_t)st, NULL, 0};
    s = vqc_vq_forward(&vq, &vctx, x, VQ_ROWS, true, idx, q, &loss);
    if (s == VQC_OK) s = ch.step_end(&ch, &ctx, st);
  }
  vqc_status f = ch.finish ? ch.finish(&ch, &ctx, s) : VQC_OK;
  if (ch.destroy) ch.destroy(&ch, &ctx);
  vqc_vq_free(&vq);
  v->status[r] = s != VQC_OK ? s : f;
  if (v->status[r] != VQC_OK)
    snprintf(v->err[r], sizeof v->err[r], "%s", vqc_last_error());
  return v->status[r];
}

Test(lost_inplace_vq, the_101_fault_in_vq_ema_is_flagged_and_its_twin_is_clean) {
  static vq_run bug = {.fault = VQC_FAULT_LOST_INPLACE_CONTIGUOUS};
  static vq_run twin = {.fault = VQC_FAULT_NONE};
  vq_run *runs[2] = {&bug, &twin};
  for (int i = 0; i < 2; i++) {
    vqc_findings_init(&runs[i]->findings);
    cr_assert_eq(vqc_threads_run(W, 30.0, vq_rank, runs[i], NULL), VQC_OK,
                 "%s | %s | %s", runs[i]->err[0], runs[i]->err[1],
                 runs[i]->err[2]);
  }
  cr_expect_eq(twin.findings.count, 0, "twin: %s",
               twin.findings.count ? twin.findings.items[0].message : "");
  cr_assert_eq(bug.findings.count, 1, "got %d", bug.findings.count);
  const vqc_finding *f = &bug.findings.items[0];
  cr_expect_eq(f->kind, VQC_FINDING_LOST_INPLACE);
  cr_expect_eq(f->step, 0);
  cr_expect(strstr(f->site, "lib/src/quant/vq_ema.c:") == f->site, "%s", f->site);
  cr_expect_eq(f->nranks, W);
  cr_expect_eq(detail_dim(f, "origin_shape", 0), 8); /* (C, D) = (8, 4) */
  cr_expect_eq(detail_dim(f, "origin_shape", 1), 4);
  cr_expect_eq(detail_dim(f, "origin_strides", 0), 1); /* transposed (D, C) */
  cr_expect_eq(detail_dim(f, "origin_strides", 1), 8);
  vqc_findings_free(&bug.findings);
  vqc_findings_free(&twin.findings);
}
