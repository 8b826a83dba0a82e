/* test_divergence.c: the divergence / nonfinite checker and the trace format.
 *
 * Each case runs N ranks on the threads backend. Every rank builds the same
 * registry of exactly-representable values (so the expected diffs and ULP
 * distances are exact), then, for a few steps, applies the perturbations the
 * case lists for it (a perturbation stays: later steps keep the changed
 * value), and raises step_end on the checker; finish(VQC_OK) at the end.
 * The assertions run on the main thread on the shared findings list and on
 * the trace files. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkers.h"
#include "trace.h"
#include "vqc/comm.h"
#include "vqc/nn.h"

#define MAX_RANKS 8
#define EMBED_ROWS 32
#define EMBED_COLS 16
/* big: 1.31 MB, i.e. 21 digest chunks (the last short) and two 1 MiB
 * localisation pieces, so both loops cross a boundary. */
#define BIG_ROWS 512
#define BIG_COLS 640

/* One change a rank makes to its copy of a tensor before step_end of
 * `step`. */
typedef struct perturb {
  int rank;
  int64_t step;
  const char *tensor;
  int64_t index;
  double value;
} perturb;

typedef struct run_case {
  int size, steps, interval;
  const perturb *changes;
  int nchanges;
  const char *run_dir; /* NULL: no traces */
  vqc_findings findings;
  vqc_status finish_status[MAX_RANKS];
} run_case;

/* Every rank's replicated state: the same values on every rank. */
typedef struct rank_state {
  float embed[EMBED_ROWS * EMBED_COLS]; /* (32, 16) */
  float weight[4 * 8];                  /* (4, 8) */
  double bias[8];                       /* (8) */
  int64_t counter[1];                   /* (1) */
  float *big;                           /* (512, 640) */
  vqc_param_list list;
} rank_state;

/* Multiples of 1/16 below 1: exact in float32 and float64. */
static float embed_value(int64_t i) { return (float)(i % 8) * 0.0625f; }

static vqc_status state_init(rank_state *s) {
  vqc_param_list_init(&s->list);
  for (int i = 0; i < EMBED_ROWS * EMBED_COLS; i++) s->embed[i] = embed_value(i);
  for (int i = 0; i < 32; i++) s->weight[i] = (float)(i - 16) * 0.25f;
  for (int i = 0; i < 8; i++) s->bias[i] = (double)i * 0.5;
  s->counter[0] = 7;
  s->big = malloc((size_t)BIG_ROWS * BIG_COLS * sizeof(float));
  if (s->big == NULL) return VQC_ENOMEM;
  for (int64_t i = 0; i < (int64_t)BIG_ROWS * BIG_COLS; i++)
    s->big[i] = (float)(i % 1000) * 0.5f;
  int64_t se[2] = {EMBED_ROWS, EMBED_COLS}, sw[2] = {4, 8}, sb[1] = {8},
          sc[1] = {1}, sg[2] = {BIG_ROWS, BIG_COLS};
  VQC_TRY(vqc_param_list_add(&s->list, "embed", VQC_F32, s->embed, NULL, 2, se));
  VQC_TRY(vqc_param_list_add(&s->list, "weight", VQC_F32, s->weight, NULL, 2, sw));
  VQC_TRY(vqc_param_list_add(&s->list, "bias", VQC_F64, s->bias, NULL, 1, sb));
  VQC_TRY(vqc_param_list_add(&s->list, "counter", VQC_I64, s->counter, NULL, 1, sc));
  VQC_TRY(vqc_param_list_add(&s->list, "big", VQC_F32, s->big, NULL, 2, sg));
  return VQC_OK;
}

static void state_free(rank_state *s) {
  vqc_param_list_free(&s->list);
  free(s->big);
}

static void apply(rank_state *s, const perturb *p) {
  const vqc_param *e = vqc_param_list_find(&s->list, p->tensor);
  switch (e->dtype) {
    case VQC_F32: ((float *)e->data)[p->index] = (float)p->value; break;
    case VQC_F64: ((double *)e->data)[p->index] = p->value; break;
    case VQC_I64: ((int64_t *)e->data)[p->index] = (int64_t)p->value; break;
    default: break;
  }
}

