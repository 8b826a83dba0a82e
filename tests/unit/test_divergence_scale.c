/* test_divergence_scale.c: the divergence checker's two-phase agreement at
 * 1, 2, 5, 64 and 1024 ranks (threads backend).
 *
 * Each rank registers the same small state (so 1024 ranks fit in one
 * process), runs STEPS checked steps, and may change its copy first:
 *   clean      nothing changes: no finding;
 *   one_rank   the last rank changes embed[7] at step 1: one divergence
 *              naming only that rank (a majority exists from 3 ranks);
 *   all_ranks  every rank writes its own rank number into embed[7] at
 *              step 1: one divergence naming every rank, no majority;
 *   nan_one    the middle rank writes NaN into weight[3] at step 2: one
 *              nonfinite finding for that rank (and weight's divergence).
 * The side channel's traffic is read from vqc_comm_get_stats: a clean
 * check costs the same bytes per rank at 2 and at 1024 ranks (the test
 * fails if they grow with the number of ranks).
 *
 * Every case runs twice: checked synchronously at step_end, and overlapped
 * (opts.overlap: digested on a helper thread, settled before the rank
 * writes its state, as the runner does); both must give the same findings
 * (kind, step, tensor, ranks, message). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkers.h"
#include "vqc/comm.h"
#include "vqc/nn.h"

#define STEPS 4
#define NTENSORS 3

typedef enum { CLEAN, ONE_RANK, ALL_RANKS, NAN_ONE } scale_case;

typedef struct scale_run {
  int size;
  scale_case what;
  bool overlap;
  vqc_findings findings;
  /* rank 0's side-channel bytes (sent + received) over the checks of steps
   * 1..STEPS-1 (the first check also compares the registries). */
  uint64_t steady_bytes;
  uint64_t steady_calls;
} scale_run;

static vqc_status rank_main(vqc_comm *c, void *arg) {
  scale_run *run = arg;
  const int rank = vqc_comm_rank(c), size = vqc_comm_size(c);
  float embed[8 * 4], weight[16];
  int64_t counter[1] = {3};
  for (int i = 0; i < 32; i++) embed[i] = (float)i * 0.25f;
  for (int i = 0; i < 16; i++) weight[i] = (float)(i - 8) * 0.5f;
  vqc_param_list list;
  vqc_param_list_init(&list);
  int64_t se[2] = {8, 4}, sw[1] = {16}, sc[1] = {1};
  vqc_status s = vqc_param_list_add(&list, "embed", VQC_F32, embed, NULL, 2, se);
  if (s == VQC_OK)
    s = vqc_param_list_add(&list, "weight", VQC_F32, weight, NULL, 1, sw);
  if (s == VQC_OK)
    s = vqc_param_list_add(&list, "counter", VQC_I64, counter, NULL, 1, sc);

  vqc_checker chk;
  memset(&chk, 0, sizeof chk);
  vqc_check_ctx ctx = {.comm = c, .rank = rank, .size = size, .state = &list,
                       .findings = &run->findings,
                       .opts = {.interval = 1, .overlap = run->overlap}};
  if (s == VQC_OK) s = vqc_checker_divergence(&chk);
  if (s == VQC_OK) s = chk.attach(&chk, &ctx);
  vqc_comm *side = vqc_comm_side(c);
  vqc_comm_stats before = {0, 0, 0};
  for (int64_t step = 0; s == VQC_OK && step < STEPS; step++) {
    /* The state is about to change: the overlapped check must finish. */
    if (step > 0) s = chk.settle(&chk, &ctx, false);
    if (run->what == ONE_RANK && step == 1 && rank == size - 1)
      embed[7] = 100.0f;
    if (run->what == ALL_RANKS && step == 1) embed[7] = (float)rank + 0.5f;
    if (run->what == NAN_ONE && step == 2 && rank == size / 2)
      weight[3] = NAN;
    if (step == 1) before = vqc_comm_get_stats(side);
    if (s == VQC_OK) s = chk.step_end(&chk, &ctx, step);
  }
  if (s == VQC_OK) s = chk.settle(&chk, &ctx, false);
  if (s == VQC_OK && rank == 0) {
    vqc_comm_stats after = vqc_comm_get_stats(side);
    run->steady_bytes = (after.bytes_sent + after.bytes_received) -
                        (before.bytes_sent + before.bytes_received);
    run->steady_calls = after.calls - before.calls;
  }
  if (s == VQC_OK) s = chk.finish(&chk, &ctx, VQC_OK);
  if (chk.destroy) chk.destroy(&chk, &ctx);
  vqc_param_list_free(&list);
  return s;
}

/* Runs the case overlapped and synchronously; keeps the synchronous
 * findings in run->findings after checking the overlapped ones equal them. */