static vqc_status rank_main(vqc_comm *c, void *arg) {
  run_case *rc = arg;
  int rank = vqc_comm_rank(c);
  rank_state s;
  vqc_status st = state_init(&s);
  vqc_checker chk;
  vqc_check_ctx ctx;
  memset(&chk, 0, sizeof chk);
  memset(&ctx, 0, sizeof ctx);
  ctx.comm = c;
  ctx.rank = rank;
  ctx.size = vqc_comm_size(c);
  ctx.state = &s.list;
  ctx.findings = &rc->findings;
  ctx.opts.interval = rc->interval;
  ctx.run_dir = rc->run_dir;
  if (st == VQC_OK) st = vqc_checker_divergence(&chk);
  if (st == VQC_OK) st = chk.attach(&chk, &ctx);
  for (int64_t step = 0; st == VQC_OK && step < rc->steps; step++) {
    for (int i = 0; i < rc->nchanges; i++)
      if (rc->changes[i].rank == rank && rc->changes[i].step == step)
        apply(&s, &rc->changes[i]);
    st = chk.step_end(&chk, &ctx, step);
  }
  if (st == VQC_OK) st = rc->finish_status[rank] = chk.finish(&chk, &ctx, VQC_OK);
  if (chk.destroy) chk.destroy(&chk, &ctx);
  state_free(&s);
  return st;
}

/* Runs the case; the caller frees rc->findings. */
static void run(run_case *rc) {
  vqc_findings_init(&rc->findings);
  vqc_status st[MAX_RANKS];
  vqc_status s = vqc_threads_run(rc->size, 30.0, rank_main, rc, st);
  cr_assert_eq(s, VQC_OK, "run failed: %s", vqc_last_error());
}

/* The findings of one kind, in the order recorded. */
static int of_kind(const vqc_findings *f, vqc_finding_kind k,
                   const vqc_finding **out, int max) {
  int n = 0;
  for (int i = 0; i < f->count; i++)
    if (f->items[i].kind == k && n < max) out[n++] = &f->items[i];
  return n;
}

static const vqc_finding *find_tensor(const vqc_findings *f,
                                      vqc_finding_kind k, const char *tensor) {
  for (int i = 0; i < f->count; i++)
    if (f->items[i].kind == k && strcmp(f->items[i].tensor, tensor) == 0)
      return &f->items[i];
  return NULL;
}

static json_int_t det_int(const vqc_finding *x, const char *key) {
  const json_t *v = json_object_get(x->detail, key);
  cr_assert(json_is_integer(v), "detail.%s is not an integer", key);
  return json_integer_value(v);
}

static double det_num(const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  cr_assert(json_is_number(v), "detail.%s is not a number", key);
  return json_number_value(v);
}

static void expect_coords(const json_t *coords, int64_t a, int64_t b) {
  cr_assert(json_is_array(coords) && json_array_size(coords) == 2);
  cr_expect_eq(json_integer_value(json_array_get(coords, 0)), a);
  cr_expect_eq(json_integer_value(json_array_get(coords, 1)), b);
}

/* ---- divergence */

Test(divergence, one_element_on_one_rank, .timeout = 60) {
  /* embed[3][5] is 0.3125 = 1.25 * 2^-2 everywhere; rank 1 makes it
   * 0.625 = 1.25 * 2^-1 at step 2: same mantissa, exponent one higher, so
   * the ULP distance is exactly 2^23. */
  perturb ch[] = {{1, 2, "embed", 3 * EMBED_COLS + 5, 0.625}};
  run_case rc = {.size = 3, .steps = 5, .interval = 1, .changes = ch,
                 .nchanges = 1};
  run(&rc);
  const vqc_finding *d[8];
  cr_assert_eq(of_kind(&rc.findings, VQC_FINDING_DIVERGENCE, d, 8), 1,
               "expected one divergence finding, %d findings in all",
               rc.findings.count);
  cr_expect_eq(rc.findings.count, 1);
  const vqc_finding *x = d[0];
  cr_expect_eq(x->step, 2);
  cr_expect_str_eq(x->tensor, "embed");
  cr_assert_eq(x->nranks, 1);
  cr_expect_eq(x->ranks[0], 1);
  cr_expect_eq(det_int(x, "first_index"), 53);
  expect_coords(json_object_get(x->detail, "coords"), 3, 5);
  cr_expect_eq(det_num(x->detail, "reference_value"), 0.3125);
  cr_expect_eq(det_num(x->detail, "outlier_value"), 0.625);
  cr_expect_eq(det_num(x->detail, "max_abs_diff"), 0.3125);
  cr_expect_eq(det_num(x->detail, "max_rel_diff"), 0.5);
  cr_expect_eq(det_int(x, "ulp"), 1 << 23);
  cr_expect_eq(det_int(x, "differing"), 1);
  cr_expect_eq(det_int(x, "numel"), EMBED_ROWS * EMBED_COLS);
  cr_expect_eq(det_int(x, "reference_rank"), 0);
  const json_t *groups = json_object_get(x->detail, "groups");
  cr_assert_eq(json_array_size(groups), 2);
  const json_t *g0 = json_object_get(json_array_get(groups, 0), "ranks");
  const json_t *g1 = json_object_get(json_array_get(groups, 1), "ranks");
  cr_expect_eq(json_array_size(g0), 2);
  cr_expect_eq(json_integer_value(json_array_get(g0, 1)), 2);
  cr_expect_eq(json_array_size(g1), 1);
  cr_expect_eq(json_integer_value(json_array_get(g1, 0)), 1);
  cr_expect(strstr(x->message, "'embed'") && strstr(x->message, "rank 1") &&
                strstr(x->message, "step 2") && strstr(x->message, "[3, 5]") &&
                strstr(x->message, "1 of 512"),
            "message: %s", x->message);
  vqc_findings_free(&rc.findings);
}

Test(divergence, two_tensors_at_different_steps, .timeout = 60) {
  /* embed diverges on rank 1 at step 1 and stays different (not reported
   * again); weight[9] (-1.75) becomes -1.5 on rank 2 at step 3: a new
   * finding. The ULP distance between -1.75 and -1.5 is 2^21. */
  perturb ch[] = {{1, 1, "embed", 0, 0.5}, {2, 3, "weight", 9, -1.5}};
  run_case rc = {.size = 3, .steps = 6, .interval = 1, .changes = ch,
                 .nchanges = 2};
  run(&rc);
  const vqc_finding *d[8];
  cr_assert_eq(of_kind(&rc.findings, VQC_FINDING_DIVERGENCE, d, 8), 2);
  const vqc_finding *e = find_tensor(&rc.findings, VQC_FINDING_DIVERGENCE,
                                     "embed");
  const vqc_finding *w = find_tensor(&rc.findings, VQC_FINDING_DIVERGENCE,
                                     "weight");
  cr_assert(e && w);
  cr_expect_eq(e->step, 1);
  cr_expect_eq(e->ranks[0], 1);
  cr_expect_eq(det_int(e, "first_index"), 0);
  cr_expect_eq(w->step, 3);
  cr_assert_eq(w->nranks, 1);
  cr_expect_eq(w->ranks[0], 2);
  cr_expect_eq(det_int(w, "first_index"), 9);
  expect_coords(json_object_get(w->detail, "coords"), 1, 1);
  cr_expect_eq(det_num(w->detail, "max_abs_diff"), 0.25);
  cr_expect_eq(det_int(w, "ulp"), 1 << 21);
  vqc_findings_free(&rc.findings);
}

Test(divergence, ulp_across_zero, .timeout = 60) {
  /* embed[8] and embed[16] are +0. -0 has other bits (the digest sees it)
   * but is 0 ULP away; -2^-149, the smallest negative subnormal, is 1 ULP
   * away across zero. */
  perturb ch[] = {{1, 0, "embed", 8, -0.0}, {1, 0, "embed", 16, -0x1p-149}};
  run_case rc = {.size = 2, .steps = 1, .interval = 1, .changes = ch,
                 .nchanges = 2};
  run(&rc);
  cr_assert_eq(rc.findings.count, 1);
  const vqc_finding *x = &rc.findings.items[0];
  cr_expect_eq(det_int(x, "differing"), 2);
  cr_expect_eq(det_int(x, "first_index"), 8);
  cr_expect_eq(det_int(x, "ulp"), 1);
  cr_expect_eq(det_num(x->detail, "max_abs_diff"), 0x1p-149);
  cr_expect_eq(det_num(x->detail, "max_rel_diff"), 1.0);
  vqc_findings_free(&rc.findings);
}