static void run_case(scale_run *run) {
  scale_run twin = *run;
  twin.overlap = true;
  vqc_findings_init(&twin.findings);
  vqc_status s = vqc_threads_run(run->size, 120.0, rank_main, &twin, NULL);
  cr_assert_eq(s, VQC_OK, "%d ranks, overlapped: %s", run->size,
               vqc_last_error());
  run->overlap = false;
  vqc_findings_init(&run->findings);
  s = vqc_threads_run(run->size, 120.0, rank_main, run, NULL);
  cr_assert_eq(s, VQC_OK, "%d ranks: %s", run->size, vqc_last_error());

  cr_assert_eq(twin.findings.count, run->findings.count,
               "%d ranks: %d findings overlapped, %d synchronous", run->size,
               twin.findings.count, run->findings.count);
  for (int i = 0; i < run->findings.count; i++) {
    const vqc_finding *a = &run->findings.items[i], *b = &twin.findings.items[i];
    cr_expect_eq(a->kind, b->kind);
    cr_expect_eq(a->step, b->step);
    cr_expect_str_eq(a->tensor, b->tensor);
    cr_expect_str_eq(a->message, b->message);
    cr_expect_eq(a->nranks, b->nranks);
  }
  cr_expect_eq(twin.steady_bytes, run->steady_bytes);
  vqc_findings_free(&twin.findings);
}

static const vqc_finding *only(const vqc_findings *f, vqc_finding_kind kind) {
  const vqc_finding *hit = NULL;
  int n = 0;
  for (int i = 0; i < f->count; i++)
    if (f->items[i].kind == kind) {
      hit = &f->items[i];
      n++;
    }
  cr_assert_eq(n, 1, "%d findings of kind %s", n, vqc_finding_kind_name(kind));
  return hit;
}

static bool detail_majority(const vqc_finding *x) {
  return json_is_true(json_object_get(x->detail, "majority"));
}

ParameterizedTestParameters(divergence_scale, two_phase) {
  static int sizes[] = {1, 2, 5, 64, 1024};
  return cr_make_param_array(int, sizes, sizeof sizes / sizeof sizes[0]);
}

ParameterizedTest(int *size, divergence_scale, two_phase, .timeout = 600) {
  const int P = *size;

  scale_run clean = {.size = P, .what = CLEAN};
  run_case(&clean);
  cr_expect_eq(clean.findings.count, 0, "%d ranks, clean: %s", P,
               clean.findings.count ? clean.findings.items[0].message : "");
  /* One all_reduce per check of 2T + 4 words, sent and received: the same
   * at every P. */
  cr_expect_eq(clean.steady_calls, (uint64_t)(STEPS - 1), "%d ranks", P);
  cr_expect_eq(clean.steady_bytes,
               (uint64_t)(STEPS - 1) * 2u * 8u * (2u * NTENSORS + 4u),
               "%d ranks: %llu bytes", P,
               (unsigned long long)clean.steady_bytes);
  vqc_findings_free(&clean.findings);

  scale_run one = {.size = P, .what = ONE_RANK};
  run_case(&one);
  if (P == 1) {
    cr_expect_eq(one.findings.count, 0);
  } else {
    const vqc_finding *x = only(&one.findings, VQC_FINDING_DIVERGENCE);
    cr_expect_eq(x->step, 1);
    cr_expect_str_eq(x->tensor, "embed");
    if (P >= 3) {
      cr_expect(detail_majority(x), "%d ranks: %s", P, x->message);
      cr_assert_eq(x->nranks, 1, "%d ranks: %s", P, x->message);
      cr_expect_eq(x->ranks[0], P - 1);
      cr_expect_eq(json_integer_value(json_object_get(x->detail,
                                                      "first_index")), 7);
    } else {
      cr_expect_not(detail_majority(x));
      cr_expect_eq(x->nranks, 2);
    }
  }
  vqc_findings_free(&one.findings);

  scale_run all = {.size = P, .what = ALL_RANKS};
  run_case(&all);
  if (P == 1) {
    cr_expect_eq(all.findings.count, 0);
  } else {
    const vqc_finding *x = only(&all.findings, VQC_FINDING_DIVERGENCE);
    cr_expect_eq(x->step, 1);
    cr_expect_not(detail_majority(x), "%d ranks: %s", P, x->message);
    cr_expect_eq(x->nranks, P);
    cr_expect_eq(json_array_size(json_object_get(x->detail, "groups")),
                 (size_t)P);
  }
  vqc_findings_free(&all.findings);

  scale_run nan_one = {.size = P, .what = NAN_ONE};
  run_case(&nan_one);
  const vqc_finding *n = only(&nan_one.findings, VQC_FINDING_NONFINITE);
  cr_expect_eq(n->step, 2);
  cr_expect_str_eq(n->tensor, "weight");
  cr_assert_eq(n->nranks, 1);
  cr_expect_eq(n->ranks[0], P / 2);
  cr_expect_eq(json_integer_value(json_object_get(n->detail, "nan")), 1);
  cr_expect_eq(json_integer_value(json_object_get(n->detail, "first_index")),
               3);
  if (P >= 3) {
    const vqc_finding *x = only(&nan_one.findings, VQC_FINDING_DIVERGENCE);
    cr_expect_eq(x->ranks[0], P / 2);
  }
  vqc_findings_free(&nan_one.findings);
}