Test(divergence, five_ranks_two_outliers_in_different_groups, .timeout = 60) {
  /* Rank 1 changes embed[7]; rank 3 changes embed[100] and embed[200]:
   * three groups, reference {0, 2, 4}. */
  perturb ch[] = {{1, 0, "embed", 7, 2.0},
                  {3, 0, "embed", 100, -1.0},
                  {3, 0, "embed", 200, 4.0}};
  run_case rc = {.size = 5, .steps = 2, .interval = 1, .changes = ch,
                 .nchanges = 3};
  run(&rc);
  cr_assert_eq(rc.findings.count, 1);
  const vqc_finding *x = &rc.findings.items[0];
  cr_expect_eq(x->kind, VQC_FINDING_DIVERGENCE);
  cr_expect_eq(x->step, 0);
  cr_assert_eq(x->nranks, 2);
  cr_expect_eq(x->ranks[0], 1);
  cr_expect_eq(x->ranks[1], 3);
  cr_expect_eq(det_int(x, "first_index"), 7); /* top level: lowest outlier */
  cr_expect_eq(json_array_size(json_object_get(x->detail, "groups")), 3);
  const json_t *g0 = json_object_get(
      json_array_get(json_object_get(x->detail, "groups"), 0), "ranks");
  cr_expect_eq(json_array_size(g0), 3);
  const json_t *outs = json_object_get(x->detail, "outliers");
  cr_assert_eq(json_array_size(outs), 2);
  const json_t *o3 = json_array_get(outs, 1);
  cr_expect_eq(json_integer_value(json_object_get(o3, "rank")), 3);
  cr_expect_eq(json_integer_value(json_object_get(o3, "first_index")), 100);
  cr_expect_eq(json_integer_value(json_object_get(o3, "differing")), 2);
  /* embed[200] = 0 -> 4: abs 4; embed[100] = 0.25 -> -1: abs 1.25 */
  cr_expect_eq(det_num(o3, "max_abs_diff"), 4.0);
  cr_expect(strstr(x->message, "ranks 1, 3"), "message: %s", x->message);
  vqc_findings_free(&rc.findings);
}

Test(divergence, a_tie_blames_no_rank, .timeout = 60) {
  /* Ranks 2 and 3 make the same change: two groups of two, no majority.
   * No rank is the outlier; the bytes are compared against the lowest
   * rank's only to say where they differ. */
  perturb ch[] = {{2, 1, "bias", 4, 10.0}, {3, 1, "bias", 4, 10.0}};
  run_case rc = {.size = 4, .steps = 3, .interval = 1, .changes = ch,
                 .nchanges = 2};
  run(&rc);
  cr_assert_eq(rc.findings.count, 1);
  const vqc_finding *x = &rc.findings.items[0];
  cr_expect_str_eq(x->tensor, "bias");
  cr_assert_eq(x->nranks, 4);
  for (int r = 0; r < 4; r++) cr_expect_eq(x->ranks[r], r);
  cr_expect(strstr(x->message, "no majority: ranks {0, 1} and {2, 3} "
                   "differ") != NULL, "message: %s", x->message);
  cr_expect(json_is_false(json_object_get(x->detail, "majority")));
  cr_expect_null(json_object_get(x->detail, "reference_rank"));
  cr_expect_null(json_object_get(x->detail, "outliers"));
  cr_expect_null(json_object_get(x->detail, "reference_value"));
  cr_expect_eq(det_int(x, "base_rank"), 0);
  cr_expect_eq(det_num(x->detail, "base_value"), 2.0);
  cr_expect_eq(det_num(x->detail, "value"), 10.0);
  cr_expect_eq(json_array_size(json_object_get(x->detail, "differences")), 2);
  vqc_findings_free(&rc.findings);
}

Test(divergence, three_ranks_three_digests_blame_no_rank, .timeout = 60) {
  /* Ranks 1 and 2 change bias[4] to different values: {0}, {1}, {2}. */
  perturb ch[] = {{1, 0, "bias", 4, 10.0}, {2, 0, "bias", 4, 12.0}};
  run_case rc = {.size = 3, .steps = 1, .interval = 1, .changes = ch,
                 .nchanges = 2};
  run(&rc);
  cr_assert_eq(rc.findings.count, 1);
  const vqc_finding *x = &rc.findings.items[0];
  cr_assert_eq(x->nranks, 3);
  cr_expect(strstr(x->message, "no majority: ranks 0, 1, 2 all differ") !=
                NULL, "message: %s", x->message);
  cr_expect_null(strstr(x->message, "differs on rank"), "%s", x->message);
  cr_expect(json_is_false(json_object_get(x->detail, "majority")));
  cr_expect_eq(json_array_size(json_object_get(x->detail, "groups")), 3);
  /* 2 against 1 is still a majority. */
  perturb ch2[] = {{2, 0, "bias", 4, 12.0}};
  run_case rc2 = {.size = 3, .steps = 1, .interval = 1, .changes = ch2,
                  .nchanges = 1};
  run(&rc2);
  cr_assert_eq(rc2.findings.count, 1);
  x = &rc2.findings.items[0];
  cr_assert_eq(x->nranks, 1);
  cr_expect_eq(x->ranks[0], 2);
  cr_expect(json_is_true(json_object_get(x->detail, "majority")));
  cr_expect_eq(det_int(x, "reference_rank"), 0);
  vqc_findings_free(&rc.findings);
  vqc_findings_free(&rc2.findings);
}

Test(divergence, second_localisation_piece_and_integers, .timeout = 60) {
  /* big[300001] lies in the second 1 MiB piece: coords [468, 481]. It is
   * (300001 % 1000) * 0.5 = 0.5; rank 1 sets it to 3. The
   * counter (int64) also differs on rank 0 at step 0 with 2 ranks: no
   * majority, both ranks named, the values shown against rank 0's, and ULP
   * is not defined for integers. */
  perturb ch[] = {{1, 1, "big", 300001, 3.0}, {0, 0, "counter", 0, 9}};
  run_case rc = {.size = 2, .steps = 2, .interval = 1, .changes = ch,
                 .nchanges = 2};
  run(&rc);
  const vqc_finding *b = find_tensor(&rc.findings, VQC_FINDING_DIVERGENCE,
                                     "big");
  const vqc_finding *c = find_tensor(&rc.findings, VQC_FINDING_DIVERGENCE,
                                     "counter");
  cr_assert(b && c, "%d findings", rc.findings.count);
  cr_expect_eq(b->step, 1);
  cr_expect_eq(det_int(b, "first_index"), 300001);
  expect_coords(json_object_get(b->detail, "coords"), 468, 481);
  cr_expect_eq(det_num(b->detail, "base_value"), 0.5);
  cr_expect_eq(det_num(b->detail, "value"), 3.0);
  cr_expect_eq(det_int(b, "differing"), 1);
  cr_expect_eq(c->step, 0);
  cr_assert_eq(c->nranks, 2);
  cr_expect_eq(c->ranks[0], 0);
  cr_expect_eq(c->ranks[1], 1);
  cr_expect(strstr(c->message, "no majority: ranks {0} and {1} differ") !=
                NULL, "message: %s", c->message);
  cr_expect_eq(det_int(c, "base_value"), 9);
  cr_expect_eq(det_int(c, "value"), 7);
  cr_expect(json_is_null(json_object_get(c->detail, "ulp")));
  vqc_findings_free(&rc.findings);
}

Test(divergence, same_step_tensors_listed_not_reported_twice, .timeout = 60) {
  perturb ch[] = {{1, 1, "weight", 0, 5.0}, {1, 1, "bias", 0, 5.0}};
  run_case rc = {.size = 2, .steps = 4, .interval = 1, .changes = ch,
                 .nchanges = 2};
  run(&rc);
  cr_assert_eq(rc.findings.count, 1);
  const vqc_finding *x = &rc.findings.items[0];
  cr_expect_str_eq(x->tensor, "weight"); /* first in registry order */
  const json_t *also = json_object_get(x->detail, "also_differing");
  cr_assert_eq(json_array_size(also), 1);
  cr_expect_str_eq(json_string_value(json_array_get(also, 0)), "bias");
  vqc_findings_free(&rc.findings);
}

Test(divergence, interval_and_last_step, .timeout = 60) {
  /* interval 3 over 5 steps checks 0 and 3, and finish checks 4. A change
   * at step 1 is seen at step 3; one at step 4 only by finish. */
  perturb ch[] = {{1, 1, "embed", 2, 1.0}, {1, 4, "weight", 2, 1.0}};
  run_case rc = {.size = 2, .steps = 5, .interval = 3, .changes = ch,
                 .nchanges = 2};
  run(&rc);
  const vqc_finding *e = find_tensor(&rc.findings, VQC_FINDING_DIVERGENCE,
                                     "embed");
  const vqc_finding *w = find_tensor(&rc.findings, VQC_FINDING_DIVERGENCE,
                                     "weight");
  cr_assert(e && w, "%d findings", rc.findings.count);
  cr_expect_eq(e->step, 3);
  cr_expect_eq(w->step, 4);
  vqc_findings_free(&rc.findings);
}

Test(divergence, no_finding_when_all_agree, .timeout = 60) {
  for (int size = 1; size <= 4; size++) {
    run_case rc = {.size = size, .steps = 4, .interval = 1};
    run(&rc);
    cr_expect_eq(rc.findings.count, 0, "%d ranks: %d findings, first: %s",
                 size, rc.findings.count,
                 rc.findings.count ? rc.findings.items[0].message : "");
    vqc_findings_free(&rc.findings);
  }
}

/* ---- nonfinite */

Test(divergence, nan_and_inf_on_one_rank, .timeout = 60) {
  perturb ch[] = {{2, 1, "weight", 5, NAN}, {2, 1, "weight", 6, INFINITY},
                  {2, 3, "embed", 0, NAN}};
  run_case rc = {.size = 3, .steps = 5, .interval = 1, .changes = ch,
                 .nchanges = 3};
  run(&rc);
  const vqc_finding *n[8];
  /* once per rank: the NaN in embed at step 3 is not a new finding */
  cr_assert_eq(of_kind(&rc.findings, VQC_FINDING_NONFINITE, n, 8), 1);
  const vqc_finding *x = n[0];
  cr_expect_eq(x->step, 1);
  cr_expect_str_eq(x->tensor, "weight");
  cr_assert_eq(x->nranks, 1);
  cr_expect_eq(x->ranks[0], 2);
  cr_expect_eq(det_int(x, "count"), 2);
  cr_expect_eq(det_int(x, "nan"), 1);
  cr_expect_eq(det_int(x, "inf"), 1);
  cr_expect_eq(det_int(x, "first_index"), 5);
  expect_coords(json_object_get(x->detail, "coords"), 0, 5);
  /* the changed bits also make weight diverge on rank 2 */
  const vqc_finding *d = find_tensor(&rc.findings, VQC_FINDING_DIVERGENCE,
                                     "weight");
  cr_assert(d);
  cr_expect_eq(d->ranks[0], 2);
  cr_expect_eq(det_int(d, "differing"), 2);
  cr_expect_str_eq(json_string_value(json_object_get(d->detail,
                                                     "outlier_value")), "nan");
  vqc_findings_free(&rc.findings);
}

Test(divergence, inf_on_every_rank_is_one_finding, .timeout = 60) {
  perturb ch[] = {{0, 2, "bias", 3, -INFINITY}, {1, 2, "bias", 3, -INFINITY},
                  {2, 2, "bias", 3, -INFINITY}};
  run_case rc = {.size = 3, .steps = 4, .interval = 1, .changes = ch,
                 .nchanges = 3};
  run(&rc);
  cr_assert_eq(rc.findings.count, 1, "%d findings", rc.findings.count);
  const vqc_finding *x = &rc.findings.items[0];
  cr_expect_eq(x->kind, VQC_FINDING_NONFINITE);
  cr_expect_eq(x->step, 2);
  cr_expect_str_eq(x->tensor, "bias");
  cr_expect_eq(x->nranks, 3);
  cr_expect_eq(det_int(x, "inf"), 1);
  cr_expect_eq(det_int(x, "first_index"), 3);
  vqc_findings_free(&rc.findings);
}

/* ---- traces */

static void remove_dir(const char *dir, int size) {
  char path[512];
  for (int r = 0; r < size; r++) {
    snprintf(path, sizeof path, "%s/rank-%d.trace.jsonl", dir, r);
    unlink(path);
  }
  rmdir(dir);
}

Test(divergence, trace_one_line_per_tensor_per_checked_step, .timeout = 60) {
  char dir[] = "/tmp/vqc-test-trace-XXXXXX";
  cr_assert(mkdtemp(dir) != NULL);
  /* interval 4 over 6 steps: steps 0, 4 and 5 (finish) are checked. */
  perturb ch[] = {{1, 2, "embed", 1, 3.0}};
  run_case rc = {.size = 2, .steps = 6, .interval = 4, .changes = ch,
                 .nchanges = 1, .run_dir = dir};
  run(&rc);
  cr_expect_eq(rc.findings.count, 1);

  /* The digests rank 0 should have written: its state never changes. */
  rank_state s;
  cr_assert_eq(state_init(&s), VQC_OK);
  const char *names[] = {"embed", "weight", "bias", "counter", "big"};
  const char *dtypes[] = {"float32", "float32", "float64", "int64", "float32"};
  const int64_t steps[] = {0, 4, 5};
  for (int r = 0; r < 2; r++) {
    char path[512];
    cr_assert_eq(vqc_trace_path(dir, r, path, sizeof path), VQC_OK);
    vqc_trace t;
    vqc_status st = vqc_trace_read(path, &t);
    cr_assert_eq(st, VQC_OK, "%s", vqc_last_error());
    cr_assert_eq(t.count, 15, "rank %d: %zu lines", r, t.count);
    for (size_t i = 0; i < t.count; i++) {
      const vqc_trace_record *x = &t.items[i];
      const vqc_param *p = &s.list.items[i % 5];
      cr_expect_eq(x->rank, r);
      cr_expect_eq(x->step, steps[i / 5]);
      cr_expect_str_eq(x->tensor, names[i % 5]);
      cr_expect_str_eq(x->dtype, dtypes[i % 5]);
      cr_expect_str_eq(x->digest_algo, "vqc-xxh3-tree-1");
      cr_expect_eq(x->ndim, p->ndim);
      for (int k = 0; k < p->ndim; k++) cr_expect_eq(x->shape[k], p->shape[k]);
      uint64_t want;
      cr_assert_eq(vqc_param_digest(p, &want), VQC_OK);
      bool changed = r == 1 && i % 5 == 0 && x->step >= 2;
      if (changed)
        cr_expect_neq(x->digest, want, "rank 1 embed at step %" PRId64,
                      x->step);
      else
        cr_expect_eq(x->digest, want, "rank %d '%s' step %" PRId64, r,
                     x->tensor, x->step);
    }
    vqc_trace_free(&t);
  }
  state_free(&s);
  vqc_findings_free(&rc.findings);
  remove_dir(dir, 2);
}

Test(divergence, trace_round_trip_and_errors) {
  char dir[] = "/tmp/vqc-test-trace-XXXXXX";
  cr_assert(mkdtemp(dir) != NULL);
  char path[512];
  cr_assert_eq(vqc_trace_path(dir, 3, path, sizeof path), VQC_OK);
  vqc_trace_writer *w = NULL;
  cr_assert_eq(vqc_trace_writer_open(path, &w), VQC_OK);
  vqc_trace_record r = {.rank = 3, .step = 12, .tensor = "enc.\"q\"\\0",
                        .dtype = "bfloat16", .ndim = 3, .shape = {2, 0, 5},
                        .digest_algo = VQC_TRACE_DIGEST_ALGO,
                        .digest = 0x0123456789abcdefULL};
  cr_assert_eq(vqc_trace_write(w, &r), VQC_OK);
  r.step = 13;
  r.ndim = 0;
  r.digest = 0;
  cr_assert_eq(vqc_trace_write(w, &r), VQC_OK);
  r.tensor[0] = '\0';
  cr_expect_eq(vqc_trace_write(w, &r), VQC_EINVAL); /* never write bad lines */
  vqc_trace_writer_close(w);

  /* the exact bytes of the first line */
  FILE *f = fopen(path, "r");
  char line[512];
  cr_assert(fgets(line, sizeof line, f));
  fclose(f);
  cr_expect_str_eq(line,
                   "{\"schema\":\"vqcheck-trace/1\",\"rank\":3,\"step\":12,"
                   "\"tensor\":\"enc.\\\"q\\\"\\\\0\",\"dtype\":\"bfloat16\","
                   "\"shape\":[2,0,5],\"digest_algo\":\"vqc-xxh3-tree-1\","
                   "\"digest\":\"0123456789abcdef\"}\n");

  vqc_trace t;
  cr_assert_eq(vqc_trace_read(path, &t), VQC_OK, "%s", vqc_last_error());
  cr_assert_eq(t.count, 2);
  cr_expect_str_eq(t.items[0].tensor, "enc.\"q\"\\0");
  cr_expect_eq(t.items[0].digest, 0x0123456789abcdefULL);
  cr_expect_eq(t.items[0].shape[2], 5);
  cr_expect_eq(t.items[1].ndim, 0);
  cr_expect_eq(t.items[1].digest, 0);
  vqc_trace_free(&t);
  unlink(path);
  rmdir(dir);

  /* bad lines: the error names the line and the field */
  const char *good_tail = "\"dtype\":\"float32\",\"shape\":[2],"
                          "\"digest_algo\":\"a\",\"digest\":\"00000000000000ff\"}";
  char buf[512];
  vqc_trace_record x;
  snprintf(buf, sizeof buf, "{\"schema\":\"vqcheck-trace/1\",\"rank\":0,"
           "\"step\":1,\"tensor\":\"t\",\"extra\":[1],%s", good_tail);
  cr_expect_eq(vqc_trace_parse_line(buf, "f.jsonl", 4, &x), VQC_OK,
               "%s", vqc_last_error());
  cr_expect_eq(x.digest, 255);
  struct { const char *line, *field; } bad[] = {
      {"{\"schema\":\"vqcheck-trace/2\",\"rank\":0,\"step\":1,\"tensor\":\"t\",",
       "'schema'"},
      {"{\"schema\":\"vqcheck-trace/1\",\"rank\":-1,\"step\":1,\"tensor\":\"t\",",
       "'rank'"},
      {"{\"schema\":\"vqcheck-trace/1\",\"rank\":0,\"step\":\"1\",\"tensor\":\"t\",",
       "'step'"},
      {"{\"schema\":\"vqcheck-trace/1\",\"rank\":0,\"step\":1,", "'tensor'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf(buf, sizeof buf, "%s%s", bad[i].line, good_tail);
    cr_expect_eq(vqc_trace_parse_line(buf, "f.jsonl", 7, &x), VQC_EPARSE,
                 "case %zu accepted", i);
    cr_expect(strstr(vqc_last_error(), "f.jsonl:7") &&
                  strstr(vqc_last_error(), bad[i].field),
              "case %zu: %s", i, vqc_last_error());
  }
  const char *digests[] = {"00000000000000FF", "ff", "00000000000000fg", ""};
  for (size_t i = 0; i < 4; i++) {
    snprintf(buf, sizeof buf, "{\"schema\":\"vqcheck-trace/1\",\"rank\":0,"
             "\"step\":1,\"tensor\":\"t\",\"dtype\":\"float32\",\"shape\":[2],"
             "\"digest_algo\":\"a\",\"digest\":\"%s\"}", digests[i]);
    cr_expect_eq(vqc_trace_parse_line(buf, "f.jsonl", 1, &x), VQC_EPARSE,
                 "digest '%s' accepted", digests[i]);
    cr_expect(strstr(vqc_last_error(), "'digest'"), "%s", vqc_last_error());
  }
  cr_expect_eq(vqc_trace_parse_line("{\"schema\":", "f.jsonl", 2, &x),
               VQC_EPARSE);
  cr_expect_eq(vqc_trace_parse_line("[1,2]", "f.jsonl", 2, &x), VQC_EPARSE);
  cr_expect_eq(vqc_trace_read("/nonexistent/vqc.trace.jsonl", &t), VQC_EIO);
}
